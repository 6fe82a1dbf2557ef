#!/usr/bin/python3
"""Creates the tiny reference checkpoints and their float64 goldens.

    /usr/bin/python3 tools/make_reference_models.py [--out tests/data/reference_models]

Writes <out>/<name>/{config.json,model.safetensors} for qwen3_tiny, llama3_scaled_tiny and
mistral_swa_tiny, and <out>/goldens.json. Weights come from a seeded numpy Generator
(deterministic). The goldens are computed by tools/reference_forward.py (float64) from the
checkpoint as read back from disk, so they use exactly the stored (BF16/F16/F32) values.
goldens.json also records, per model, what float32 numpy gets versus float64 and how much
each plausible implementation mistake moves the logits (the sensitivity table).
"""

import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference_forward as rf  # noqa: E402

GREEDY_STEPS = 16
MIN_MARGIN = 0.02        # a golden prompt is accepted only if every greedy step's top1-top2 gap is >= this
MIN_DISTINCT = 6         # ... and the 16 greedy tokens contain at least this many distinct ids


SPECS = [
    {
        "name": "qwen3_tiny",
        "seed": 3003,
        "storage": "BF16",
        "torch_dtype": "bfloat16",
        # Tied embeddings make a random model predict its current token again; stronger
        # attention/MLP outputs (o_proj, down_proj) keep the greedy continuations varied.
        "residual_gain": 3.0,
        "config": {
            "architectures": ["Qwen3ForCausalLM"],
            "model_type": "qwen3",
            "hidden_size": 48,
            "intermediate_size": 96,
            "num_hidden_layers": 3,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "head_dim": 16,
            "vocab_size": 300,
            "max_position_embeddings": 256,
            "rms_norm_eps": 1e-6,
            "rope_theta": 1000000.0,
            "rope_scaling": None,
            "hidden_act": "silu",
            "tie_word_embeddings": True,
            "attention_bias": False,
            "attention_dropout": 0.0,
            "use_sliding_window": False,
            "sliding_window": None,
            "max_window_layers": 3,
            "bos_token_id": 1,
            "eos_token_id": 2,
        },
        "prompt_lengths": [20, 48, 64],
        "bos_first": False,
        "rows": lambda T: [0, 17, T - 2],
    },
    {
        "name": "llama3_scaled_tiny",
        "seed": 1003,
        "storage": "F32",
        "residual_gain": 2.0,
        "torch_dtype": "float32",
        "config": {
            "architectures": ["LlamaForCausalLM"],
            "model_type": "llama",
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "head_dim": 16,
            "vocab_size": 256,
            "max_position_embeddings": 512,
            "rms_norm_eps": 1e-5,
            "rope_theta": 500000.0,
            "rope_scaling": {
                "rope_type": "llama3",
                "factor": 8.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 64,
            },
            "hidden_act": "silu",
            "tie_word_embeddings": False,
            "attention_bias": False,
            "mlp_bias": False,
            "bos_token_id": 1,
            "eos_token_id": 2,
        },
        "prompt_lengths": [24, 80, 96],
        "bos_first": True,
        "rows": lambda T: [5, 64, T - 2] if T > 66 else [5, 12, T - 2],
    },
    {
        "name": "mistral_swa_tiny",
        "seed": 2003,
        "storage": "F16",
        "residual_gain": 2.0,
        "torch_dtype": "float16",
        "config": {
            "architectures": ["MistralForCausalLM"],
            "model_type": "mistral",
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "num_key_value_heads": 1,
            "head_dim": 8,
            "vocab_size": 200,
            "max_position_embeddings": 256,
            "rms_norm_eps": 1e-5,
            "rope_theta": 10000.0,
            "rope_scaling": None,
            "sliding_window": 8,
            "hidden_act": "silu",
            "tie_word_embeddings": False,
            "attention_bias": False,
            "bos_token_id": 1,
            "eos_token_id": 2,
        },
        "prompt_lengths": [20, 24, 40],
        "bos_first": True,
        # 7: the last query whose window still holds every earlier key; 8: the first that drops key 0.
        "rows": lambda T: [7, 8, T - 2],
    },
]

# Each variant is one plausible mistake; its effect on the logits is recorded per model.
SENSITIVITY = {
    "qwen3_tiny": {
        "no q_norm/k_norm": {"no_qk_norm": True},
        "interleaved RoPE pairs instead of rotate_half": {"interleaved_rope": True},
    },
    "llama3_scaled_tiny": {
        "rope_scaling ignored (plain theta)": {"no_rope_scaling": True},
        "llama3 medium band left unscaled (no smoothing)": {"llama3_medium_unscaled": True},
        "interleaved RoPE pairs instead of rotate_half": {"interleaved_rope": True},
    },
    "mistral_swa_tiny": {
        "window one too wide (p - W <= j)": {"sliding_window": 9},
        "window one too narrow (p - W + 1 < j)": {"sliding_window": 7},
        "no sliding window (plain causal)": {"sliding_window": 0},
    },
}


