#!/usr/bin/python3
"""Move a toolcaller checkpoint trained on the full Qwen3 vocabulary onto a tokenizer made by
derive_tokenizer.py: the embedding keeps one row per kept token (the same bf16 bytes, found by the
token's string), every other tensor is copied as it is, and the config, generation config and
tokenizer files say the new ids.

For a text whose Qwen3 tokens are all kept the new tokenizer gives the same tokens (renumbered),
so the model computes the same hidden states, and its logits over the kept rows are the old ones:
a dropped id only had the shared "never seen" row, whose logit training pushed below the others.
check_parity.py and `contextcache-cli eval` on both directories check it.

Usage: repack_vocab.py SRC_MODEL_DIR TOKENIZER_DIR OUT_DIR
"""
import json
import os
import shutil
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tools"))
from reference_forward import read_safetensors, write_safetensors  # noqa: E402


def token_ids(tokenizer_json):
    with open(tokenizer_json, encoding="utf-8") as f:
        tj = json.load(f)
    ids = dict(tj["model"]["vocab"])
    ids.update({t["content"]: t["id"] for t in tj["added_tokens"]})
    return ids


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    src, tok_dir, out = sys.argv[1:]
    src_tok = os.path.join(src, "tokenizer.json")
    old = token_ids(src_tok)
    new = token_ids(os.path.join(tok_dir, "tokenizer.json"))
    missing = [t for t in new if t not in old]
    if missing:
        sys.exit(f"repack_vocab.py: {len(missing)} tokens of the new tokenizer are not in {src_tok} (e.g. {missing[:3]})")
    rows = len(new)
    order = np.empty(rows, dtype=np.int64)
    for t, i in new.items():
        order[i] = old[t]
    if sorted(new.values()) != list(range(rows)):
        sys.exit("repack_vocab.py: the new ids are not 0..N-1")

    w, dtypes, _ = read_safetensors(os.path.join(src, "model.safetensors"))
    if set(dtypes.values()) != {"BF16"}:
        sys.exit("repack_vocab.py: expects a bf16 checkpoint")
    tensors = []
    with open(os.path.join(src, "model.safetensors"), "rb") as f:   # keep the file's tensor order
        n = int.from_bytes(f.read(8), "little")
        names = [k for k in json.loads(f.read(n)) if k != "__metadata__"]
    names.sort(key=lambda k: json.loads(open(os.path.join(src, "model.safetensors"), "rb").read(8 + n)[8:])[k]["data_offsets"][0])
    for name in names:
        t = w[name]
        if name in ("model.embed_tokens.weight", "lm_head.weight"):
            t = t[order]
        tensors.append((name, "BF16", t))
    os.makedirs(out, exist_ok=True)
    write_safetensors(os.path.join(out, "model.safetensors"), tensors)

    special = {t: i for t, i in new.items() if t.startswith("<|")}
    with open(os.path.join(src, "config.json"), encoding="utf-8") as f:
        cfg = json.load(f)
    cfg["vocab_size"] = rows
    cfg["bos_token_id"] = special["<|endoftext|>"]
    cfg["eos_token_id"] = special["<|im_end|>"]
    with open(os.path.join(out, "config.json"), "w", encoding="utf-8") as f:
        json.dump(cfg, f, indent=2)
        f.write("\n")
    with open(os.path.join(out, "generation_config.json"), "w", encoding="utf-8") as f:
        json.dump({"bos_token_id": special["<|endoftext|>"], "eos_token_id": [special["<|im_end|>"], special["<|endoftext|>"]],
                   "pad_token_id": special["<|endoftext|>"], "do_sample": False}, f, indent=2)
        f.write("\n")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        dst = os.path.join(out, name)
        if os.path.lexists(dst):
            os.unlink(dst)
        shutil.copyfile(os.path.join(tok_dir, name), dst)
    print(json.dumps({"rows": rows, "hidden": int(w["model.embed_tokens.weight"].shape[1]),
                      "bytes": os.path.getsize(os.path.join(out, "model.safetensors"))}))


if __name__ == "__main__":
    main()
