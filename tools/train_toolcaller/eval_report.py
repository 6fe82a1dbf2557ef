#!/usr/bin/python3
"""Per-tool-set-size figures from `contextcache-cli eval --out DIR` (DIR/examples.jsonl):
TSA, JSON-valid tool calls, FPR, mean PF1, identical outputs and logits of the two runs compared
(cached or per-tool NoPE against full), per-tool NoPE's means against the full prefill (first-token
logit cosine, KL, top-1 agreement over the teacher-forced steps), and how many calls
name a tool that the prompt does not offer ("not offered": the model recalled a name instead of
reading its context).
JSON-valid = of the outputs that open a <tool_call>, the share whose text up to </tool_call> (or
the end) is one JSON object with a string "name" and an object "arguments" (strict json.loads;
the project's parser is more tolerant of a model that stops early). Usage: eval_report.py DIR [--markdown]"""
import functools
import json
import os
import re
import sys


def strict_valid(text):
    body = text.split("<tool_call>", 1)[1].split("</tool_call>", 1)[0].strip()
    try:
        v = json.loads(body)
    except ValueError:
        return False
    return isinstance(v, dict) and isinstance(v.get("name"), str) and isinstance(v.get("arguments"), dict)
from collections import defaultdict

CALLED = re.compile(r'"name"\s*:\s*"([^"]*)"')


@functools.lru_cache(maxsize=None)
def tool_names(path):
    """Names of the tools in a tool file, or None when it cannot be read."""
    try:
        with open(path, encoding="utf-8") as f:
            return frozenset(t.get("function", t).get("name") for t in json.load(f))
    except (OSError, ValueError):
        return None


def offered_names(rec):
    """Names of the tools the example's prompt offered (its tool file, relative to the dataset)."""
    src = rec.get("source", "").rsplit(":", 1)[0]
    return tool_names(os.path.normpath(os.path.join(os.path.dirname(src), rec.get("tools") or "")))


def table_rows(d):
    """{"MODE SIZE" or "MODE all": counts} from DIR/examples.jsonl."""
    recs = [json.loads(l) for l in open(f"{d}/examples.jsonl", encoding="utf-8") if l.strip()]
    rows = defaultdict(lambda: defaultdict(float))
    for r in recs:
        offered = offered_names(r)
        for o in r["outputs"]:
            for key in (f"{o['mode']} all", f"{o['mode']} {r['n_tools']}"):
                s, row = o["score"], rows[key]
                row["n"] += 1
                opened = "<tool_call>" in o["text"]
                row["opened"] += opened
                row["valid"] += opened and strict_valid(o["text"])
                called = CALLED.search(o["text"].split("<tool_call>", 1)[1]) if opened else None
                if called and offered is not None:
                    row["named"] += 1
                    row["not_offered"] += called.group(1) not in offered
                if s["expects_call"]:
                    row["n_call"] += 1
                    row["correct"] += bool(s["correct_tool"])
                    row["exact"] += bool(s["exact"])
                    if s["f1"] is not None:
                        row["f1_sum"] += s["f1"]
                        row["f1_n"] += 1
                else:
                    row["n_none"] += 1
                    row["fp"] += bool(s["false_positive"])
        if r.get("identical_tokens") is not None:
            for key in ("compare all", f"compare {r['n_tools']}"):
                rows[key]["n"] += 1
                rows[key]["identical"] += bool(r["identical_tokens"])
                rows[key]["identical_logits"] += bool(r.get("identical_logits"))
                nope = r.get("nope")   # per_tool_nope: the composed run against the full prefill
                if nope:
                    rows[key]["nope"] += 1
                    for f in ("logit_cosine_first", "kl_first", "top1_agreement"):
                        if nope.get(f) is not None:
                            rows[key][f] += nope[f]
                            rows[key][f + "_n"] += 1
    return rows


def main():
    rows = table_rows(sys.argv[1])

    def ratio(a, b):
        return f"{a / b:.3f}" if b else "-"
    print("| mode | tools | n | TSA | EM | PF1 (correct tool) | JSON-valid calls | FPR | calls naming a tool not offered |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    order = sorted((k for k in rows if not k.startswith("compare")),
                   key=lambda k: (k.split()[0], 0 if k.split()[1] == "all" else int(k.split()[1])))
    for k in order:
        row = rows[k]
        mode, size = k.split()
        print(f"| {mode} | {size} | {int(row['n'])} | {ratio(row['correct'], row['n_call'])} "
              f"({int(row['correct'])}/{int(row['n_call'])}) | {ratio(row['exact'], row['n_call'])} | "
              f"{ratio(row['f1_sum'], row['f1_n'])} | {ratio(row['valid'], row['opened'])} "
              f"({int(row['valid'])}/{int(row['opened'])}) | {ratio(row['fp'], row['n_none'])} "
              f"({int(row['fp'])}/{int(row['n_none'])}) | {int(row['not_offered'])}/{int(row['named'])} |")
    compared = sorted((k for k in rows if k.startswith("compare")),
                      key=lambda k: (k != "compare all", int(k.split()[1]) if k != "compare all" else 0))
    for k in compared:
        row = rows[k]
        print(f"first vs second output, {k.split()[1]} tools: identical tokens {int(row['identical'])}/{int(row['n'])}, "
              f"bit-identical logits {int(row['identical_logits'])}/{int(row['n'])}")
    if any(rows[k]["nope"] for k in compared):
        print("\n| tools | n | first-token logit cosine | KL(full ‖ composed), nats | top-1 agreement |")
        print("|---:|---:|---:|---:|---:|")
        for k in compared:
            row = rows[k]
            def mean(f, fmt):
                return format(row[f] / row[f + "_n"], fmt) if row[f + "_n"] else "-"
            print(f"| {k.split()[1]} | {int(row['nope'])} | {mean('logit_cosine_first', '.6f')} | "
                  f"{mean('kl_first', '.2e')} | {mean('top1_agreement', '.3f')} |")


if __name__ == "__main__":
    main()
