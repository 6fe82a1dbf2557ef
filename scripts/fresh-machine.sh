#!/usr/bin/env bash
# Runs a command in a pristine Debian 12 (bookworm) root, the way CI and a new user's machine see
# the project: only apt, ca-certificates (plus the host's local CAs) and bash installed; this
# repository's committed HEAD cloned to /work/main; the shared folder copied to /work/shared beside
# it; the host's CUDA toolkit (when /usr/local/cuda exists) bind-mounted read-only with the host's
# layout (cuda-X.Y + the cuda link).
#
# usage: scripts/fresh-machine.sh [--no-cuda] [--shared DIR] [--out DIR] [--] 'COMMAND'
#   COMMAND     run with bash -c in /work/main inside the root
#   --no-cuda   do not bind-mount the CUDA toolkit (a machine without one)
#   --shared    the shared folder to copy (default: $FRESH_SHARED, else ../shared beside the repo)
#   --out DIR   bind-mount host DIR read-write at /out in the root (OUT_DIR=/out inside), so the
#               command can hand files back (everything else vanishes with the root); also $OUT_DIR
# environment inside: HOME, LANG=C.UTF-8, PATH, TERM=dumb, QT_QPA_PLATFORM=offscreen, CI if set.
# The root tarball is made with mmdebstrap (apt-get installed when missing) and cached for a day
# under ${FRESH_CACHE:-/tmp/fresh-debian}; each run extracts a new root and deletes it on exit.
# Mounts live in a private mount namespace (unshare) and vanish with it. Needs root.
#
# exit status: the command's, or 125 when the root could not be made (no root privilege, no
# unshare, no mmdebstrap and apt-get cannot install it, mmdebstrap failed, e.g. without network);
# then a banner on stderr says why, so a caller can fall back to running on the host.
set -euo pipefail

EX_NO_ROOT=125
log() { echo "fresh-machine: $*" >&2; }
unavailable() {
  {
    echo
    echo "######################################################################################"
    echo "##  FRESH MACHINE UNAVAILABLE: no pristine Debian 12 root could be made."
    for line in "$@"; do echo "##    $line"; done
    echo "##  The command was NOT run in a fresh root (exit $EX_NO_ROOT)."
    echo "##  Anything that runs it on this host instead tests THIS host, with its leftovers."
    echo "######################################################################################"
    echo
  } >&2
  exit "$EX_NO_ROOT"
}
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f s", b - a }'; }
# CPU seconds (user + system) of this script's finished children: what the command costs a machine.
children_cpu_s() { awk -v hz="$(getconf CLK_TCK)" '{ printf "%.1f", ($16 + $17) / hz }' "/proc/$$/stat"; }

cuda=auto
shared=${FRESH_SHARED:-}
out=${OUT_DIR:-}
while [ $# -gt 0 ]; do
  case $1 in
    --no-cuda) cuda=no; shift ;;
    --shared) shared=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --) shift; break ;;
    -*) echo "usage: $0 [--no-cuda] [--shared DIR] [--out DIR] [--] 'COMMAND'" >&2; exit 2 ;;
    *) break ;;
  esac
done
if [ $# -ne 1 ]; then
  echo "usage: $0 [--no-cuda] [--shared DIR] [--out DIR] [--] 'COMMAND'" >&2
  exit 2
fi
cmd=$1

# ---- can a root be made here? -----------------------------------------------------------------
[ "$(id -u)" -eq 0 ] || unavailable "why: not running as root (uid $(id -u)); chroot and the mounts need root." \
  "fix: run as root (CI runs as root), e.g. sudo $0 ..."
command -v unshare >/dev/null || unavailable "why: no unshare command (util-linux)."
unshare --mount --fork true 2>/dev/null ||
  unavailable "why: 'unshare --mount' is not permitted here (a container without CAP_SYS_ADMIN?)."
command -v chroot >/dev/null || unavailable "why: no chroot command (coreutils)."

repo=$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel)
head=$(git -C "$repo" rev-parse HEAD)
branch=$(git -C "$repo" symbolic-ref -q --short HEAD || true)
shared=${shared:-$repo/../shared}
[ -d "$shared" ] || { echo "fresh-machine: shared folder $shared not found (--shared DIR)" >&2; exit 2; }
if [ -n "$out" ]; then mkdir -p "$out"; out=$(cd "$out" && pwd); fi
if ! git -C "$repo" diff --quiet HEAD -- 2>/dev/null; then
  log "note: uncommitted changes in $repo are NOT in the fresh root (it gets committed HEAD)"
fi

cache=${FRESH_CACHE:-/tmp/fresh-debian}
mkdir -p "$cache"
tarball=$cache/bookworm-$(date +%F).tar   # one per day: a new day picks up Debian's updates
t0=$(now)
if [ -s "$tarball" ]; then
  log "root tarball: cached $tarball"
