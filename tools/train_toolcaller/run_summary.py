#!/usr/bin/python3
"""A training run's record for the model card: its arguments, data statistics and validation
curve (from RUN/train_log.json) and the held-out evaluation of each exported checkpoint
(`contextcache-cli eval --out EVAL_DIR` per checkpoint, read with eval_report.table_rows).
Usage: run_summary.py RUN_DIR OUT.json "DATA_COMMAND" STEP=EVAL_DIR [STEP=EVAL_DIR ...]
(DATA_COMMAND: the make_data.py command line that made the run's data, kept as text)"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from eval_report import table_rows  # noqa: E402


def held_out(d):
    out = {}
    for key, row in table_rows(d).items():
        if key.startswith("compare"):
            continue
        size = key.split()[1]
        out[size] = {"n": int(row["n"]), "tsa": row["correct"] / row["n_call"] if row["n_call"] else None,
                     "correct": int(row["correct"]), "n_call": int(row["n_call"]),
                     "json_valid": row["valid"] / row["opened"] if row["opened"] else None,
                     "fpr": row["fp"] / row["n_none"] if row["n_none"] else None,
                     "named_not_offered": int(row["not_offered"]), "named": int(row["named"])}
    return out


def main():
    run, out_path, data_command, pairs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    with open(os.path.join(run, "train_log.json")) as f:
        log = json.load(f)
    rec = {k: log[k] for k in ("args", "steps", "train_seconds", "params", "non_embedding_params",
                               "softmax_vocab", "config", "data_stats", "evals")}
    rec["device"] = log.get("device", "cpu")   # train.py writes it since --device (earlier runs: the CPU)
    rec["data_command"] = data_command
    rec["held_out"] = {}
    for p in pairs:
        step, d = p.split("=", 1)
        rec["held_out"][step] = held_out(d)
    with open(out_path, "w") as f:
        json.dump(rec, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
