#!/bin/sh
# Rebuilds run 2, the toolcaller shipped until run 10, from scratch (CPU only, 45 minutes of training
# on 2 cores). The shipped weights (run 14c) come from run_gpu.sh, run_long.sh and run_gpu_long.sh
# (GPU, CPU, GPU); see the card.
# make_data.py needs a Python with the `regex` module (Debian: python3-regex); train.py needs
# Debian's python3-torch (1.13) and python3-numpy. Seeds are fixed (1234).
# The training run stops on a wall-clock limit; its per-step learning rates are logged in
# train_log.json, and `train.py --replay-lrs OLD/train_log.json` repeats that run step for step.
# Speed: OpenBLAS gets 2 threads and OpenMP waits passively (the two pools otherwise spin against
# each other: 2x slower), and tcmalloc is preloaded when installed (Debian libgoogle-perftools4:
# glibc returns large tensors to the kernel and page-faults them back at every step). Neither
# changes what is computed.
set -e
cd "$(dirname "$0")/../.."
DATA=${DATA:-/tmp/toolcaller_data}
OUT=${OUT:-/tmp/toolcaller_run}
for m in regex torch numpy; do
  /usr/bin/python3 -c "import $m" 2>/dev/null || { echo "run.sh: python3 module '$m' is missing (apt-get install python3-$m)" >&2; exit 1; }
done
/usr/bin/python3 tools/train_toolcaller/make_data.py --out "$DATA" --groups 5000 --seed 1234 --max-queries 40 --tools-asked 20
# the prompts must be the engine's, token for token
/usr/bin/python3 tools/train_toolcaller/make_data.py --out "$DATA/check" --groups 20 --dump-tools
/usr/bin/python3 tools/train_toolcaller/check_render.py build/app/contextcache-cli "$DATA/check"
TCMALLOC=/usr/lib/x86_64-linux-gnu/libtcmalloc.so.4
[ -e "$TCMALLOC" ] && export LD_PRELOAD="$TCMALLOC"
OPENBLAS_NUM_THREADS=2 OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 tools/train_toolcaller/train.py \
    --data "$DATA/train.pkl" --out "$OUT" --steps 100000 --time-limit-s 2700 --warmup 60 --lr 4e-3 \
    --eval-every 200 --val-groups 16 --export-every 500 --threads 2 --seed 1234 --max-queries 40 \
    --short-first 0.4 --short-prefix 1300 --lead-weight 2 --aux-weight 0.3 \
    --config '{"num_hidden_layers": 4, "intermediate_size": 448}'
unset LD_PRELOAD
/usr/bin/python3 tools/train_toolcaller/check_parity.py build/app/contextcache-cli "$OUT"
