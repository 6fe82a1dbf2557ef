#!/bin/sh
# Rebuilds resources/models/toolcaller from scratch (CPU only, about 45 minutes of training).
# make_data.py needs a Python with the `regex` module (Debian: python3-regex); train.py needs
# Debian's python3-torch (1.13) and python3-numpy. Seeds are fixed (1234).
# The training run stops on a wall-clock limit (the machine is shared); its per-step learning
# rates are logged in train_log.json, and `train.py --replay-lrs OLD/train_log.json` repeats
# that run step for step.
set -e
cd "$(dirname "$0")/../.."
DATA=${DATA:-/tmp/toolcaller_data}
OUT=${OUT:-/tmp/toolcaller_run}
python3 tools/train_toolcaller/make_data.py --out "$DATA" --groups 8000 --seed 1234
# the prompts must be the engine's, token for token
python3 tools/train_toolcaller/make_data.py --out "$DATA/check" --groups 20 --dump-tools
python3 tools/train_toolcaller/check_render.py build/app/contextcache-cli "$DATA/check"
nice -n 5 /usr/bin/python3 tools/train_toolcaller/train.py --data "$DATA/train.pkl" --out "$OUT" \
    --steps 100000 --time-limit-s 2520 --warmup 30 --lr 3e-3 --eval-every 100 --val-groups 8 \
    --export-every 100 --threads 2 --seed 1234
/usr/bin/python3 tools/train_toolcaller/check_parity.py build/app/contextcache-cli "$OUT"
