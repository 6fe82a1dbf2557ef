#!/usr/bin/python3
"""Concatenate training-data pickles (make_data.py's train.pkl) into one, optionally sampling one of them.

  mix_data.py OUT.pkl [--take A.pkl ...] [--sample BASE.pkl N SEED]

Every --take file is taken whole, in order; the first one's first groups are the validation set
train.py holds back (--val-groups), so put the file whose contexts you want to validate on first.
--sample adds N contexts drawn with random.Random(SEED) from BASE.pkl's contexts after its first 16
(its own validation set). The stats of each part are kept.
"""
import argparse
import pickle
import random


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--take", nargs="+", default=[])
    ap.add_argument("--sample", nargs=3, metavar=("BASE", "N", "SEED"))
    args = ap.parse_args()
    groups, stats = [], {}
    for path in args.take:
        with open(path, "rb") as f:
            part = pickle.load(f)
        groups += part["groups"]
        stats[path] = part["stats"]
    if args.sample:
        base, n, seed = args.sample[0], int(args.sample[1]), int(args.sample[2])
        with open(base, "rb") as f:
            part = pickle.load(f)
        groups += random.Random(seed).sample(part["groups"][16:], n)
        stats[base] = f"{n} contexts sampled (random.Random({seed})) from its contexts after the first 16"
    with open(args.out, "wb") as f:
        pickle.dump({"groups": groups, "stats": stats}, f)
    print(f"{args.out}: {len(groups)} contexts")


if __name__ == "__main__":
    main()