def make_weights(spec):
    """Float64 weights (before storage rounding), in file order."""
    c = spec["config"]
    rng = np.random.default_rng(spec["seed"])
    H, F, V = c["hidden_size"], c["intermediate_size"], c["vocab_size"]
    nh, nkv, hd = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]

    def linear(out_f, in_f, gain=1.0):
        # N(0, (gain/sqrt(in))^2): a unit-RMS input gives an output of RMS ~ gain.
        return rng.standard_normal((out_f, in_f)) * (gain / np.sqrt(in_f))

    def norm(n):
        return 1.0 + 0.1 * rng.standard_normal(n)

    tensors = [("model.embed_tokens.weight", 0.5 * rng.standard_normal((V, H)))]
    for l in range(c["num_hidden_layers"]):
        p = f"model.layers.{l}."
        tensors.append((p + "input_layernorm.weight", norm(H)))
        tensors.append((p + "self_attn.q_proj.weight", linear(nh * hd, H, 1.5)))
        tensors.append((p + "self_attn.k_proj.weight", linear(nkv * hd, H, 1.5)))
        tensors.append((p + "self_attn.v_proj.weight", linear(nkv * hd, H)))
        if c["model_type"] == "qwen3":
            tensors.append((p + "self_attn.q_norm.weight", 1.0 + 0.3 * rng.standard_normal(hd)))
            tensors.append((p + "self_attn.k_norm.weight", 1.0 + 0.3 * rng.standard_normal(hd)))
        tensors.append((p + "self_attn.o_proj.weight", linear(H, nh * hd, spec["residual_gain"])))
        tensors.append((p + "post_attention_layernorm.weight", norm(H)))
        tensors.append((p + "mlp.gate_proj.weight", linear(F, H)))
        tensors.append((p + "mlp.up_proj.weight", linear(F, H)))
        tensors.append((p + "mlp.down_proj.weight", linear(H, F, spec["residual_gain"])))
    tensors.append(("model.norm.weight", norm(H)))
    if not c["tie_word_embeddings"]:
        tensors.append(("lm_head.weight", linear(V, H, 3.0)))
    return tensors, rng


def round7(values):
    return [float(f"{v:.7g}") for v in np.asarray(values, dtype=np.float64).ravel()]


def dump_json(obj, indent=0):
    """JSON with lists of numbers kept on one line (the logits would otherwise be one per line)."""
    pad = " " * indent
    if isinstance(obj, dict):
        items = [f'{pad} {json.dumps(k)}: {dump_json(v, indent + 1).lstrip()}' for k, v in obj.items()]
        return pad + "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(obj, list) and obj and all(isinstance(v, dict) or isinstance(v, list) for v in obj):
        items = [dump_json(v, indent + 1) for v in obj]
        return pad + "[\n" + ",\n".join(items) + "\n" + pad + "]"
    return pad + json.dumps(obj, separators=(", ", ": "))


def choose_prompts(model, spec, rng):
    c = spec["config"]
    cases = []
    for T in spec["prompt_lengths"]:
        for attempt in range(200):
            ids = [int(t) for t in rng.integers(3, c["vocab_size"], size=T)]
            if spec["bos_first"]:
                ids[0] = c["bos_token_id"]
            gen, margins, _ = rf.greedy(model, ids, GREEDY_STEPS)
            if min(margins) >= MIN_MARGIN and len(set(gen)) >= MIN_DISTINCT:
                break
        else:
            raise RuntimeError(f"{spec['name']}: no acceptable prompt of length {T}")
        cases.append((ids, gen, margins, attempt))
    return cases


