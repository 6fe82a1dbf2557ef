#!/usr/bin/python3
"""Check train.py --state on the CPU with a small model: a run cut into sessions ends with the same
bits as the run made in one go; a session that finds only the carry (what travels to a lent GPU
and back) continues from it; a session of another run is refused.

  A: 12 steps in one session;
  B: the same run as a session of 5 steps, then a second session to step 12 (resumed exactly):
     B's weights, AdamW moments and learning rates must equal A's (torch.equal);
  C: B's carry after its first session (state.pt removed), continued to step 12 (fresh moments,
     --rewarm): it must resume at step 5 from the carry and record it;
  D: a session with another --lr on A's state: refused, naming the lr;
  E: --branch-decay 3 from A's state: exports a decayed copy and leaves A's state as it was.

Usage: check_resume.py DATA/train.pkl [--tokenizer DIR] [--work DIR]
(DATA from make_data.py; with the derived tokenizer: make_data.py --tokenizer resources/tokenizers/toolcaller)
Prints a JSON summary; exit status 1 when a check fails.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIG = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1,
          "head_dim": 32, "intermediate_size": 128}


def train(data, tokenizer, out, state, extra):
    cmd = [sys.executable, os.path.join(HERE, "train.py"), "--data", data, "--out", out, "--steps", "12",
           "--state", state, "--state-every", "4", "--tokenizer", tokenizer, "--config", json.dumps(CONFIG),
           "--max-queries", "6", "--val-groups", "2", "--eval-every", "6", "--threads", "2", "--warmup", "3",
           "--lr", "3e-3", "--aux-weight", "0.3", "--lead-weight", "2", "--schedule", "wsd", "--rewarm", "4"] + extra
    r = subprocess.run(cmd, capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("data")
    ap.add_argument("--tokenizer", default=os.path.join(HERE, "..", "..", "resources/tokenizers/qwen3"))
    ap.add_argument("--work", default="")
    args = ap.parse_args()
    work = args.work or tempfile.mkdtemp(prefix="check_resume-")
    p = lambda *a: os.path.join(work, *a)  # noqa: E731
    checks, fails = {}, []

    def check(name, ok, detail=""):
        checks[name] = bool(ok)
        if not ok:
            fails.append(f"{name}: {detail}")

    rc, out = train(args.data, args.tokenizer, p("A"), p("stateA"), [])
    check("A runs", rc == 0, out[-2000:])
    rc, out = train(args.data, args.tokenizer, p("B1"), p("stateB"), ["--session-steps", "5"])
    check("B session 1 runs", rc == 0, out[-2000:])
    shutil.copytree(p("stateB", "carry"), p("stateC", "carry"))
    rc, out = train(args.data, args.tokenizer, p("B2"), p("stateB"), [])
    check("B session 2 runs and resumes exactly at step 5", rc == 0 and '"from": "exact", "step": 5' in out, out[-2000:])
    if not fails:
        a = torch.load(p("stateA", "state.pt"))
        b = torch.load(p("stateB", "state.pt"))
        check("same step", a["step"] == b["step"] == 12, (a["step"], b["step"]))
        check("same weights", all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"]))
        sa, sb = a["opt"]["state"], b["opt"]["state"]
        check("same AdamW moments", sa.keys() == sb.keys() and all(
            torch.equal(torch.as_tensor(sa[i][k]), torch.as_tensor(sb[i][k])) for i in sa for k in sa[i]))
        check("same learning rates", a["lrs"] == b["lrs"])
        # (B also evaluated at step 5, where its first session ended)
        va = {e["step"]: e["val_loss"] for e in a["log"]}
        vb = {e["step"]: e["val_loss"] for e in b["log"]}
        check("same validation losses", sorted(va) == [6, 12] and all(va[s] == vb.get(s) for s in va), (va, vb))
        check("two sessions recorded", [s["resumed_from"] for s in b["sessions"]] == ["start", "exact"], b["sessions"])
    rc, out = train(args.data, args.tokenizer, p("C"), p("stateC"), [])
    check("C resumes from the carry at step 5", rc == 0 and '"from": "carry", "step": 5' in out, out[-2000:])
    if rc == 0:
        c = torch.load(p("stateC", "state.pt"))
        check("C reaches step 12", c["step"] == 12, c["step"])
        check("C records the carry", [s["resumed_from"] for s in c["sessions"]] == ["start", "carry"], c["sessions"])
        check("C's losses are finite", all(e["val_loss"] == e["val_loss"] for e in c["log"]))
    rc, out = train(args.data, args.tokenizer, p("D"), p("stateA"), ["--lr", "1e-3"])
    check("D is refused, naming the lr", rc != 0 and "its lr is" in out, out[-1000:])
    before = open(p("stateA", "state.pt"), "rb").read()
    rc, out = train(args.data, args.tokenizer, p("E"), p("stateA"), ["--branch-decay", "3", "--steps", "12"])
    check("E branches without touching the state", rc == 0 and open(p("stateA", "state.pt"), "rb").read() == before
          and os.path.exists(p("E", "model.safetensors")), out[-2000:])
    print(json.dumps({"checks": checks, "failures": fails, "work": work}, indent=1))
    if not args.work and not fails:
        shutil.rmtree(work)
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
