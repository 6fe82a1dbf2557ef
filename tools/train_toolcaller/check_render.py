#!/usr/bin/python3
"""Check make_data.py's prompts against the project's own renderer: `contextcache-cli render`
must give the same token ids for the dumped training contexts (make_data.py --dump-tools) and for
every bundled tool set, with and without the default system prompt.
Usage: check_render.py CLI DATA_DIR [--tokenizer DIR --model SPEC]
  (default: the Qwen3 tokenizer, rendered by builtin:qwen3-demo, which has it; for data made with
  make_data.py --tokenizer resources/tokenizers/toolcaller: --model builtin:toolcaller)"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from make_data import ROOT, Renderer  # noqa: E402
from qwen3_tokenizer import Qwen3Tokenizer  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cli")
    ap.add_argument("data_dir")
    ap.add_argument("--tokenizer", default=os.path.join(ROOT, "resources/tokenizers/qwen3"))
    ap.add_argument("--model", default="")
    args = ap.parse_args()
    cli, data_dir = args.cli, args.data_dir
    qwen3 = os.path.samefile(args.tokenizer, os.path.join(ROOT, "resources/tokenizers/qwen3"))
    if not args.model and not qwen3:
        ap.error("--tokenizer other than Qwen3's needs --model (a model with that tokenizer)")
    model = args.model or "builtin:qwen3-demo"
    tok = Qwen3Tokenizer(os.path.join(args.tokenizer, "tokenizer.json"))
    sys_file = os.path.join(ROOT, "resources/system_prompt.txt")
    sysp = open(sys_file, encoding="utf-8").read()
    cases = []
    for n in ("5", "10", "20", "50", "100", "unicode"):
        tools = json.load(open(os.path.join(ROOT, f"resources/toolsets/tools_{n}.json"), encoding="utf-8"))
        for s in (True, False):
            cases.append((f"tools_{n}", tools, "Convert 12.5 km to miles — and 東京? {\"a\": 1}", s, None))
    for path in sorted(glob.glob(os.path.join(data_dir, "group*.tools.json"))):
        g = json.load(open(path, encoding="utf-8"))
        cases.append((os.path.basename(path), g["tools"], g["query"], g["system"], g["ids"]))
    bad = 0
    for name, tools, query, with_sys, dumped in cases:
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False, encoding="utf-8") as f:
            json.dump(tools, f, ensure_ascii=False)
        cmd = [cli, "--model", model, "--json", "render", "--tools", f.name, "--query", query] + (["--system-file", sys_file] if with_sys else [])
        out = json.loads(subprocess.check_output(cmd))
        os.unlink(f.name)
        ids, _ = Renderer(tok, sysp if with_sys else "").prompt_ids(tools, query)
        ok = ids == out["full_ids"] and (dumped is None or dumped == out["full_ids"])
        bad += not ok
        print(f"{name:28s} system={int(with_sys)} {len(out['prefix_ids']):6d} prefix tokens  {'OK' if ok else 'MISMATCH'}")
    print(f"{len(cases) - bad}/{len(cases)} identical")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
