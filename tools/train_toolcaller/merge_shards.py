#!/usr/bin/python3
"""Concatenate make_data.py shards DIR/s0 ... DIR/s{N-1} in order into DIR/train.pkl, with the stats
{"shards": [each shard's stats]} (plus "tokenizer_sha256" when the shards name their tokenizer).
Used by make_run10_data.sh and make_run15_data.sh.   merge_shards.py DIR N"""
import pickle
import sys


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    d, n = sys.argv[1], int(sys.argv[2])
    groups, stats = [], []
    for i in range(n):
        with open(f"{d}/s{i}/train.pkl", "rb") as f:
            part = pickle.load(f)
        groups += part["groups"]
        stats.append(part["stats"])
    merged = {"shards": stats}
    if "tokenizer_sha256" in stats[0]:
        merged["tokenizer_sha256"] = stats[0]["tokenizer_sha256"]
    with open(f"{d}/train.pkl", "wb") as f:
        pickle.dump({"groups": groups, "stats": merged}, f)
    print(f"{len(groups)} contexts")


if __name__ == "__main__":
    main()
