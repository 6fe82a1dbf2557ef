#!/usr/bin/python3
"""The held-out family evaluation set, resources/eval/tool_families.jsonl: requests for tools of
the families in families.HELD_OUT_FAMILIES, which make_data.py never puts in training data.

42 tool sets, 14 each of 5, 10 and 20 tools: one held-out family's tools (at 5 tools three or four
of them; at 20 a second held-out family's too) and bundled tools (resources/toolsets/tools_100.json)
as distractors, shown in one name style per set (as written, camelCase, kebab, dotted, MCP server
prefix, `mcp__server__tool`); 30% of the sets key their parameters in camelCase. Three queries per
set: two or three calls of the held-out tools and, in every other set, one request that no tool
fits (an offered tool's noun with a verb no tool has, a question about the family's domain, a
question about the tools themselves, or a request for a held-out tool that the set does not show).

Each set is a file in resources/eval/tool_families/ (setNN_SIZE_FAMILY.json), which the JSONL lines
name with "tools_file", so the three queries of a set share one cached prefix as they would in use.
Deterministic: the same files for the same seed. Every expected call is checked against its tool's
schema here (as tests/research/test_eval_dataset.cpp does in C++).
Usage: make_family_eval.py [--seed 38] [--out resources/eval/tool_families.jsonl]"""
import argparse
import json
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import families  # noqa: E402

ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
SETS = "tool_families"   # the tool sets' folder, next to the JSONL file
STYLES = ("as_is", "camel", "dotted", "mcp", "kebab", "mcp_claude", "as_is")
# bundled tools that could serve a held-out family's request, kept out of the distractors
NOT_DISTRACTORS = {"create_calendar_event", "create_payment_link", "set_reminder", "add_todo_item", "create_note",
                   "book_medical_appointment", "search_train_connections", "request_ride", "set_thermostat"}


def has_type(v, t):
    return {"string": isinstance(v, str), "integer": isinstance(v, int) and not isinstance(v, bool),
            "number": isinstance(v, (int, float)) and not isinstance(v, bool), "boolean": isinstance(v, bool),
            "array": isinstance(v, list), "object": isinstance(v, dict), "null": v is None}[t]


def problems(v, schema, path="arguments"):
    """The C++ test's validator (required, property names, types, enums, bounds, nesting)."""
    out = []
    if "type" in schema and not has_type(v, schema["type"]):
        return [f"{path}: not of type {schema['type']}"]
    if "enum" in schema and v not in schema["enum"]:
        out.append(f"{path}: {v!r} not in the enum")
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        if "minimum" in schema and v < schema["minimum"]:
            out.append(f"{path}: below the minimum")
        if "maximum" in schema and v > schema["maximum"]:
            out.append(f"{path}: above the maximum")
    if isinstance(v, dict):
        props = schema.get("properties", {})
        for k, x in v.items():
            out += [f"{path}: unknown property {k!r}"] if k not in props else problems(x, props[k], f"{path}.{k}")
        out += [f"{path}: missing required {r!r}" for r in schema.get("required", []) if r not in v]
    if isinstance(v, list) and "items" in schema:
        for i, x in enumerate(v):
            out += problems(x, schema["items"], f"{path}[{i}]")
    return out


