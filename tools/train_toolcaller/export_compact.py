#!/usr/bin/python3
"""Export train.py's compact.npz (the f32 training weights over the compact vocabulary, written with
--save-compact) as the HF directory train.py itself would have written: the weights of a run made
elsewhere (a GPU machine) come back small and are exported here.

Usage: export_compact.py RUN/compact.npz OUT_DIR"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train import export, load_compact  # noqa: E402

if len(sys.argv) != 3:
    sys.exit(__doc__)
model, remap = load_compact(sys.argv[1])
export(model, remap, sys.argv[2])
print(f"exported {sys.argv[1]} -> {sys.argv[2]}")
