#!/usr/bin/python3
"""Where a checkpoint's tool calls go wrong, teacher-forced on generated groups: of the call
answers, how often the model predicts the tool name's first token (choosing the tool) and its
later tokens (copying the rest of a name it has started), split by whether the name is a bundled
tool's own or a renamed one (make_data.py --rename) and by prefix length.
Usage: name_diag.py MODEL_DIR DATA/train.pkl [--groups 16] [--short-prefix 1300]
(the first --groups groups are train.py's validation groups with the same --val-groups)"""
import argparse
import json
import os
import pickle
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import train  # noqa: E402
from qwen3_tokenizer import Qwen3Tokenizer, qwen3_json  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("data")
    ap.add_argument("--groups", type=int, default=16)
    ap.add_argument("--short-prefix", type=int, default=1300)
    args = ap.parse_args()
    torch.set_num_threads(2)
    with open(args.data, "rb") as f:
        groups = pickle.load(f)["groups"]
    with open(os.path.join(args.model, "config.json")) as f:
        c = json.load(f)
    vocab, remap = train.compact_vocab(groups, c["vocab_size"])
    model = train.Model(dict(c, vocab_size=len(vocab) + 1))
    model.c = c
    train.load_exported(model, args.model, vocab, remap)
    model.eval()
    nt = train.NameTokens(qwen3_json())
    tok = Qwen3Tokenizer(qwen3_json())
    with open(os.path.join(train.ROOT, "resources/toolsets/tools_100.json")) as f:
        bundled = {tuple(tok.encode((t.get("function") or t)["name"])) for t in json.load(f)}
    # counts[(renamed?, short?)] = [calls, first token right, later tokens, later tokens right]
    counts = {}
    with torch.no_grad():
        for g in groups[:args.groups]:
            prefix, buckets, at, tg, w, members = train.batch_of(g, 10 ** 6)
            _, _, ok, _ = model(remap[prefix], [remap[b] for b in buckets], at, remap[tg])
            short = len(g["prefix"]) <= args.short_prefix
            for b, idx in enumerate(members):
                for r, i in enumerate(idx):
                    ids, n_prompt = g["suffixes"][i]
                    name = nt.called_name(list(ids[n_prompt:]))
                    if not name:
                        continue
                    rows = ((at[:, 0] == b) & (at[:, 1] == r)).nonzero().flatten()
                    # answer token k is predicted at row k of this answer; the name starts at k = 6
                    right = ok[rows[6:6 + len(name)]].tolist()
                    cnt = counts.setdefault(("bundled" if name in bundled else "renamed/BFCL",
                                             "short" if short else "long"), [0, 0, 0, 0])
                    cnt[0] += 1
                    cnt[1] += int(right[0])
                    cnt[2] += len(right) - 1
                    cnt[3] += sum(right[1:])
    for (kind, length), (n, first, later, later_ok) in sorted(counts.items()):
        print(json.dumps({"names": kind, "prefix": length, "calls": n, "first_token_right": round(first / n, 3),
                          "later_tokens_right": round(later_ok / max(1, later), 3)}))


if __name__ == "__main__":
    main()
