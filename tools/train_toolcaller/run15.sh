#!/bin/bash
# Run 15: the first toolcaller on the derived tokenizer (resources/tokenizers/toolcaller, 24,576 rows) with
# the capacity it frees (hidden 320, 6 layers, 14.9 M parameters, 29.7 MB in bf16), on the v3 data
# (make_run15_data.sh), as one resumable run (train.py --state) that adds up over sessions on a lent GPU
# and on this CPU. One call is one session; the schedule is the run's (20,000 steps: warm-up 200, the
# learning rate held, the last 20% decayed), and any session may branch a decayed copy to ship.
#   tools/train_toolcaller/run15.sh SECONDS      a session: continue the run for SECONDS (state written
#                                                every 250 steps and at the end)
#   BRANCH=N tools/train_toolcaller/run15.sh     N steps decaying from where the run stands, exported to $OUT
# Environment: DEVICE cpu|cuda (default cpu), STATE (default tools/train_toolcaller/state/run15, ignored by
# git), DATA (default /tmp/run15_data, made when missing), OUT (default /tmp/run15_out), PYTHON, BFCL_DIR.
# Sessions on a lent GPU: run15_device.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."
STATE=${STATE:-tools/train_toolcaller/state/run15}
DATA=${DATA:-/tmp/run15_data}
OUT=${OUT:-/tmp/run15_out}
PY=${PYTHON:-/usr/bin/python3}
DEVICE=${DEVICE:-cpu}
[ -e "$DATA/train.pkl" ] || PYTHON="$PY" tools/train_toolcaller/make_run15_data.sh "$DATA"
BF16=(--bf16)
if [ "$DEVICE" = cuda ]; then PAR=(--threads 1 --workers 8); else
  PAR=(--threads 2)
  TCMALLOC=/usr/lib/x86_64-linux-gnu/libtcmalloc.so.4   # as run.sh: glibc would page-fault big tensors back every step
  [ -e "$TCMALLOC" ] && export LD_PRELOAD="$TCMALLOC" OPENBLAS_NUM_THREADS=2 OMP_WAIT_POLICY=PASSIVE
  # bf16 autocast pays only with AVX-512 BF16; elsewhere torch's fallback made a 512x320x960 matmul
  # 28x slower than f32 (AMD Zen 2: 72 against 2.6 ms), so such a session runs its forward in f32.
  # Weights and AdamW state are f32 either way, so the sessions still add up to one run (each
  # session records bf16_autocast).
  if ! grep -qw avx512_bf16 /proc/cpuinfo; then
    BF16=(); echo "run15.sh: this CPU has no AVX-512 BF16: the forward runs in f32 this session" >&2
  fi
fi
if [ -n "${BRANCH:-}" ]; then SESSION=(--branch-decay "$BRANCH"); else SESSION=(--time-limit-s "${1:?seconds}"); fi
"$PY" tools/train_toolcaller/train.py --data "$DATA/train.pkl" --out "$OUT" --state "$STATE" "${SESSION[@]}" \
    --tokenizer resources/tokenizers/toolcaller --steps 20000 --seed 1515 --lr 2e-3 --warmup 200 --schedule wsd \
    --decay-frac 0.2 --max-queries 48 --val-groups 16 --eval-every 250 --state-every 250 --lead-weight 3 \
    --aux-weight 0.3 --gather-weight 0.5 --match-weight 0.5 --collect-weight 0.5 --point-weight 0.5 "${BF16[@]}" \
    --device "$DEVICE" "${PAR[@]}" \
    --config '{"hidden_size": 320, "num_hidden_layers": 6, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64, "intermediate_size": 960}'
