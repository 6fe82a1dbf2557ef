#!/usr/bin/env python3
"""Training data for the tool-calling model: prompts rendered exactly as ContextCache renders the
Qwen3 chat template (core/chat_format_qwen3.cpp), tokenized with the bundled Qwen3 tokenizer.

Sources (all examples get a random subset of tools, shuffled, then rendered in canonical order):
  * the bundled sample tools (resources/toolsets/tools_100.json): queries generated from each
    tool's schema (phrasings of its name/description, argument values drawn from the schema);
  * BFCL v4 (/work/shared/data/bfcl, Apache-2.0): real queries with their functions and answers
    (live_multiple, multiple, live_simple) and queries no offered function fits (live_irrelevance);
  * general chit-chat / knowledge questions written here, answered without a tool.
The evaluation set resources/eval/tool_calls.jsonl is held out: any generated query whose word
set is close to an evaluation query is dropped (and resources/toolsets/sample_queries.json, which
paraphrases evaluation queries, is not used at all).

Also: requests for a bundled tool that the context does not offer (answered "no tool"), so the
model has to read its context; the evaluation's own tool sets never appear as a training context.

Output: train.pkl, a pickle of {"groups": [{"prefix", "n_tools", "suffixes": [(array('i') ids,
n_prompt)], "system"}], "stats": {...}}.
With --phrasing v3 also synthetic tool families (families.py; the families in
families.HELD_OUT_FAMILIES and BFCL functions of held-out families never appear, asserted per
tool), every tool's name in one style in a share of the contexts (--styles), and more kinds of
no-tool request; resources/eval/tool_families.jsonl evaluates the held-out families.

Usage: make_data.py --out DIR [--groups 5000] [--seed 1234] [--max-prefix 3600] [--max-queries 40]
       [--tools-asked 20] [--max-k 26] [--dump-tools] [--phrasing v1|v2|v3] [--styles 0.6]
"""
import argparse
import copy
import json
import os
import random
import re
import sys

import array
import pickle

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from qwen3_tokenizer import Qwen3Tokenizer, unpacked  # noqa: E402
from intents import INTENTS, PREPOSITIONS  # noqa: E402
from intents_more import CHAT_MORE, DOMAIN_QUESTIONS, MORE_INTENTS  # noqa: E402
import families  # noqa: E402

# every hand-written phrasing of each bundled tool (intents.py, then intents_more.py)
ALL_INTENTS = {n: INTENTS.get(n, []) + MORE_INTENTS.get(n, []) for n in set(INTENTS) | set(MORE_INTENTS)}

# --phrasing: "v1" is the generator of the shipped model's first two runs (intents.py only, 1-3
# queries per asked tool, 2-4 general requests per context); "v2" adds intents_more.py (14 more
# phrasings per tool, asked 65% of the time), questions about the tools' own domains that no tool
# answers, more general chat, and 2-3 queries per asked tool and 3-5 general requests per context.
# "v3" (make_group_v3) keeps v2's bundled queries and general requests and adds the synthetic tool
# families of families.py, name styles over every tool, and three more kinds of no-tool request.
PHRASING = "v1"
CHATS = None   # (lo, hi) no-tool requests per context, from --chats

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BFCL = os.environ.get("BFCL_DIR", "/work/shared/data/bfcl")

TOOLS_INTRO = ("# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
               "You are provided with function signatures within <tools></tools> XML tags:\n<tools>")
NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,127}$")


def dumps(v):
    """Python's json.dumps(ensure_ascii=False) with ", " / ": ": core/json_text.cpp py_json_dumps."""
    return json.dumps(v, ensure_ascii=False, separators=(", ", ": "))


def normalise_tool(t):
    """Bare {name, description, parameters} -> OpenAI form, as core/tool_set.cpp make_tool does."""
    if "type" in t or "function" in t:
        return t
    return {"type": "function", "function": t}


class Renderer:
    """Token ids of prompt = prefix (system turn with tools) + suffix (user turn, assistant header)."""

    def __init__(self, tok, system_prompt):
        self.tok = tok
        self.sp = tok.sp
        head = "system\n" + (system_prompt + "\n\n" if system_prompt else "") + TOOLS_INTRO + "\n"
        self.head_ids = [self.sp("<|im_start|>")] + tok.encode(head)
        self.tail_ids = (tok.encode("</tools>\n\nFor each function call, return a json object with function name and arguments within ")
                         + [self.sp("<tool_call>"), self.sp("</tool_call>")] + tok.encode(" XML tags:\n")
                         + [self.sp("<tool_call>")]
                         + tok.encode("\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n")
                         + [self.sp("</tool_call>"), self.sp("<|im_end|>")] + tok.encode("\n"))
        self.line_cache = {}

    def line_ids(self, canonical):
        # Each tool line is `{...}` followed by "\n": the pre-tokenizer never joins tokens across
        # that boundary (`}\n` ends a punctuation run, `{"` starts the next), so per-line ids
        # concatenate to the ids of the whole block; check_pieces() verifies this.
        ids = self.line_cache.get(canonical)
        if ids is None:
            ids = self.line_cache[canonical] = self.tok.encode(canonical + "\n")
        return ids

    def prompt_ids(self, tools, query):
        canon = sorted((dumps(normalise_tool(t)) for t in tools), key=lambda s: s.encode("utf-8"))
        ids = list(self.head_ids)
        for c in canon:
            ids += self.line_ids(c)
        ids += self.tail_ids
        ids += ([self.sp("<|im_start|>")] + self.tok.encode("user\n" + query) + [self.sp("<|im_end|>")]
                + self.tok.encode("\n") + [self.sp("<|im_start|>")] + self.tok.encode("assistant\n")
                + [self.sp("<think>")] + self.tok.encode("\n\n") + [self.sp("</think>")] + self.tok.encode("\n\n"))
        return ids, canon

    def full_text_ids(self, tools, system_prompt, query):
        """Same prompt tokenized as whole plain pieces, for check_pieces()."""
        canon = sorted((dumps(normalise_tool(t)) for t in tools), key=lambda s: s.encode("utf-8"))
        text = "system\n" + (system_prompt + "\n\n" if system_prompt else "") + TOOLS_INTRO
        for c in canon:
            text += "\n" + c
        text += "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
        ids = [self.sp("<|im_start|>")] + self.tok.encode(text)
        return ids

    def answer_ids(self, call):
        if call is None:
            raise ValueError("use plain_answer_ids")
        body = dumps({"name": call["name"], "arguments": call["arguments"]})
        return ([self.sp("<tool_call>")] + self.tok.encode("\n" + body + "\n") + [self.sp("</tool_call>"),
                                                                               self.sp("<|im_end|>")])

    def plain_answer_ids(self, text):
        return self.tok.encode(text) + [self.sp("<|im_end|>")]


# ---- values for generated queries ----------------------------------------------------------------

