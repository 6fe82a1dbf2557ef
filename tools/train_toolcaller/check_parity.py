#!/usr/bin/python3
"""Check that train.py's forward (prefix + suffixes sharing it) is the forward the engine runs:
load an exported directory into train.Model, run a real prompt split at the engine's
prefix/suffix boundary, and compare the last-position logits with `contextcache-cli logits`
on the same ids (bf16 weights, f32 compute on both sides).
Usage: check_parity.py CLI MODEL_DIR"""
import json
import os
import subprocess
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, ".."))
import train  # noqa: E402
from reference_forward import read_safetensors  # noqa: E402


def main():
    cli, model_dir = sys.argv[1], sys.argv[2]
    root = train.ROOT
    c = json.load(open(os.path.join(model_dir, "config.json")))
    tensors, _, _ = read_safetensors(os.path.join(model_dir, "model.safetensors"))
    m = train.Model(c)
    sd = {"embed_tokens.weight": tensors["model.embed_tokens.weight"], "norm": tensors["model.norm.weight"]}
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}."
        for ours, theirs in (("input_layernorm", "input_layernorm.weight"), ("q_proj.weight", "self_attn.q_proj.weight"),
                             ("k_proj.weight", "self_attn.k_proj.weight"), ("v_proj.weight", "self_attn.v_proj.weight"),
                             ("o_proj.weight", "self_attn.o_proj.weight"), ("q_norm", "self_attn.q_norm.weight"),
                             ("k_norm", "self_attn.k_norm.weight"), ("post_attention_layernorm", "post_attention_layernorm.weight"),
                             ("gate_proj.weight", "mlp.gate_proj.weight"), ("up_proj.weight", "mlp.up_proj.weight"),
                             ("down_proj.weight", "mlp.down_proj.weight")):
            sd[f"layers.{i}.{ours}"] = tensors[p + theirs]
    m.load_state_dict({k: torch.tensor(v, dtype=torch.float32) for k, v in sd.items()})
    m.eval()
    r = json.loads(subprocess.check_output([cli, "--model", model_dir, "--json", "render", "--tools",
                                            os.path.join(root, "resources/toolsets/tools_5.json"),
                                            "--query", "Convert 40 EUR to JPY please."]))
    prefix, suffix = r["prefix_ids"], r["suffix_ids"]
    ours = None
    with torch.no_grad():
        # last suffix position's logits through the training forward
        P, S = len(prefix), len(suffix)
        ids_p, ids_s = torch.tensor(prefix), torch.tensor([suffix])
        xp = m.embed_tokens(ids_p)[None]
        xs = [m.embed_tokens(ids_s)]
        rope_p, rope_s = m.rope(0, P), [m.rope(P, S)]
        mask_p = torch.full((P, P), float("-inf")).triu(1)
        mask_s = [torch.full((S, S), float("-inf")).triu(1)]
        for layer in m.layers:
            xp, xs = layer(xp, xs, rope_p, rope_s, mask_p, mask_s)
        h = train.rms_norm(xs[0][0, S - 1][None], m.norm, c["rms_norm_eps"])
        ours = (h @ m.embed_tokens.weight.t())[0].numpy()
    ids = ",".join(str(i) for i in prefix + suffix)
    theirs = np.array(json.loads(subprocess.check_output([cli, "--model", model_dir, "--backend", "cpu", "--json",
                                                          "logits", "--prompt-ids", ids]))["logits"])
    diff = np.abs(ours - theirs).max()
    print(json.dumps({"n_tokens": P + S, "max_abs_logit_diff": float(diff), "max_abs_logit": float(np.abs(theirs).max()),
                      "argmax_ours": int(ours.argmax()), "argmax_engine": int(theirs.argmax())}))
    sys.exit(0 if diff < 1e-3 * max(1.0, np.abs(theirs).max()) and ours.argmax() == theirs.argmax() else 1)


if __name__ == "__main__":
    main()
