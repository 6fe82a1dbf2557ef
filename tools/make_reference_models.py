#!/usr/bin/python3
"""Creates the tiny reference checkpoints and their float64 goldens.

    /usr/bin/python3 tools/make_reference_models.py [--out tests/data/reference_models]

Writes <out>/<name>/{config.json,model.safetensors} for qwen3_tiny, llama3_scaled_tiny and
mistral_swa_tiny, and <out>/goldens.json. Two more are saved the way other tools write real
checkpoints: qwen2_tiny (Qwen2.5-style: q/k/v biases, tied embeddings stored as lm_head.weight
only, "dtype" instead of "torch_dtype", a generation_config.json with a list of eos ids, and
files a loader must ignore) and llama_bias_sharded_tiny (Llama with attention_bias: q/k/v/o
biases; F16 in two shards with model.safetensors.index.json; a SentencePiece-style tokenizer.json
whose byte_fallback vocab lacks most <0xNN> tokens). Weights come from a seeded numpy Generator
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

SPECS += [
    {
        "name": "qwen2_tiny",
        "seed": 4003,
        "storage": "BF16",
        "dtype_key": "dtype",          # the newer name of torch_dtype
        "torch_dtype": "bfloat16",
        "residual_gain": 3.0,
        "bias_gain": 0.5,
        "save": "lm_head_only",        # tied, stored under lm_head.weight only
        "generation_config": {"bos_token_id": 1, "eos_token_id": [2, 5], "do_sample": True,
                              "temperature": 0.7, "top_p": 0.8, "top_k": 20, "repetition_penalty": 1.05,
                              "transformers_version": "4.37.0"},
        "extra_files": {"README.md": "A tiny test checkpoint.\n", "LICENSE": "none\n",
                        "merges.txt": "#version: 0.2\n", "vocab.json": "{}\n"},
        "config": {
            "architectures": ["Qwen2ForCausalLM"],
            "model_type": "qwen2",
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "vocab_size": 160,
            "max_position_embeddings": 256,
            "rms_norm_eps": 1e-6,
            "rope_theta": 1000000.0,
            "rope_scaling": None,
            "hidden_act": "silu",
            "tie_word_embeddings": True,
            "use_sliding_window": False,
            "sliding_window": 32,
            "max_window_layers": 2,
            "attention_dropout": 0.0,
            "initializer_range": 0.02,
            "use_cache": True,
            "bos_token_id": 1,
            "eos_token_id": 2,
            "transformers_version": "4.43.1",
        },
        "prompt_lengths": [16, 40],
        "bos_first": False,
        "rows": lambda T: [0, 9, T - 2],
    },
    {
        "name": "llama_bias_sharded_tiny",
        "seed": 5003,
        "storage": "F16",
        "torch_dtype": "float16",
        "residual_gain": 2.0,
        "bias_gain": 0.5,
        "save": "shards",
        "tokenizer": "byte_fallback_partial",
        "config": {
            "architectures": ["LlamaForCausalLM"],
            "model_type": "llama",
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "num_key_value_heads": 1,
            "head_dim": 8,
            "vocab_size": 160,
            "max_position_embeddings": 256,
            "rms_norm_eps": 1e-5,
            "rope_theta": 10000.0,
            "rope_scaling": None,
            "hidden_act": "silu",
            "tie_word_embeddings": False,
            "attention_bias": True,
            "mlp_bias": False,
            "pretraining_tp": 1,
            "bos_token_id": 1,
            "eos_token_id": 2,
        },
        "prompt_lengths": [16, 40],
        "bos_first": True,
        "rows": lambda T: [0, 9, T - 2],
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
    "qwen2_tiny": {
        "q/k/v biases skipped": {"no_bias": True},
    },
    "llama_bias_sharded_tiny": {
        "q/k/v/o biases skipped": {"no_bias": True},
    },
}


def make_weights(spec):
    """Float64 weights (before storage rounding), in file order."""
    c = spec["config"]
    rng = np.random.default_rng(spec["seed"])
    H, F, V = c["hidden_size"], c["intermediate_size"], c["vocab_size"]
    nh, nkv = c["num_attention_heads"], c["num_key_value_heads"]
    hd = c.get("head_dim") or H // nh

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
        qkv_bias = c["model_type"] == "qwen2" or c.get("attention_bias", False)
        assert not (c["model_type"] == "qwen2" and c.get("attention_bias", False))
        if qkv_bias:  # HF order in a state dict: a Linear's weight, then its bias
            bg = spec["bias_gain"]
            tensors.insert(len(tensors) - 2, (p + "self_attn.q_proj.bias", bg * rng.standard_normal(nh * hd)))
            tensors.insert(len(tensors) - 1, (p + "self_attn.k_proj.bias", bg * rng.standard_normal(nkv * hd)))
            tensors.append((p + "self_attn.v_proj.bias", bg * rng.standard_normal(nkv * hd)))
        if c["model_type"] == "qwen3":
            tensors.append((p + "self_attn.q_norm.weight", 1.0 + 0.3 * rng.standard_normal(hd)))
            tensors.append((p + "self_attn.k_norm.weight", 1.0 + 0.3 * rng.standard_normal(hd)))
        tensors.append((p + "self_attn.o_proj.weight", linear(H, nh * hd, spec["residual_gain"])))
        if c.get("attention_bias", False):
            tensors.append((p + "self_attn.o_proj.bias", spec["bias_gain"] * rng.standard_normal(H)))
        tensors.append((p + "post_attention_layernorm.weight", norm(H)))
        tensors.append((p + "mlp.gate_proj.weight", linear(F, H)))
        tensors.append((p + "mlp.up_proj.weight", linear(F, H)))
        tensors.append((p + "mlp.down_proj.weight", linear(H, F, spec["residual_gain"])))
    tensors.append(("model.norm.weight", norm(H)))
    if not c["tie_word_embeddings"]:
        tensors.append(("lm_head.weight", linear(V, H, 3.0)))
    head_dim = c.get("head_dim") or H // nh
    assert head_dim == hd
    return tensors, rng


def byte_fallback_partial_tokenizer(vocab_size):
    """A Llama-2-style (SentencePiece BPE) tokenizer.json whose byte_fallback vocab holds only
    three of the 256 <0xNN> tokens, as some real checkpoints ship: the tokenizers library loads
    it, and a character whose bytes are not all there becomes <unk>."""
    special = ["<unk>", "<s>", "</s>"]
    pieces = special + ["<0x0A>", "<0xC3>", "<0xA9>", "\u2581"]
    pieces += [chr(c) for c in range(ord("a"), ord("z") + 1)] + [".", ",", "!", "?"]
    merges = [("\u2581", "t"), ("h", "e"), ("\u2581t", "he"), ("\u2581", "c"), ("e", "r"), ("\u2581", "a"),
              ("i", "n"), ("o", "n"), ("\u2581", "s")]
    pieces += [a + b for a, b in merges]
    assert len(pieces) == len(set(pieces)) and len(pieces) <= vocab_size
    vocab = {p: i for i, p in enumerate(pieces)}
    added = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for i, t in enumerate(special)]
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": "\u2581"},
            {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
        "pre_tokenizer": None,
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                      {"Sequence": {"id": "A", "type_id": 0}}],
                           "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                    {"Sequence": {"id": "A", "type_id": 0}},
                                    {"SpecialToken": {"id": "<s>", "type_id": 1}},
                                    {"Sequence": {"id": "B", "type_id": 1}}],
                           "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True,
                  "vocab": vocab, "merges": [a + " " + b for a, b in merges]},
    }


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
    config[spec.get("dtype_key", "torch_dtype")] = spec["torch_dtype"]
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    tensors, rng = make_weights(spec)
    if spec["storage"] == "BF16":  # bf16 rounding starts from the float32 value, as torch does
        tensors = [(n, v.astype(np.float32)) for n, v in tensors]
    stored = [(n, spec["storage"], v) for n, v in tensors]
    save = spec.get("save")
    if save == "lm_head_only":
        # What some exporters write for a tied model: the shared matrix under lm_head.weight only.
        stored = [("lm_head.weight" if n == "model.embed_tokens.weight" else n, dt, v) for n, dt, v in stored]
        stored = stored[1:] + stored[:1]
    if save == "shards":
        # transformers' save_pretrained(max_shard_size=...): model-0000k-of-0000n.safetensors plus
        # model.safetensors.index.json {"metadata": {"total_size"}, "weight_map": {tensor: shard}}.
        half = len(stored) // 2
        parts = [stored[:half], stored[half:]]
        weight_map, total = {}, 0
        for k, part in enumerate(parts):
            shard = f"model-{k + 1:05d}-of-{len(parts):05d}.safetensors"
            rf.write_safetensors(os.path.join(d, shard), part)
            for n, dt, v in part:
                weight_map[n] = shard
                total += len(rf.encode_tensor(v, dt))
        with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}, f, indent=2)
            f.write("\n")
    else:
        rf.write_safetensors(os.path.join(d, "model.safetensors"), stored)
    if "generation_config" in spec:
        with open(os.path.join(d, "generation_config.json"), "w") as f:
            json.dump(spec["generation_config"], f, indent=2)
            f.write("\n")
    for fname, text in spec.get("extra_files", {}).items():
        with open(os.path.join(d, fname), "w") as f:
            f.write(text)
    if spec.get("tokenizer") == "byte_fallback_partial":
        with open(os.path.join(d, "tokenizer.json"), "w", encoding="utf-8") as f:
            json.dump(byte_fallback_partial_tokenizer(config["vocab_size"]), f, ensure_ascii=False, indent=1)
            f.write("\n")

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
    ap.add_argument("--only", action="append", metavar="NAME",
                    help="build only these models and merge them into the existing goldens.json "
                         "(the float32-vs-float64 statistics depend on the BLAS, so rebuilding all "
                         "would rewrite the other models' statistics)")
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
    if args.only:
        with open(os.path.join(out, "goldens.json")) as f:
            goldens["models"] = json.load(f)["models"]
    for spec in SPECS:
        if not args.only or spec["name"] in args.only:
            goldens["models"][spec["name"]] = build(spec, out)
    with open(os.path.join(out, "goldens.json"), "w") as f:
        f.write(dump_json(goldens))
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
