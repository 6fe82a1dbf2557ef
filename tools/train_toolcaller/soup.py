#!/usr/bin/python3
"""Average the weights of exported model directories (a uniform "model soup", Wortsman et al. 2022).

Usage: soup.py OUT DIR [DIR ...]

Every tensor of OUT/model.safetensors is the mean of the same tensor in the DIRs, computed in
float64 from their bf16 values and rounded once to bf16. The DIRs must share the config (shape);
OUT gets the first DIR's config.json and generation_config.json and links to the tokenizer, as
train.py's export writes them. Meaningful only for runs that fine-tuned one starting point (here:
runs from the same run 13 weights), which stay in one basin of the loss.
"""
import json
import os
import shutil
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from reference_forward import read_safetensors, write_safetensors  # noqa: E402


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    out, dirs = sys.argv[1], sys.argv[2:]
    configs = [json.load(open(os.path.join(d, "config.json"))) for d in dirs]
    for d, c in zip(dirs[1:], configs[1:]):
        if c != configs[0]:
            sys.exit(f"{d}/config.json differs from {dirs[0]}/config.json")
    total, order = None, None
    for d in dirs:
        w, dtypes, _ = read_safetensors(os.path.join(d, "model.safetensors"))
        if total is None:
            total, order = w, list(w)   # the first file's tensor order
        else:
            if set(w) != set(total):
                sys.exit(f"{d}/model.safetensors: tensor names differ from {dirs[0]}'s")
            for k in order:
                if w[k].shape != total[k].shape:
                    sys.exit(f"{d}/model.safetensors: {k} has shape {w[k].shape}, {dirs[0]} {total[k].shape}")
                total[k] = total[k] + w[k]
    os.makedirs(out, exist_ok=True)
    write_safetensors(os.path.join(out, "model.safetensors"), [(k, "BF16", total[k] / len(dirs)) for k in order])
    for name in ("config.json", "generation_config.json"):
        shutil.copyfile(os.path.join(dirs[0], name), os.path.join(out, name))
    for name in ("tokenizer.json", "tokenizer_config.json"):
        link = os.path.join(out, name)
        if not os.path.lexists(link):
            target = os.path.realpath(os.path.join(dirs[0], name))
            os.symlink(os.path.relpath(target, out), link)
    with open(os.path.join(out, "soup.json"), "w") as f:
        json.dump({"mean_of": [os.path.abspath(d) for d in dirs]}, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