CITIES = ["Paris", "Berlin, Germany", "Osaka", "Nairobi", "Toronto, ON", "Denver, CO", "Seattle, WA", "Madrid",
          "Cape Town", "Hanoi", "Oslo, Norway", "Chicago, IL", "Lima, Peru", "Dublin", "Prague", "Melbourne",
          "Montreal", "Seoul", "Athens, Greece", "Bogota", "Zurich", "Miami, FL", "Kyoto", "Helsinki", "Cairo",
          "Vancouver, BC", "Porto", "Edinburgh", "Budapest", "Santiago, Chile", "Austin", "Hamburg", "Manila"]
AIRPORTS = ["JFK", "LHR", "CDG", "SFO", "ORD", "NRT", "FRA", "AMS", "SEA", "DXB", "SIN", "MAD", "YYZ", "BCN"]
CURRENCIES = ["USD", "EUR", "GBP", "JPY", "CHF", "CAD", "AUD", "SEK", "NOK", "MXN", "BRL", "CNY", "KRW", "PLN"]
TICKERS = ["MSFT", "GOOGL", "AMZN", "TSLA", "NVDA", "META", "IBM", "ORCL", "SAP", "SONY", "NFLX", "INTC"]
LANGS = ["en", "de", "fr", "es", "it", "ja", "pt", "nl", "sv", "ko", "zh"]
NAMES = ["maria", "li.wei", "tom", "priya", "omar", "ana", "ben", "yuki", "lena", "raj", "chloe", "ivan"]
WORDS = ["budget", "roadmap", "offsite", "launch", "backup", "invoice", "quarterly review", "team lunch",
         "migration plan", "security audit", "onboarding", "release notes", "design sync", "hiring plan",
         "vendor call", "sprint demo", "customer feedback", "tax documents", "server upgrade", "garden project"]
PHRASES = ["the build is green again", "please review the draft", "meeting moved to Thursday",
           "the shipment arrived damaged", "call me when you land", "water the plants", "renew the passport",
           "the printer on floor 3 is jammed", "send the slides before noon", "pick up the dry cleaning",
           "Where is the nearest pharmacy?", "I would like two coffees please", "The train leaves at nine"]
FILES = ["notes/todo.md", "src/main.cpp", "data/report.csv", "docs/README.md", "config/app.yaml", "logs/today.log"]
CODE = ["print(2 ** 16)", "print(len('hello'))", "import math; print(math.pi)", "print(sorted([3, 1, 2]))"]
SQL = ["SELECT COUNT(*) FROM users", "SELECT name FROM products WHERE price > 10", "SELECT * FROM orders LIMIT 5"]


# --values wide: argument values drawn from pools far too large to memorise (made-up places,
# people, titles and messages built from parts), so that the only way to write the value is to
# copy it from the query. "narrow" (the default, and every run up to run 9) uses the lists above.
VALUES = "narrow"
SYLLABLES = ["ka", "ri", "mon", "vel", "dor", "an", "bel", "sto", "lin", "gar", "ve", "nu", "tal", "es", "por",
             "hal", "mi", "sen", "ou", "bra", "ken", "lo", "zar", "fi", "del", "ham", "ost", "wyn", "cor", "ta",
             "ber", "gen", "vik", "sa", "rom", "ley", "ul", "dra", "pe", "nor"]
PLACE_ENDS = ["", "", "", "burg", "ton", "ville", "stad", "ford", " Bay", " Springs", "holm", "field", "mouth"]
REGIONS = ["", "", "", ", CA", ", TX", ", NY", ", WA", ", Norway", ", Italy", ", Japan", ", Chile", ", ON", ", Kenya",
           ", Spain", ", UK", ", Peru", ", FL", ", Austria", ", Brazil", ", India"]
FIRST = ["Ada", "Omar", "Priya", "Jonas", "Mei", "Carlos", "Aisha", "Tomas", "Ingrid", "Kofi", "Lucia", "Dmitri",
         "Hana", "Felix", "Nadia", "Arjun", "Sofia", "Mateo", "Yara", "Erik", "Leila", "Bruno", "Zoe", "Ravi"]
NOUNS = ["budget", "roadmap", "offsite", "launch", "backup", "invoice", "review", "lunch", "migration", "audit",
         "onboarding", "notes", "sync", "plan", "call", "demo", "feedback", "documents", "upgrade", "project",
         "report", "workshop", "retro", "kickoff", "deadline", "contract", "survey", "inventory", "payroll",
         "dinner", "rehearsal", "checkup", "lesson", "interview", "party", "trip", "renewal", "forecast",
         "proposal", "recital", "meetup", "clinic", "shipment", "order", "repair", "cleanup", "newsletter"]
ADJS = ["quarterly", "weekly", "annual", "urgent", "final", "draft", "team", "client", "garden", "kitchen",
        "spring", "winter", "board", "family", "school", "marketing", "sales", "design", "security", "travel",
        "evening", "morning", "budget", "product", "research", "hiring", "vendor", "holiday", "office"]
VERBS = ["send", "check", "review", "move", "book", "cancel", "bring", "fix", "call", "print", "sign", "water",
         "collect", "update", "confirm", "share", "renew", "order", "pack", "clean"]


def capitalised(s):
    return s[:1].upper() + s[1:]


def made_up(rng, n_syllables):
    return "".join(rng.choice(SYLLABLES) for _ in range(rng.choice(n_syllables)))


def wide_place(rng):
    return capitalised(made_up(rng, [2, 2, 3]) + rng.choice(PLACE_ENDS)) + rng.choice(REGIONS)


def wide_person(rng):
    last = made_up(rng, [2, 3])
    return f"{rng.choice(FIRST)} {capitalised(last)}"


def wide_title(rng):
    words = [rng.choice(ADJS) for _ in range(rng.choice([0, 1, 1, 2]))] + [rng.choice(NOUNS)]
    t = " ".join(words)
    return capitalised(t) if rng.random() < 0.5 else t


def wide_phrase(rng):
    return rng.choice([
        lambda: f"{rng.choice(VERBS)} the {wide_title(rng).lower()} before {rng.choice(['noon', 'Friday', 'five', 'the weekend', 'Monday'])}",
        lambda: f"the {wide_title(rng).lower()} is {rng.choice(['done', 'late', 'moved to ' + rng.choice(['Thursday', 'June', 'room 4']), 'on hold', 'ready'])}",
        lambda: f"please {rng.choice(VERBS)} the {rng.choice(NOUNS)} for {rng.choice(FIRST)}",
        lambda: f"meet me in {wide_place(rng).split(',')[0]} at {rng.randint(1, 12)}",
    ])()


def pick(rng, narrow, wide, p_wide=0.8):
    """A value from the fixed list, or (with --values wide, most of the time) from a large pool."""
    return wide(rng) if VALUES == "wide" and rng.random() < p_wide else rng.choice(narrow)


def words_of(name):
    return re.sub(r"[_.\-]+", " ", re.sub(r"([a-z])([A-Z])", r"\1 \2", name)).strip().lower()


def rand_id(rng, pname):
    prefix = "".join(w[0] for w in words_of(pname).split() if w not in ("id", "number")).upper() or "X"
    prefix = rng.choice([prefix[:3], "ORD", "ACC", "CUS", "T", "INV", "SKU", "P", "E", "AB", "LEAD"])
    return f"{prefix}-{rng.randint(100, 99999)}"


