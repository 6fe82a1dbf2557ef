# Sourced by scripts/device-check.sh and scripts/device-peer.sh (the calls on a lent GPU).
#   cuda_lib_dirs            prints ":DIR" for each folder holding CUDA 13's runtime libraries: the
#                            image's toolkit, or the wheels next to its PyTorch
#   step NAME SECONDS [VAR=VALUE...] PROGRAM ARGS...
#                            runs PROGRAM with LD_LIBRARY_PATH=$LIBS under a limit cut to what is
#                            left of $BUDGET seconds since $t_start; stdout to $OUT/NAME.out, stderr to
#                            $OUT/NAME.log, a line to $OUT/summary.txt; returns PROGRAM's exit code.
#                            With STEP_NEEDS_DRIVER=1 and no nvidia-smi it answers "skipped" (77)
#                            without running (for programs that fail rather than skip without one).
cuda_lib_dirs() {
  local dir out=""
  for dir in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib \
    $(python3 -c 'import nvidia, os; p = nvidia.__path__[0]; print(" ".join(os.path.join(p, d, "lib") for d in os.listdir(p)))' 2>/dev/null); do
    [ -e "$dir/libcublasLt.so.13" ] || [ -e "$dir/libcudart.so.13" ] && out="$out:$dir"
  done
  echo "$out"
}

step() {
  local name=$1 limit=$2 t0 rc left
  shift 2
  t0=$(date +%s)
  left=$(( BUDGET - (t0 - t_start) ))
  if [ "$left" -lt 20 ]; then
    printf '%-22s not run: %ss of the budget left\n' "$name" "$left" | tee -a "$OUT/summary.txt"
    return 1
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  if [ "${STEP_NEEDS_DRIVER:-0}" = 1 ] && ! command -v nvidia-smi > /dev/null 2>&1; then
    rc=77
    echo "skipped: no NVIDIA driver" > "$OUT/$name.log"
  else
    timeout "$limit" env LD_LIBRARY_PATH="$LIBS" "$@" > "$OUT/$name.out" 2> "$OUT/$name.log"
    rc=$?
  fi
  printf '%-22s rc=%-4s %4ss\n' "$name" "$rc" "$(( $(date +%s) - t0 ))" | tee -a "$OUT/summary.txt"
  return "$rc"
}