def styled_set(rng, synth, distractors, style):
    """(tools as shown, {canonical synthetic name: shown name}) for one set."""
    groups = [(t["function"]["name"], s.server) for t, s in synth] + \
             [(t["function"]["name"], g) for t, g in distractors]
    m = families.restyle(groups, style) if style != "as_is" else {n: n for n, _ in groups}
    assert m is not None, style
    shown = []
    for t, _ in synth + distractors:
        t = json.loads(json.dumps(t))
        t["function"]["name"] = m[t["function"]["name"]]
        shown.append(t)
    rng.shuffle(shown)
    return shown, m


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=38)
    ap.add_argument("--out", default=os.path.join(ROOT, "resources/eval/tool_families.jsonl"))
    args = ap.parse_args()
    rng = random.Random(args.seed)
    bundled = [t for t in json.load(open(os.path.join(ROOT, "resources/toolsets/tools_100.json"), encoding="utf-8"))
               if t["function"]["name"] not in NOT_DISTRACTORS]
    held = list(families.HELD_OUT_FAMILIES)
    lines, queries, set_files = [], set(), {}
    set_no = 0
    for size in (5, 10, 20):
        for i in range(14):
            fid = held[set_no % len(held)]
            style = STYLES[set_no % len(STYLES)]
            set_no += 1
            camel_params = rng.random() < 0.3
            own = families.ALL_TOOLS[fid]
            if size == 5:
                picked = rng.sample(own, rng.choice([3, 4]))
            else:
                picked = list(own)
                if size == 20:
                    other = rng.choice([h for h in held if h != fid])
                    picked += rng.sample(families.ALL_TOOLS[other], min(6, len(families.ALL_TOOLS[other])))
            picked = picked[:size - 1]
            synth = [(families.tool_schema(t, rng, camel_params), t) for t in picked]
            synth = [({"type": "function", "function": s}, t) for s, t in synth]
            servers = rng.sample(families.BUNDLED_SERVERS, 2)
            names = {t.name for t in picked}
            pool = [b for b in bundled if b["function"]["name"] not in names]
            distractors = [(b, rng.choice(servers)) for b in rng.sample(pool, size - len(picked))]
            tools, shown = styled_set(rng, synth, distractors, style)
            set_file = f"set{set_no:02d}_{size}_{fid}.json"
            schema_of = {t["function"]["name"]: t["function"]["parameters"] for t in tools}
            targets = [t for t in picked if t.family == fid] or picked
            asked = rng.sample(targets, min(3, len(targets)))
            n_calls = 2 if i % 2 == 0 else 3
            examples = []
            for t in asked[:n_calls]:
                for _ in range(20):
                    q, call = families.query_for(rng, t, camel_params)
                    if q not in queries:
                        break
                call["name"] = shown[t.name]
                bad = problems(call["arguments"], schema_of[call["name"]])
                assert not bad, (q, call, bad)
                assert families.values_in_query(q, call["arguments"]), (q, call)
                examples.append((q, call))
            if n_calls == 2:
                kind = ("unsupported", "domain", "meta", "not_shown")[(set_no // 2) % 4]
                if kind == "unsupported":
                    q = families.unsupported_request(rng, picked)
                elif kind == "domain":
                    q = families.domain_question(rng, fid)
                elif kind == "meta":
                    q = families.meta_question(rng, fid, sorted(shown[t.name] for t in picked))
                else:
                    absent = [t for h in held for t in families.ALL_TOOLS[h] if t not in picked
                              and t.family not in {p.family for p in picked}]
                    q, _ = families.query_for(rng, rng.choice(absent))
                examples.append((q, None))
            for j, (q, call) in enumerate(examples):
                assert q not in queries, q
                queries.add(q)
                lines.append({"id": f"fam{size}-{set_no:02d}-{fid}-{j}", "tools_file": f"{SETS}/{set_file}",
                              "query": q, "expected": call})
            set_files[set_file] = tools
    sets_dir = os.path.join(os.path.dirname(args.out), SETS)
    os.makedirs(sets_dir, exist_ok=True)
    for old in os.listdir(sets_dir):
        if old.endswith(".json") and old not in set_files:
            os.unlink(os.path.join(sets_dir, old))
    for name, tools in set_files.items():
        with open(os.path.join(sets_dir, name), "w", encoding="utf-8") as f:
            f.write("[\n" + ",\n".join(json.dumps(t, ensure_ascii=False) for t in tools) + "\n]\n")
    with open(args.out, "w", encoding="utf-8") as f:
        for e in lines:
            f.write(json.dumps(e, ensure_ascii=False) + "\n")
    n_null = sum(e["expected"] is None for e in lines)
    print(f"{args.out}: {len(lines)} examples, {len(lines) - n_null} with a call, {n_null} without, "
          f"{set_no} tool sets", file=sys.stderr)


if __name__ == "__main__":
    main()