def example_from_desc(desc):
    m = re.search(r"e\.g\. '([^']+)'", desc or "")
    return m.group(1) if m else None


def gen_string(rng, pname, spec):
    desc = (spec.get("description") or "").lower()
    n = pname.lower()
    fmt = spec.get("format")
    if fmt == "date-time":
        d = f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
        t = f"{rng.randint(6, 20):02d}:{rng.choice(['00', '15', '30', '45'])}"
        off = rng.choice(["+00:00", "+01:00", "+02:00", "-05:00", "-08:00", "+09:00", "+05:30"])
        return f"{d}T{t}:00{off}", rng.choice([f"{d}T{t}:00{off}", f"{d} at {t}, UTC{off}", f"{d} {t} (offset {off})"])
    if fmt == "date":
        d = f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
        return d, d
    if fmt == "email" or "email" in n or "e-mail" in desc:
        v = f"{pick(rng, NAMES, lambda r: wide_person(r).lower().replace(' ', '.'))}@example.com"
        return v, v
    if fmt == "uri" or "url" in n:
        v = f"https://example.com/{pick(rng, WORDS, wide_title).lower().replace(' ', '-')}"
        return v, v
    ex = example_from_desc(spec.get("description"))
    if "currency" in n or "iso 4217" in desc:
        v = rng.choice(CURRENCIES)
    elif "airport" in desc or "iata" in desc or n in ("origin", "destination"):
        v = rng.choice(AIRPORTS)
    elif "symbol" in n or "ticker" in desc:
        v = rng.choice(TICKERS)
    elif "language" in n or "language" in desc:
        v = rng.choice(LANGS)
    elif any(k in n for k in ("location", "city", "address", "place", "origin", "destination", "near")):
        v = pick(rng, CITIES, wide_place)
    elif n.endswith("id") or n.endswith("_ids") or "number" in n or n.endswith("sku") or " id" in desc:
        v = rand_id(rng, pname)
    elif "path" in n or "file" in n or "directory" in n:
        v = rng.choice(FILES)
    elif n == "code" or "python" in desc:
        v = rng.choice(CODE)
    elif "sql" in n or "sql" in desc:
        v = rng.choice(SQL)
    elif n in ("text", "body", "message", "content", "description", "notes", "reason_text", "comment"):
        v = pick(rng, PHRASES, wide_phrase)
    elif ex is not None and rng.random() < 0.3:
        v = ex
    elif "name" in n:
        v = pick(rng, ["Ada Lovelace", "Grace Hopper", "Alan Turing", "Linus Park", "Mia Chen", "Noah Diaz"], wide_person)
    else:
        v = pick(rng, WORDS, wide_title)
    return v, (f"'{v}'" if rng.random() < 0.3 else v)