def build(spec, out_dir):
    name = spec["name"]
    d = os.path.join(out_dir, name)
    os.makedirs(d, exist_ok=True)
    config = dict(spec["config"])
    config["torch_dtype"] = spec["torch_dtype"]
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    tensors, rng = make_weights(spec)
    if spec["storage"] == "BF16":  # bf16 rounding starts from the float32 value, as torch does
        tensors = [(n, v.astype(np.float32)) for n, v in tensors]
    rf.write_safetensors(os.path.join(d, "model.safetensors"),
                         [(n, spec["storage"], v) for n, v in tensors])

    model = rf.Model(d)  # read back: the goldens use the stored values
    cases = []
    f32_abs = f32_rel = 0.0
    f32_greedy_equal = True
    sens = {label: {"max_abs_logit_change": 0.0, "greedy_changes": False}
            for label in SENSITIVITY[name]}
    logit_stats = []
    for ids, gen, margins, attempt in choose_prompts(model, spec, rng):
        T = len(ids)
        full = rf.forward(model, ids)
        full32 = rf.forward(model, ids, np.float32).astype(np.float64)
        diff = np.abs(full32 - full)
        f32_abs = max(f32_abs, float(diff.max()))
        f32_rel = max(f32_rel, float((diff / np.maximum(1.0, np.abs(full))).max()))
        gen32, _, _ = rf.greedy(model, ids, GREEDY_STEPS, np.float32)
        f32_greedy_equal &= gen32 == gen
        for label, variant in SENSITIVITY[name].items():
            alt = rf.forward(model, ids, variant=variant)
            s = sens[label]
            s["max_abs_logit_change"] = max(s["max_abs_logit_change"], float(np.abs(alt - full).max()))
            alt_gen, _, _ = rf.greedy(model, ids, GREEDY_STEPS, variant=variant)
            s["greedy_changes"] |= alt_gen != gen
        logit_stats.append((float(full.std()), float(np.abs(full).max())))
        rows = spec["rows"](T)
        cases.append({
            "prompt_ids": ids,
            "logits_last": round7(full[T - 1]),
            "logits_rows": [{"position": p, "logits": round7(full[p])} for p in rows],
            "greedy_ids": gen,
            "greedy_top2_margins": [float(f"{m:.6g}") for m in margins],
            "min_top2_margin": float(f"{min(margins):.6g}"),
            "last_top2_margin": float(f"{rf.top2_margin(full[T - 1]):.6g}"),
        })
        print(f"{name}: prompt length {T} (attempt {attempt}), greedy {gen}, "
              f"min margin {min(margins):.4f}, logits std {full.std():.2f} max|l| {np.abs(full).max():.2f}")
    for s in sens.values():
        s["max_abs_logit_change"] = float(f"{s['max_abs_logit_change']:.4g}")
    print(f"{name}: float32 numpy vs float64: max |d| {f32_abs:.3e}, max |d|/max(1,|l|) {f32_rel:.3e}, "
          f"greedy equal {f32_greedy_equal}")
    for label, s in sens.items():
        print(f"{name}: {label}: max |d logit| {s['max_abs_logit_change']}, greedy changes {s['greedy_changes']}")
    entry = {
        "dir": name,
        "model_type": config["model_type"],
        "storage_dtype": spec["storage"],
        "seed": spec["seed"],
        "logits_std_range": [float(f"{min(s for s, _ in logit_stats):.3g}"),
                             float(f"{max(s for s, _ in logit_stats):.3g}")],
        "max_abs_logit": float(f"{max(m for _, m in logit_stats):.4g}"),
        "float32_numpy_vs_float64": {
            "max_abs": float(f"{f32_abs:.3g}"),
            "max_rel": float(f"{f32_rel:.3g}"),
            "over": "every position of every prompt, full vocab",
            "greedy_ids_equal": f32_greedy_equal,
        },
        "sensitivity": sens,
        "cases": cases,
    }
    return entry


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(here, "..", "tests", "data", "reference_models"))
    args = ap.parse_args()
    out = os.path.normpath(args.out)
    os.makedirs(out, exist_ok=True)
    goldens = {
        "what": "float64 reference logits for the tiny checkpoints in this directory "
                "(tools/reference_forward.py; see README.md)",
        "generated_by": "/usr/bin/python3 tools/make_reference_models.py",
        "conventions": {
            "positions": "prompt token k at position k (0-based); batch 1, no padding",
            "logits_last": "all vocab logits at position len(prompt_ids)-1, 7 significant digits",
            "logits_rows": "all vocab logits at the listed positions of the prompt",
            "greedy_ids": f"{GREEDY_STEPS} tokens, argmax each step, no stop token; step 0 uses logits_last",
            "greedy_top2_margins": "top1 - top2 logit gap at each greedy step",
            "suggested_tolerance": "|ours - golden| <= 2e-4 * max(1, |golden|) for a float32 engine",
        },
        "models": {},
    }
    for spec in SPECS:
        goldens["models"][spec["name"]] = build(spec, out)
    with open(os.path.join(out, "goldens.json"), "w") as f:
        f.write(dump_json(goldens))
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