else
  if ! command -v mmdebstrap >/dev/null; then
    log "mmdebstrap missing: apt-get install mmdebstrap"
    { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q mmdebstrap; } >&2 ||
      unavailable "why: mmdebstrap is not installed and 'apt-get install mmdebstrap' failed" \
        "(no network, or no apt here?)."
  fi
  part=$cache/bookworm-$$.part.tar
  log "making the root tarball with mmdebstrap (bookworm, variant apt + ca-certificates)"
  if ! mmdebstrap --quiet --variant=apt --include=ca-certificates bookworm "$part" \
    "deb http://deb.debian.org/debian bookworm main" \
    "deb http://deb.debian.org/debian bookworm-updates main" \
    "deb http://deb.debian.org/debian-security bookworm-security main" >&2; then
    rm -f "$part"
    unavailable "why: mmdebstrap failed to make a bookworm root (see its messages above;" \
      "most often no network to deb.debian.org)."
  fi
  mv "$part" "$tarball"
  log "root tarball made in $(since "$t0"): $tarball ($(du -h "$tarball" | cut -f1))"
fi
# Tarballs of earlier days are stale; remove them (the current one is kept for a day).
find "$cache" -maxdepth 1 -name 'bookworm-*.tar' ! -path "$tarball" -mtime +0 -delete 2>/dev/null || true

# ---- a new root for this run ------------------------------------------------------------------
t1=$(now)
root=$(mktemp -d "$cache/root.XXXXXX")
# The mounts are in the namespace that ends with the command, so the host sees a plain tree here.
cleanup() {
  local t=$(now)
  # Never delete through a mount (a bind-mounted --out or CUDA is the same file system here).
  if grep -q " ${root}[/ ]" /proc/self/mountinfo; then log "NOT removing $root: something is mounted under it"; return; fi
  rm -rf --one-file-system "$root"
  log "root removed in $(since "$t")"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
tar -C "$root" -xf "$tarball" || unavailable "why: could not extract $tarball into $root (disk full?)."
log "root extracted in $(since "$t1"): $root"

t2=$(now)
mkdir -p "$root/work/main" "$root/work/shared"
git clone -q --no-checkout "$repo" "$root/work/main"
if [ -n "$branch" ]; then
  git -C "$root/work/main" checkout -q -B "$branch" "$head"
else
  git -C "$root/work/main" checkout -q --detach "$head"
fi
cp -a "$shared/." "$root/work/shared/"     # the folder's content, also when $shared is a symlink
cp /etc/resolv.conf "$root/etc/resolv.conf"   # same network as the host, so apt-get works
# The same trust as the host: a network that inspects TLS (a proxy with its own CA, installed on the
# host as a local CA) would otherwise refuse every HTTPS fetch in the root (npm's registry, say).
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
  mkdir -p "$root/usr/local/share/ca-certificates"
  cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
  chroot "$root" /usr/sbin/update-ca-certificates >/dev/null 2>&1 ||
    log "update-ca-certificates failed in the root; the host's local CAs are not trusted there"
fi
log "cloned ${branch:-HEAD} at ${head:0:12} to /work/main, $shared to /work/shared in $(since "$t2")"

cuda_real=
if [ "$cuda" = auto ] && [ -e /usr/local/cuda ]; then
  cuda_real=$(readlink -f /usr/local/cuda)   # e.g. /usr/local/cuda-13.0
  log "CUDA toolkit: $cuda_real bind-mounted read-only (with the /usr/local/cuda link)"
else
  log "CUDA toolkit: none in the root"
fi
[ -z "$out" ] || log "output folder: $out at /out"

# ---- the command -------------------------------------------------------------------------------
env_in=(HOME=/root LANG=C.UTF-8 TERM=dumb QT_QPA_PLATFORM=offscreen
  PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin)
[ -z "${CI+x}" ] || env_in+=("CI=$CI")
[ -z "$out" ] || env_in+=(OUT_DIR=/out)
export FM_ROOT=$root FM_CUDA=$cuda_real FM_OUT=$out FM_CMD=$cmd
t3=$(now)
c3=$(children_cpu_s)
set +e
unshare --mount --fork bash -c '
  set -e
  trap "exit 125" ERR   # a failed mount: the command never ran (told apart by the marker below)
  mount -t proc proc "$FM_ROOT/proc"
  mount --rbind /dev "$FM_ROOT/dev"
  mount --rbind /sys "$FM_ROOT/sys"
  mount -t tmpfs tmpfs "$FM_ROOT/tmp"
  if [ -n "$FM_CUDA" ]; then
    mkdir -p "$FM_ROOT$FM_CUDA"
    mount --rbind "$FM_CUDA" "$FM_ROOT$FM_CUDA"
    mount -o remount,bind,ro "$FM_ROOT$FM_CUDA"
    [ "$FM_CUDA" = /usr/local/cuda ] || ln -sfn "$FM_CUDA" "$FM_ROOT/usr/local/cuda"
  fi
  if [ -n "$FM_OUT" ]; then
    mkdir -p "$FM_ROOT/out"
    mount --bind "$FM_OUT" "$FM_ROOT/out"
  fi
  touch "$FM_ROOT/.fresh-machine-started"
  exec chroot "$FM_ROOT" /usr/bin/env -i "$@" bash -c "cd /work/main && $FM_CMD"' fresh-machine "${env_in[@]}"
rc=$?
set -e
if [ ! -e "$root/.fresh-machine-started" ]; then
  unavailable "why: mounting proc/dev/sys/tmp${cuda_real:+/CUDA}${out:+/out} in the root failed" \
    "(see the messages above; a container without mount privilege?)."
fi
cpu=$(awk -v a="$c3" -v b="$(children_cpu_s)" 'BEGIN { printf "%.0f", b - a }')
log "command took $(since "$t3") (CPU ${cpu} s user+sys), exit $rc; total $(since "$t0")"
exit "$rc"