def gen_value(rng, pname, spec, depth=0):
    """(JSON value, how the query says it)."""
    typ = spec.get("type")
    if "enum" in spec and spec["enum"]:
        v = rng.choice(spec["enum"])
        return v, str(v)
    if typ == "boolean":
        v = rng.random() < 0.6
        return v, ("yes" if v else "no")
    if typ in ("integer", "number"):
        lo = spec.get("minimum", 1)
        hi = spec.get("maximum", max(lo + 10, 500))
        lo_i, hi_i = int(-(-lo // 1)), int(hi // 1)
        if typ == "number" and (rng.random() < 0.3 or hi_i < lo_i):
            v = round(rng.uniform(lo, hi), rng.choice([1, 2]))
            return v, str(v)
        v = rng.randint(lo_i, max(lo_i, min(hi_i, lo_i + rng.choice([5, 50, 500, 5000]))))
        return v, str(v)
    if typ == "array":
        items = spec.get("items", {"type": "string"})
        n = 1 if rng.random() < 0.6 else 2
        vals = [gen_value(rng, pname.rstrip("s"), items, depth + 1) for _ in range(n)]
        return [v for v, _ in vals], " and ".join(s for _, s in vals)
    if typ == "object" and depth < 2:
        props = spec.get("properties", {})
        req = spec.get("required", list(props)[:2])
        out, says = {}, []
        for k in props:
            if k in req or rng.random() < 0.2:
                v, s = gen_value(rng, k, props[k], depth + 1)
                out[k] = v
                says.append(f"{words_of(k)} {s}")
        return out, "(" + ", ".join(says) + ")"
    return gen_string(rng, pname, spec)


STARTS = ["", "", "Please ", "Can you ", "Could you ", "I need to ", "I want to ", "Help me ", "Go ahead and ",
          "Quick one: ", "hey, ", "I'd like you to "]


def first_sentence(desc):
    s = re.split(r"(?<=[.;])\s", desc.strip())[0].rstrip(".;")
    return s[:1].lower() + s[1:]


def query_for_tool(rng, fn):
    """A generated user query asking for `fn` and the expected call."""
    params = fn.get("parameters", {})
    props = params.get("properties", {})
    req = params.get("required", [])
    args, said = {}, []
    for k, spec in props.items():
        if k in req or rng.random() < 0.25:
            v, s = gen_value(rng, k, spec)
            args[k] = v
            form = rng.random()
            if k in PREPOSITIONS and form < 0.4:
                said.append(f"{rng.choice(PREPOSITIONS[k])} {s}")
            elif form < 0.6:
                said.append(f"{words_of(k)} {s}")
            elif form < 0.8:
                said.append(f"{words_of(k)}: {s}")
            elif form < 0.9:
                said.append(f"{k} = {s}")
            else:
                said.append(f"with {words_of(k)} {s}")
    rng.shuffle(said)
    r = rng.random()
    v2 = PHRASING in ("v2", "v3")
    intents = ALL_INTENTS if v2 else INTENTS
    if fn["name"] in intents and r < (0.65 if v2 else 0.5):
        task = rng.choice(intents[fn["name"]])
    elif r < (0.85 if v2 else 0.8):
        task = first_sentence(fn.get("description") or words_of(fn["name"]))
    else:
        task = words_of(fn["name"])
    start = rng.choice(STARTS)
    if start and start[0].isupper():
        head = start + task
    else:
        head = start + (task if start else task[:1].upper() + task[1:])
    if said:
        q = head + rng.choice([": ", ", ", " - ", " ", " "]) + rng.choice([", ", " ", " and "]).join(said)
    else:
        q = head
    q += rng.choice(["", ".", "?", " please.", ", thanks."])
    return q, {"name": fn["name"], "arguments": args}


CHITCHAT = [
    "Tell me a fun fact about owls.", "What year did the Berlin Wall fall?", "How are you doing today?",
    "Write a limerick about a sleepy cat.", "What is the boiling point of water at sea level?", "hello there",
    "Why is the sky blue?", "Give me three tips for better sleep.", "What does HTTP stand for?",
    "Can you recommend a board game for four players?", "Explain recursion to a ten year old.",
    "I appreciate your help, bye!", "Who painted the Mona Lisa?", "What's the largest ocean on Earth?",
    "Describe a sunset in one sentence.", "How many legs does a spider have?", "Good evening, assistant.",
    "What is the square root of 81?", "Suggest a name for a fantasy dragon.", "What is photosynthesis?",
    "Explain the difference between a list and a tuple in Python.", "Is a tomato a fruit or a vegetable?",
    "Translate nothing, just tell me how your day is going.", "What rhymes with orange?",
    "Who was the first person to walk on the Moon?", "Give me a motivational quote.", "That's great, cheers.",
    "What's the plural of cactus?", "Summarize the idea of supply and demand.", "Tell me a riddle.",
    "What is machine learning in simple words?", "How long is a marathon?", "hi", "yo what's up",
    "Which planet is closest to the Sun?", "What does a compiler do?", "Explain what DNS is, briefly.",
    "Recommend a movie for a rainy Sunday.", "How do bees make honey?", "I'm bored, any ideas?",
    "What is the speed of light?", "Define the word 'ephemeral'.", "What's your favourite colour?",
    "How many days are in a leap year?", "Why do cats purr?", "Perfect, that's everything I needed.",
    "What is the Pythagorean theorem?", "Write two lines of poetry about the sea.", "Who invented the telephone?",
    "What is inflation?", "How do I stay focused while studying?", "Explain gravity in one sentence.",
    "What are prime numbers?", "Can you tell me about the Roman Empire?", "Nice work!",
    "What language is spoken in Brazil?", "Give me a synonym for happy.", "What is a black hole?",
    "Explain object-oriented programming briefly.", "How tall is Mount Everest?", "Any advice for a job interview?",
    "What's the difference between weather and climate?", "Who wrote Pride and Prejudice?",
    "Explain what an API is to a beginner.", "How does a vaccine work?", "Tell me about the history of tea.",
    "What is the meaning of 'carpe diem'?", "Describe the water cycle.", "Why do leaves change colour in fall?",
]
# General requests built from templates and topics, so the "no tool" answer is learned from the
# shape of a request (explain, define, write, greet, thank) rather than from ~70 fixed strings.
TOPICS = [
    "black holes", "the French Revolution", "photosynthesis", "jazz music", "the immune system", "volcanoes",
    "the stock market", "quantum computing", "the printing press", "coral reefs", "the Silk Road", "origami",
    "electric cars", "the Renaissance", "sourdough bread", "chess openings", "the human heart", "glaciers",
    "the Olympic Games", "bitcoin", "climate change", "the Great Wall of China", "honeybees", "the internet",
    "democracy", "the moon landing", "dinosaurs", "rainbows", "the theory of evolution", "tea ceremonies",
    "the pyramids of Giza", "neural networks", "compound interest", "opera", "the Amazon rainforest",
    "penguins", "the water cycle", "public speaking", "meditation", "the Cold War", "tides", "earthquakes",
    "solar panels", "the Roman Empire", "minimalism", "impressionist painting", "the periodic table",
    "the violin", "supply chains", "the Big Bang", "vaccines", "recycling", "the Nile", "Shakespeare",
    "haiku poetry", "sleep cycles", "inflation", "cryptography", "wolves", "jellyfish", "the Aurora Borealis",
    "time management", "the Fibonacci sequence", "gardening", "marathon training", "the Beatles",
    "the Eiffel Tower", "machine translation", "recursion", "object-oriented programming", "version control",
    "the scientific method", "stoicism", "the Moon", "Mars", "octopuses", "the Industrial Revolution",
    "bees and flowers", "friendship", "procrastination", "calligraphy", "volleyball", "the samurai",
    "the Maya civilization", "DNA", "gravity", "magnets", "the speed of sound", "fermentation", "kites",
]
GENERAL_TEMPLATES = [
    "Tell me about {t}.", "What do you know about {t}?", "Explain {t} in simple terms.", "Give me a fun fact about {t}.",
    "Can you summarize the history of {t}?", "Why is {t} important?", "Write a short poem about {t}.",
    "Write a haiku about {t}.", "What's the most surprising thing about {t}?", "Explain {t} like I'm five.",
    "I'm curious about {t}, where should I start?", "Give me three interesting facts about {t}.",
    "How would you describe {t} in one sentence?", "What are common misconceptions about {t}?",
    "Tell me a joke about {t}.", "What is the basic idea behind {t}?", "Could you explain {t} briefly?",
    "Do you have an opinion on {t}?", "Recommend a book about {t}.", "What should a beginner know about {t}?",
    "{T} - what's the deal with that?", "quick question, what is {t}", "explain {t} pls",
]
SMALL_TALK = [
    "hi", "hello", "hey there", "good morning", "good afternoon!", "good night", "how's it going?",
    "thanks!", "thank you so much", "thanks, that helps", "great, thanks a lot", "ok", "okay cool", "got it",
    "perfect", "you're awesome", "bye", "see you later", "that's all", "never mind", "nothing else for now",
    "I'm tired today.", "I'm a bit nervous about tomorrow.", "I had a great day!", "Can you keep me company?",
    "What can you do?", "Who are you?", "Are you a robot?", "Do you like music?", "Tell me something nice.",
    "I'm bored.", "I feel happy today", "What's your name?", "lol", "hmm", "interesting", "Sounds good.",
]


def general_request(rng):
    r = rng.random()
    if PHRASING == "v1":
        if r < 0.25:
            return rng.choice(CHITCHAT)
        if r < 0.45:
            return rng.choice(SMALL_TALK)
    elif r < 0.15:
        return rng.choice(CHITCHAT + CHAT_MORE)
    elif r < 0.3:
        return rng.choice(SMALL_TALK)
    elif r < 0.6:
        # questions about the tools' own domains that no tool answers ("How do airlines price
        # tickets?"): the call-or-not decision must come from the request, not from its topic
        return rng.choice(DOMAIN_QUESTIONS)
    t = rng.choice(TOPICS)
    return rng.choice(GENERAL_TEMPLATES).format(t=t, T=t[:1].upper() + t[1:])


NO_TOOL_ANSWERS = {
    "chat": "I can answer that directly; no tool is needed.",
    "irrelevant": "None of the available tools can help with that.",
}
# kinds answered with NO_TOOL_ANSWERS["chat"]; every other no-tool kind gets "irrelevant"
CHAT_KINDS = ("chat", "domain_question", "meta_question")


# ---- BFCL ------------------------------------------------------------------------------------------

def fix_schema(v):
    if isinstance(v, dict):
        out = {}
        for k, x in v.items():
            if k == "type" and x == "dict":
                x = "object"
            elif k == "type" and x == "float":
                x = "number"
            elif k == "type" and x == "tuple":
                x = "array"
            out[k] = fix_schema(x)
        return out
    if isinstance(v, list):
        return [fix_schema(x) for x in v]
    return v


def first_answer(v):
    """BFCL possible answers: each argument a list of accepted values; "" means "may be omitted"."""
    if isinstance(v, dict):
        out = {}
        for k, alts in v.items():
            if not isinstance(alts, list) or not alts:
                continue
            a = alts[0]
            if a == "" and len(alts) >= 1:
                continue
            out[k] = first_answer(a)
        return out
    if isinstance(v, list):
        return [first_answer(x) for x in v]
    return v


def valid_function(fn):
    p = fn.get("parameters", {})
    if not NAME_RE.match(fn.get("name", "")) or p.get("type") != "object":
        return False
    props = p.get("properties", {})
    return isinstance(props, dict) and all(r in props for r in p.get("required", []))


def load_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def load_bfcl():
    calls, irrelevant, pool = [], [], {}
    for name in ("BFCL_v4_live_multiple", "BFCL_v4_multiple", "BFCL_v4_live_simple"):
        answers = {a["id"]: a for a in load_jsonl(os.path.join(BFCL, "possible_answer", name + ".json"))}
        for e in load_jsonl(os.path.join(BFCL, name + ".json")):
            fns = [fix_schema(f) for f in e["function"]]
            if not all(valid_function(f) for f in fns) or len({f["name"] for f in fns}) != len(fns):
                continue
            for f in fns:
                pool.setdefault(f["name"], f)
            a = answers.get(e["id"])
            turns = e["question"]
            if not a or len(a["ground_truth"]) != 1 or len(turns) != 1:
                continue
            msgs = [m for m in turns[0] if m["role"] == "user"]
            if len(msgs) != 1 or any(m["role"] == "system" for m in turns[0]):
                continue
            (fname, fargs), = a["ground_truth"][0].items()
            if fname not in {f["name"] for f in fns}:
                continue
            calls.append({"query": msgs[0]["content"], "functions": fns,
                          "call": {"name": fname, "arguments": first_answer(fargs)}})
    for e in load_jsonl(os.path.join(BFCL, "BFCL_v4_live_irrelevance.json")):
        fns = [fix_schema(f) for f in e["function"]]
        turns = e["question"]
        if len(turns) != 1 or not all(valid_function(f) for f in fns) or len({f["name"] for f in fns}) != len(fns):
            continue
        msgs = [m for m in turns[0] if m["role"] == "user"]
        if len(msgs) != 1 or not msgs[0]["content"].strip():
            continue
        irrelevant.append({"query": msgs[0]["content"], "functions": fns})
    return calls, irrelevant, list(pool.values())


# ---- hold-out --------------------------------------------------------------------------------------

def word_set(s):
    return set(re.findall(r"[a-z0-9]+", s.lower()))


class HoldOut:
    """Rejects queries close to any evaluation query (Jaccard of word sets >= 0.5, or equal text)."""

    def __init__(self, path):
        self.eval = [word_set(e["query"]) for e in load_jsonl(path)]
        self.n_rejected = 0

    def ok(self, q):
        w = word_set(q)
        for e in self.eval:
            if w and len(w & e) / len(w | e) >= 0.5:
                self.n_rejected += 1
                return False
        return True


# ---- assembling examples ---------------------------------------------------------------------------

def tool_name(t):
    return normalise_tool(t)["function"]["name"]


def build_context(rng, must, pools, k):
    """`must` tools plus distractors from `pools` [(weight, list)] up to k, names unique, shuffled."""
    chosen = list(must)
    names = {tool_name(t) for t in chosen}
    tries = 0
    while len(chosen) < k and tries < 10 * k:
        tries += 1
        r = rng.random()
        acc = 0.0
        for w, pool in pools:
            acc += w
            if r < acc:
                break
        t = rng.choice(pool)
        if tool_name(t) not in names:
            names.add(tool_name(t))
            chosen.append(t)
    rng.shuffle(chosen)
    return chosen


def sample_k(rng, max_k, min_k=0):
    """How many tools a context holds. Contexts as long as the 20-tool evaluation prompts are in the
    mix (train.py starts on the short ones and brings the long ones in later). With min_k (--min-k,
    the long-context data of run 12) uniformly min_k..max_k instead."""
    if min_k:
        return rng.randint(min_k, max_k)
    r = rng.random()
    if r < 0.2:
        k = rng.randint(2, 4)
    elif r < 0.55:
        k = rng.randint(5, 9)
    elif r < 0.8:
        k = rng.randint(10, 15)
    else:
        k = rng.randint(16, 26)
    return min(k, max_k)


RENAME_VERBS = ["get", "fetch", "lookup", "find", "do", "make", "run", "query", "call", "use", "handle", "svc"]
RENAME_WORDS = ["alpha", "beta", "delta", "nova", "atlas", "orbit", "pixel", "quartz", "maple", "cobalt", "ember",
                "falcon", "harbor", "iris", "juniper", "kepler", "lumen", "mosaic", "nimbus", "onyx", "prism",
                "raven", "sierra", "tango", "umbra", "vertex", "willow", "zephyr", "apex", "bolt", "cedar", "dune"]


def new_name(rng, orig, taken):
    """A name for a bundled tool in a renamed context: its own content words in another order
    under another verb, or an opaque one ("fetch_orbit_3"), so a call can only be right by reading
    the <tools> block, not by recalling the name a request was paired with before."""
    for _ in range(20):
        words = sorted(name_words(orig)) or ["tool"]
        if rng.random() < 0.5:
            rng.shuffle(words)
            n = "_".join([rng.choice(RENAME_VERBS)] + words[:2])
        else:
            n = f"{rng.choice(RENAME_VERBS)}_{rng.choice(RENAME_WORDS)}_{rng.randint(1, 99)}"
        if n not in taken and n != orig:
            return n
    return f"tool_{len(taken)}_{rng.randint(100, 999)}"


def name_words(name):
    return {w for w in words_of(name).split() if w not in ("get", "create", "search", "list", "set", "run",
                                                             "update", "find", "check", "send", "crm", "request")}


def make_group(rng, rd, holdout, bundled, eval_sets, bfcl_calls, bfcl_irrel, bfcl_pool, max_prefix, n_max, max_k,
               args_max_tools_asked=12, rename=0.0, min_k=0):
    """One tool context and the queries asked against it: [(query, call or None, kind)]."""
    r = rng.random()
    entries = []   # BFCL call entries whose functions are in the context
    if r < 0.85:
        k = sample_k(rng, max_k, min_k)
        n_bfcl = rng.choice([0, 0, 0, 1, 1, 2])
        entries = rng.sample(bfcl_calls, n_bfcl)
        must = [f for e in entries for f in e["functions"] if rng.random() < 0.7 or f["name"] == e["call"]["name"]]
        tools = build_context(rng, must, [(0.85, bundled), (0.15, bfcl_pool)], max(k, len(must)))
        mode = "mixed"
    else:
        k = sample_k(rng, max_k, min_k)
        entries = rng.sample(bfcl_calls, rng.choice([1, 2]))
        irr = rng.sample(bfcl_irrel, 2)
        must = [f for e in entries for f in e["functions"]] + [f for e in irr for f in e["functions"]]
        tools = build_context(rng, must, [(1.0, bfcl_pool)], max(k // 2, 1))
        mode = "bfcl"
    # names must be unique: BFCL entries may share a name with different schemas
    seen, uniq = set(), []
    for t in tools:
        if tool_name(t) not in seen:
            seen.add(tool_name(t))
            uniq.append(t)
    tools = uniq
    needed = {e["call"]["name"] for e in entries}
    prefix, _ = rd.prompt_ids(tools, "")
    prefix_len = len(prefix)
    while prefix_len > max_prefix and len(tools) > 1:
        idx = [i for i, t in enumerate(tools) if tool_name(t) not in needed] or list(range(len(tools)))
        tools.pop(rng.choice(idx))
        prefix_len = len(rd.prompt_ids(tools, "")[0])
    names = frozenset(tool_name(t) for t in tools)
    if names in eval_sets:   # the evaluation's tool sets are never a training context
        return tools, []
    by_name = {tool_name(t): normalise_tool(t) for t in tools}
    # --rename: in this share of the contexts every bundled tool is shown under a new name (its
    # schema otherwise unchanged) and its calls use that name
    shown = {n: n for n in by_name}
    if rename and mode == "mixed" and rng.random() < rename:
        bundled_set = {t["function"]["name"] for t in bundled}
        taken = set(by_name)
        renamed = []
        for t in tools:
            n = tool_name(t)
            if n in bundled_set:
                shown[n] = new_name(rng, n, taken)
                taken.add(shown[n])
                t = copy.deepcopy(normalise_tool(t))
                t["function"]["name"] = shown[n]
            renamed.append(t)
        tools = renamed
    items = []
    for e in entries:
        fn = by_name.get(e["call"]["name"])
        if fn is not None and fn["function"] == [f for f in e["functions"] if f["name"] == e["call"]["name"]][0]:
            items.append((e["query"], e["call"], "bfcl_call"))
    bundled_names = {t["function"]["name"] for t in bundled}
    cands = [by_name[n]["function"] for n in by_name if n in bundled_names]
    rng.shuffle(cands)
    # several queries per tool: the prefix is computed once per group, so more queries per
    # context is the cheapest way to more training examples
    for fn in cands[:args_max_tools_asked]:
        for _ in range(rng.choice([2, 2, 3, 3] if PHRASING == "v2" else [1, 2, 2, 3])):
            q, call = query_for_tool(rng, fn)
            call["name"] = shown[call["name"]]
            items.append((q, call, "bundled_call"))
    chats = list(range(CHATS[0], CHATS[1] + 1)) if CHATS else [3, 4, 5] if PHRASING == "v2" else [2, 3, 4]
    for _ in range(rng.choice(chats)):
        items.append((general_request(rng), None, "chat"))
    # Requests for a bundled tool that this context does not offer: the answer is "no tool", so the
    # model has to read which tools are there instead of mapping requests to names it memorised.
    # Tools whose names share a content word with an offered one ("weather") are not asked for.
    offered_words = set().union(*(name_words(n) for n in by_name))
    absent = [t["function"] for t in bundled
              if t["function"]["name"] not in by_name and not (name_words(t["function"]["name"]) & offered_words)]
    for fn in rng.sample(absent, min(len(absent), rng.choice([1, 2, 2, 3]))):
        q, _ = query_for_tool(rng, fn)
        items.append((q, None, "not_offered"))
    if mode == "bfcl":
        for e in irr:
            items.append((e["query"], None, "bfcl_irrelevant"))
    rng.shuffle(items)
    return tools, [it for it in items if holdout.ok(it[0])][:n_max]


# ---- v3: synthetic families, name styles, more kinds of no-tool request -----------------------------

class V3:
    """What make_group_v3 needs besides make_group's arguments (set up once in main)."""

    def __init__(self, rng, styles, bfcl_held_names):
        self.styles = styles    # share of contexts whose tools are all shown in one name style
        self.check = families.FamilyHoldOut(bfcl_held_names)
        self.style_counts = {}
        self.family_counts = {}


def synthetic_schema(rng, tool, camel_params):
    return normalise_tool(families.tool_schema(tool, rng, camel_params))


def make_group_v3(rng, rd, holdout, bundled, eval_sets, bfcl_calls, bfcl_irrel, bfcl_pool, max_prefix, n_max, max_k,
                  args_max_tools_asked, rename, min_k, v3):
    """make_group with --phrasing v3: one to three training families' tools (a random subset of
    each, so some of their verbs are missing) next to bundled and BFCL tools; then, in a share of
    the contexts, every tool renamed into one style (camelCase, kebab, dotted, MCP server prefix).
    Held-out families never take part (families.HELD_OUT_FAMILIES; asserted per tool)."""
    r = rng.random()
    entries, irr = [], []
    synth = {}   # shown-before-styling name -> (families.Tool, camel_params)
    must = []
    fams = rng.sample(families.TRAIN_FAMILIES, rng.choice([1, 1, 2, 2, 3] if r < 0.85 else [0, 1]))
    for fid in fams:
        v3.family_counts[fid] = v3.family_counts.get(fid, 0) + 1
        ft = families.ALL_TOOLS[fid]
        ft = rng.sample(ft, rng.randint(min(2, len(ft)), len(ft)))
        camel_params = rng.random() < 0.3
        for t in ft:
            synth[t.name] = (t, camel_params)
            must.append(synthetic_schema(rng, t, camel_params))
    if r < 0.85:
        k = sample_k(rng, max_k, min_k)
        entries = rng.sample(bfcl_calls, rng.choice([0, 0, 1, 1, 2]))
        must += [f for e in entries for f in e["functions"] if rng.random() < 0.7 or f["name"] == e["call"]["name"]]
        tools = build_context(rng, must, [(0.8, bundled), (0.2, bfcl_pool)], max(k, len(must)))
        mode = "mixed"
    else:
        k = sample_k(rng, max_k, min_k)
        entries = rng.sample(bfcl_calls, rng.choice([1, 2]))
        irr = rng.sample(bfcl_irrel, 2)
        must += [f for e in entries for f in e["functions"]] + [f for e in irr for f in e["functions"]]
        tools = build_context(rng, must, [(1.0, bfcl_pool)], max(k // 2, 1))
        mode = "bfcl"
    seen, uniq = set(), []
    for t in tools:
        if tool_name(t) not in seen:
            seen.add(tool_name(t))
            uniq.append(t)
    tools = uniq
    needed = {e["call"]["name"] for e in entries}
    prefix_len = len(rd.prompt_ids(tools, "")[0])
    while prefix_len > max_prefix and len(tools) > 1:
        idx = [i for i, t in enumerate(tools) if tool_name(t) not in needed] or list(range(len(tools)))
        tools.pop(rng.choice(idx))
        prefix_len = len(rd.prompt_ids(tools, "")[0])
    names = frozenset(tool_name(t) for t in tools)
    if names in eval_sets:
        return tools, []
    by_name = {tool_name(t): normalise_tool(t) for t in tools}
    synth = {n: synth[n] for n in synth if n in by_name}
    bundled_names = {t["function"]["name"] for t in bundled}
    shown = {n: n for n in by_name}
    if rename and rng.random() < rename:
        taken = set(by_name)
        for n in by_name:
            if n in bundled_names:
                shown[n] = new_name(rng, n, taken)
                taken.add(shown[n])
    # one name style for the whole context: MCP servers / dotted namespaces are the family's server
    # for synthetic tools, the BFCL family for BFCL functions and one to three made-up servers for
    # the bundled tools
    style = "as_is"
    if rng.random() < v3.styles:
        style = rng.choice(families.STYLES)
        servers = rng.sample(families.BUNDLED_SERVERS, rng.choice([1, 2, 3]))
        groups = []
        for n in by_name:
            if n in synth:
                g = synth[n][0].server
            elif n in bundled_names:
                g = rng.choice(servers)
            else:
                g = families.bfcl_family(n)
            groups.append((shown[n], g))
        m = families.restyle(groups, style)
        if m is None:
            style = "as_is"
        else:
            shown = {n: m[shown[n]] for n in shown}
    v3.style_counts[style] = v3.style_counts.get(style, 0) + 1
    shown_tools = []
    for t in tools:
        t = normalise_tool(t)
        n = tool_name(t)
        if shown[n] != n:
            t = copy.deepcopy(t)
            t["function"]["name"] = shown[n]
        v3.check.check_tool(t["function"])
        shown_tools.append(t)
    items = []
    for e in entries:
        fn = by_name.get(e["call"]["name"])
        if fn is not None and fn["function"] == [f for f in e["functions"] if f["name"] == e["call"]["name"]][0]:
            items.append((e["query"], dict(e["call"], name=shown[e["call"]["name"]]), "bfcl_call"))
    # about as many synthetic as bundled calls: half of the asked tools are synthetic ones
    asked = list(synth)
    rng.shuffle(asked)
    asked = asked[:max(3, args_max_tools_asked // 2)]
    for n in asked:
        t, camel_params = synth[n]
        for _ in range(rng.choice([1, 1, 2])):
            q, call = families.query_for(rng, t, camel_params)
            assert families.values_in_query(q, call["arguments"]), (q, call)
            call["name"] = shown[n]
            items.append((q, call, "synthetic_call"))
    cands = [by_name[n]["function"] for n in by_name if n in bundled_names]
    rng.shuffle(cands)
    for fn in cands[:max(2, args_max_tools_asked - len(asked))]:
        for _ in range(rng.choice([1, 2, 2, 3])):
            q, call = query_for_tool(rng, fn)
            call["name"] = shown[call["name"]]
            items.append((q, call, "bundled_call"))
    chats = list(range(CHATS[0], CHATS[1] + 1)) if CHATS else [2, 3, 4]
    for _ in range(rng.choice(chats)):
        items.append((general_request(rng), None, "chat"))
    offered_words = set().union(*(name_words(n) for n in by_name))
    absent = [t["function"] for t in bundled
              if t["function"]["name"] not in by_name and not (name_words(t["function"]["name"]) & offered_words)]
    for fn in rng.sample(absent, min(len(absent), rng.choice([0, 1, 1, 2]))):
        q, _ = query_for_tool(rng, fn)
        items.append((q, None, "not_offered"))
    # a tool of a training family that this context does not show
    other = [f for f in families.TRAIN_FAMILIES if f not in fams]
    for _ in range(rng.choice([0, 1, 1, 2])):
        q, _ = families.query_for(rng, rng.choice(families.ALL_TOOLS[rng.choice(other)]))
        items.append((q, None, "synthetic_not_offered"))
    # an offered tool's noun with a verb that no offered tool has
    offered_synth = [t for t, _ in synth.values()]
    for _ in range(rng.choice([1, 1, 2]) if offered_synth else 0):
        items.append((families.unsupported_request(rng, offered_synth), None, "unsupported_verb"))
    # a question about a shown family's domain, and one about the conversation or the tools themselves
    for _ in range(rng.choice([0, 1, 1])):
        fid = rng.choice(sorted({t.family for t in offered_synth}) or list(families.TRAIN_FAMILIES))
        items.append((families.domain_question(rng, fid), None, "domain_question"))
    for _ in range(rng.choice([0, 1, 1])):
        fid = rng.choice(sorted({t.family for t in offered_synth}) or list(families.TRAIN_FAMILIES))
        items.append((families.meta_question(rng, fid, sorted(shown.values())), None, "meta_question"))
    if mode == "bfcl":
        for e in irr:
            items.append((e["query"], None, "bfcl_irrelevant"))
    for q, _, kind in items:
        if kind in ("synthetic_call", "synthetic_not_offered", "unsupported_verb", "domain_question", "meta_question"):
            m = v3.check.phrase_re.search(q.lower())
            assert m is None, f"held-out family phrase {m.group(0)!r} in a generated {kind} query: {q!r}"
    rng.shuffle(items)
    return shown_tools, [it for it in items if holdout.ok(it[0])][:n_max]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--groups", type=int, default=6000)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--max-prefix", type=int, default=3600)
    ap.add_argument("--max-queries", type=int, default=24)
    ap.add_argument("--max-k", type=int, default=26, help="most tools in one context")
    ap.add_argument("--min-k", type=int, default=0,
                    help="draw every context's tool count uniformly from MIN_K..MAX_K (0: the default mix, 2..26)")
    ap.add_argument("--chats", default="", metavar="LO-HI",
                    help="no-tool requests per context, drawn from LO..HI (default 3-5 with v2 phrasing, 2-4 with v1)")
    ap.add_argument("--tools-asked", type=int, default=12, help="most tools of a context that queries ask for")
    ap.add_argument("--dump-tools", action="store_true", help="write the first 20 contexts for check_render.py")
    ap.add_argument("--phrasing", choices=("v1", "v2", "v3"), default="v1", help="query generator version (see PHRASING)")
    ap.add_argument("--tokenizer", default=os.path.join(ROOT, "resources/tokenizers/qwen3"),
                    help="tokenizer directory (default Qwen3's; resources/tokenizers/toolcaller for the derived "
                         "one, whose ids train.py --tokenizer then expects)")
    ap.add_argument("--styles", type=float, default=0.6,
                    help="v3: share of contexts whose tools are all shown in one name style (families.STYLES)")
    ap.add_argument("--rename", type=float, default=0.0, help="share of contexts whose bundled tools get new names")
    ap.add_argument("--values", choices=("narrow", "wide"), default="narrow",
                    help="argument values from short fixed lists, or mostly from large made-up pools (see VALUES)")
    args = ap.parse_args()
    global PHRASING, VALUES, CHATS
    PHRASING, VALUES = args.phrasing, args.values
    if args.chats:
        m = re.fullmatch(r"(\d+)-(\d+)", args.chats)
        if not m or int(m[1]) > int(m[2]):
            ap.error(f"--chats must be LO-HI with LO <= HI, got {args.chats!r}")
        CHATS = (int(m[1]), int(m[2]))
    os.makedirs(args.out, exist_ok=True)
    rng = random.Random(args.seed)

    tok_json = unpacked(os.path.join(args.tokenizer, "tokenizer.json"))
    tok = Qwen3Tokenizer(tok_json)
    with open(os.path.join(ROOT, "resources/system_prompt.txt"), encoding="utf-8") as f:
        system_prompt = f.read()
    # The app renders resources/system_prompt.txt; `contextcache-cli` uses no system prompt unless
    # given --system/--system-file. Half the contexts get each, so both work.
    renderers = [Renderer(tok, system_prompt), Renderer(tok, "")]
    rd = renderers[0]
    holdout = HoldOut(os.path.join(ROOT, "resources/eval/tool_calls.jsonl"))

    bundled = json.load(open(os.path.join(ROOT, "resources/toolsets/tools_100.json"), encoding="utf-8"))
    sets = {n: json.load(open(os.path.join(ROOT, f"resources/toolsets/tools_{n}.json"), encoding="utf-8"))
            for n in (5, 10, 20, 50)}
    eval_sets = {frozenset(tool_name(t) for t in s) for s in sets.values()}
    bfcl_calls, bfcl_irrel, bfcl_pool = load_bfcl()
    print(f"bfcl: {len(bfcl_calls)} calls, {len(bfcl_irrel)} irrelevance, {len(bfcl_pool)} distinct functions",
          file=sys.stderr)
    v3 = None
    if args.phrasing == "v3":
        # BFCL functions of held-out families (families.bfcl_held_out) leave the pool, and so does
        # every query whose function list holds one
        bundled_names = {tool_name(t) for t in bundled}
        held = {f["name"]: f.get("description") or "" for f in bfcl_pool
                if families.bfcl_held_out(f["name"], bundled_names)}
        keep = [f["name"] not in held for f in bfcl_pool]
        bfcl_pool = [f for f, k in zip(bfcl_pool, keep) if k]
        bfcl_calls = [e for e in bfcl_calls if not any(f["name"] in held for f in e["functions"])]
        bfcl_irrel = [e for e in bfcl_irrel if not any(f["name"] in held for f in e["functions"])]
        print(f"bfcl after the family hold-out: {len(bfcl_calls)} calls, {len(bfcl_irrel)} irrelevance, "
              f"{len(bfcl_pool)} functions ({len(held)} held out in "
              f"{len({families.bfcl_family(n) for n in held})} families)", file=sys.stderr)
        v3 = V3(rng, args.styles, held)

    # Check that per-line token caching equals tokenizing the whole block.
    for n, tools in sets.items():
        ids, _ = rd.prompt_ids(tools, "x")
        whole = rd.full_text_ids(tools, system_prompt, "x")
        assert ids[:len(whole)] == whole, f"tools_{n}: piecewise tokenization differs"

    im_end = tok.sp("<|im_end|>")
    groups, kinds, n_prefix_tok, n_suffix_tok, n_answer_tok = [], {}, 0, 0, 0
    while len(groups) < args.groups:
        rd = renderers[0] if rng.random() < 0.5 else renderers[1]
        if v3 is None:
            tools, items = make_group(rng, rd, holdout, bundled, eval_sets, bfcl_calls, bfcl_irrel, bfcl_pool,
                                      args.max_prefix, args.max_queries, args.max_k, args.tools_asked, args.rename,
                                      args.min_k)
        else:
            tools, items = make_group_v3(rng, rd, holdout, bundled, eval_sets, bfcl_calls, bfcl_irrel, bfcl_pool,
                                         args.max_prefix, args.max_queries, args.max_k, args.tools_asked,
                                         args.rename, args.min_k, v3)
        if not items:
            continue
        prefix = None
        suffixes = []
        for q, call, kind in items:
            ids, _ = rd.prompt_ids(tools, q)
            # the prefix ends at the system turn's <|im_end|>\n, as the engine splits it
            split = ids.index(im_end) + 2
            if prefix is None:
                prefix = ids[:split]
            assert ids[:split] == prefix
            answer = rd.answer_ids(call) if call is not None else rd.plain_answer_ids(
                NO_TOOL_ANSWERS["chat" if kind in CHAT_KINDS else "irrelevant"])
            if len(answer) > 120 or len(ids) - split > 160:
                continue
            suffixes.append((array.array("i", ids[split:] + answer), len(ids) - split))
            kinds[kind] = kinds.get(kind, 0) + 1
            n_suffix_tok += len(ids) - split + len(answer)
            n_answer_tok += len(answer)
        if not suffixes:
            continue
        n_prefix_tok += len(prefix)
        groups.append({"prefix": array.array("i", prefix), "n_tools": len(tools), "suffixes": suffixes,
                       "system": rd is renderers[0]})
        if args.dump_tools and len(groups) <= 20:
            with open(os.path.join(args.out, f"group{len(groups)}.tools.json"), "w", encoding="utf-8") as f:
                json.dump({"tools": tools, "query": items[0][0], "system": rd is renderers[0],
                           "ids": list(prefix) + list(suffixes[0][0][:suffixes[0][1]])}, f, ensure_ascii=False)
        if len(groups) % 1000 == 0:
            print(f"{len(groups)} groups", file=sys.stderr)

    stats = {"n_groups": len(groups), "n_queries": sum(kinds.values()), "kinds": kinds,
             "n_prefix_tokens": n_prefix_tok, "n_suffix_tokens": n_suffix_tok, "n_answer_tokens": n_answer_tok,
             "held_out_rejections": holdout.n_rejected, "seed": args.seed, "bfcl_calls": len(bfcl_calls),
             "bfcl_irrelevance": len(bfcl_irrel), "bfcl_functions": len(bfcl_pool), "phrasing": args.phrasing,
             "rename": args.rename, "values": args.values}
    if not os.path.samefile(args.tokenizer, os.path.join(ROOT, "resources/tokenizers/qwen3")):
        # (Qwen3's data stays as it was, byte for byte; other tokenizers are named by hash)
        import hashlib
        with open(tok_json, "rb") as f:
            stats["tokenizer_sha256"] = hashlib.sha256(f.read()).hexdigest()
    if v3 is not None:
        stats.update({"styles": args.styles, "style_counts": v3.style_counts, "family_contexts": v3.family_counts,
                      "held_out_families": list(families.HELD_OUT_FAMILIES),
                      "bfcl_held_out_functions": len(v3.check.bfcl), "tools_checked_for_hold_out": v3.check.n_checked})
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "train.pkl"), "wb") as f:
        pickle.dump({"groups": groups, "stats": stats}, f)
    with open(os.path.join(args.out, "samples.txt"), "w", encoding="utf-8") as f:
        for g in groups[:6]:
            f.write(f"=== prefix {len(g['prefix'])} tokens, {g['n_tools']} tools\n")
            for ids, n_prompt in g["suffixes"]:
                f.write(f"Q: {tok.decode(ids[:n_prompt])!r}\nA: {tok.decode(ids[n_prompt:])!r}\n")
    print(json.dumps(stats), file=sys.stderr)


if __name__ == "__main__":
    main()
