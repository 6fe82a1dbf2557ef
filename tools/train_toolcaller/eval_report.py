#!/usr/bin/python3
"""Per-tool-set-size figures from `contextcache-cli eval --out DIR` (DIR/examples.jsonl):
TSA, JSON-valid tool calls, FPR, mean PF1, cached-vs-full identical outputs, and how many calls
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
    for k in sorted((k for k in rows if k.startswith("compare")), key=lambda k: (k != "compare all", k)):
        print(f"cached vs full identical tokens, {k.split()[1]} tools: {int(rows[k]['identical'])}/{int(rows[k]['n'])}")


if __name__ == "__main__":
    main()
