#!/usr/bin/python3
"""Check a tokenizer made by derive_tokenizer.py against the references, on one corpus of texts:
the tokenizer golden cases (tests/data/tokenizer_goldens/qwen3.jsonl: whitespace, Unicode, code,
special tokens), every bundled tool line, the evaluation queries, BFCL v4 queries and functions.

  1. the Hugging Face `tokenizers` library loads it and every text round-trips
     (decode(encode(text)) is what Qwen3's tokenizer decodes to, i.e. NFC(text));
  2. where Qwen3 tokenizes a text with kept tokens only, the new ids are Qwen3's, renumbered;
  3. the engine (`contextcache-cli tokenize --tokenizer`) gives the library's ids for every text,
     in both modes (plain: user text; template: added tokens matched).

Usage: check_tokenizer.py CLI DIR [--node-path /tmp/npmwork/node_modules] [--bfcl N]
The library comes from npm: mkdir -p /tmp/npmwork && (cd /tmp/npmwork && npm init -y && npm install tokenizers@0.23.2)
Exit status 1 when any check fails; a JSON summary on stdout.
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
from qwen3_tokenizer import qwen3_json  # noqa: E402

QWEN3 = qwen3_json()  # the bundled tokenizer.json, unpacked from its .tar.xz when needed


def dumps(v):
    return json.dumps(v, ensure_ascii=False, separators=(", ", ": "))


def corpus(n_bfcl):
    cases = []   # (text, mode)
    with open(os.path.join(ROOT, "tests/data/tokenizer_goldens/qwen3.jsonl"), encoding="utf-8") as f:
        for line in f:
            g = json.loads(line)
            cases.append((g["text"], g["mode"]))
    for p in sorted(glob.glob(os.path.join(ROOT, "resources/toolsets/tools_*.json"))):
        for t in json.load(open(p, encoding="utf-8")):
            cases.append((dumps(t if "type" in t else {"type": "function", "function": t}) + "\n", "plain"))
    with open(os.path.join(ROOT, "resources/eval/tool_calls.jsonl"), encoding="utf-8") as f:
        for line in f:
            e = json.loads(line)
            cases.append(("user\n" + e["query"], "plain"))
            if e.get("expected"):
                cases.append(("\n" + dumps(e["expected"]) + "\n", "plain"))
    bfcl = sorted(glob.glob(os.environ.get("BFCL_DIR", "/work/shared/data/bfcl") + "/BFCL_v4_*.json"))
    for p in bfcl:
        with open(p, encoding="utf-8") as f:
            for k, line in enumerate(f):
                if k >= n_bfcl:
                    break
                e = json.loads(line)
                for turn in e.get("question", [[]])[0][:1]:
                    cases.append((turn.get("content", ""), "plain"))
                for fn in e.get("function", [])[:1]:
                    cases.append((dumps(fn) + "\n", "plain"))
    return cases


def hf_encode(tokenizer_json, cases, node_path):
    env = dict(os.environ, NODE_PATH=node_path)
    inp = "".join(json.dumps({"text": t, "mode": m}, ensure_ascii=False) + "\n" for t, m in cases)
    out = subprocess.run(["node", os.path.join(HERE, "hf_encode.js"), tokenizer_json], input=inp.encode(),
                         capture_output=True, env=env, check=True).stdout.decode()
    return [json.loads(line) for line in out.split("\n") if line]


def engine_encode(cli, tokenizer_json, cases):
    ids = [None] * len(cases)
    for mode in ("plain", "template"):
        idx = [i for i, c in enumerate(cases) if c[1] == mode]
        with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False, encoding="utf-8") as f:
            for i in idx:
                f.write(json.dumps({"text": cases[i][0]}, ensure_ascii=False) + "\n")
        out = subprocess.run([cli, "tokenize", "--tokenizer", tokenizer_json, "--jsonl", f.name, "--mode", mode],
                             capture_output=True, check=True).stdout.decode()
        os.unlink(f.name)
        for i, line in zip(idx, [x for x in out.split("\n") if x]):
            ids[i] = json.loads(line)["ids"]
    return ids


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cli")
    ap.add_argument("dir")
    ap.add_argument("--node-path", default="/tmp/npmwork/node_modules")
    ap.add_argument("--bfcl", type=int, default=400, help="entries read from each BFCL file")
    args = ap.parse_args()
    new_json = os.path.join(args.dir, "tokenizer.json")
    cases = corpus(args.bfcl)
    qwen = hf_encode(QWEN3, cases, args.node_path)
    new = hf_encode(new_json, cases, args.node_path)
    eng = engine_encode(args.cli, new_json, cases)

    qv = json.load(open(QWEN3, encoding="utf-8"))
    nv = json.load(open(new_json, encoding="utf-8"))
    q_tok = {i: t for t, i in qv["model"]["vocab"].items()} | {t["id"]: t["content"] for t in qv["added_tokens"]}
    n_id = dict(nv["model"]["vocab"]) | {t["content"]: t["id"] for t in nv["added_tokens"]}

    fails = {"round_trip": [], "qwen3_ids": [], "engine": []}
    all_kept, tokens_q, tokens_n = 0, 0, 0
    for k, ((text, mode), q, n, e) in enumerate(zip(cases, qwen, new, eng)):
        if n["decoded"] != q["decoded"]:
            fails["round_trip"].append(k)
        if all(q_tok[i] in n_id for i in q["ids"]):
            all_kept += 1
            if [n_id[q_tok[i]] for i in q["ids"]] != n["ids"]:
                fails["qwen3_ids"].append(k)
        if e != n["ids"]:
            fails["engine"].append(k)
        tokens_q += len(q["ids"])
        tokens_n += len(n["ids"])
    summary = {"texts": len(cases), "texts_tokenized_as_qwen3": all_kept, "qwen3_tokens": tokens_q,
               "tokens": tokens_n, "token_ratio": round(tokens_n / max(1, tokens_q), 4),
               "failures": {k: len(v) for k, v in fails.items()},
               "first_failures": {k: [{"text": cases[i][0][:120], "mode": cases[i][1]} for i in v[:3]]
                                  for k, v in fails.items() if v}}
    print(json.dumps(summary, indent=1, ensure_ascii=False))
    sys.exit(1 if any(fails.values()) else 0)


if __name__ == "__main__":
    main()
