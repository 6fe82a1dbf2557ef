#!/bin/sh
# Build resources/tokenizers/qwen3/tokenizer.json.tar.xz: the Qwen3 tokenizer.json (Qwen/Qwen3-0.6B on
# the Hugging Face hub, Apache-2.0; SHA-256 aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4),
# stored compressed (11.4 MB of JSON, 1.4 MB packed) so that the working tree plus a device run's
# carry stay inside the device tool's 64 MiB. The build unpacks it at configure time
# (core/base/CMakeLists.txt) and embeds it; the Python tools unpack it next to the archive, ignored by git
# (tools/train_toolcaller/qwen3_tokenizer.py: unpacked()).
# Usage: tools/pack_qwen3_tokenizer.sh [tokenizer.json]   (run from the repository root)
# Deterministic: one member, fixed mtime, owner and mode, single-threaded xz.
set -eu
src=${1:-resources/tokenizers/qwen3/tokenizer.json}
out=resources/tokenizers/qwen3/tokenizer.json.tar.xz
echo "aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4  $src" | sha256sum -c -
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
cp "$src" "$stage/tokenizer.json"
chmod 0644 "$stage/tokenizer.json"
tar --sort=name --mtime='2025-04-29 00:00:00Z' --owner=0 --group=0 --numeric-owner \
    --format=gnu -C "$stage" -cf - tokenizer.json | xz -9e -T1 -c > "$out"
ls -l "$out"
