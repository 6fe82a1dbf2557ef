#!/usr/bin/python3
"""Independent reference forward pass (numpy, float64) for HF-format decoder checkpoints.

Written from the semantics of Hugging Face transformers' LlamaForCausalLM,
MistralForCausalLM, Qwen2ForCausalLM and Qwen3ForCausalLM (eager attention, no padding,
batch 1, positions 0..T-1). It shares no code with the C++ engine. It reads a directory
with config.json + model.safetensors, or model.safetensors.index.json and its shards
(F32, F16 or BF16 tensors; every value is converted exactly to float64), recomputes the
whole sequence at every step (no KV cache), and is meant to be read, not to be fast.
With tie_word_embeddings the shared matrix may be stored as model.embed_tokens.weight,
as lm_head.weight, or as both (then equal).

Semantics, per decoder layer (x is the residual stream, one row per token):

    h = rms_norm(x, input_layernorm)            # x / sqrt(mean(x^2) + eps) * w
    q = h @ Wq.T + bq, k = h @ Wk.T + bk, v = h @ Wv.T + bv
                                                # Linear weights are [out, in]; biases: qwen2
                                                # always, llama with attention_bias (also bo)
    split into heads of head_dim (head_dim comes from config, not hidden/heads)
    qwen3 only: q = rms_norm(q, q_norm), k = rms_norm(k, k_norm) per head, BEFORE RoPE
    RoPE, rotate_half style: q*cos + rotate_half(q)*sin, rotate_half(x) = [-x2, x1]
    GQA: query head h reads kv head h // (n_heads / n_kv_heads)
    scores = q.k / sqrt(head_dim); mask; softmax; weighted sum of v
      causal:          key j visible from query p  iff  j <= p
      sliding window:  also p - window < j         (transformers masking_utils)
    x = x + o_proj(attn)
    x = x + down(silu(gate(h2)) * up(h2)),  h2 = rms_norm(x, post_attention_layernorm)
then final norm and lm_head (model.embed_tokens.weight when tie_word_embeddings).

RoPE inverse frequencies: inv_freq[i] = theta^(-2i/head_dim), i < head_dim/2, and
for rope_scaling.rope_type == "llama3" the llama3 rescaling (see llama3_inv_freq).

Usage:
    reference_forward.py --check-stories DIR         # stories260k fixture vs reference.json
    reference_forward.py --model DIR --ids 1,2,3 [--generate N] [--float32]
    reference_forward.py --check-goldens DIR         # tests/data/reference_models
"""

import argparse
import json
import math
import os
import struct
import sys

import numpy as np

# ---------------------------------------------------------------------------
# safetensors: 8-byte little-endian header length N, N bytes of JSON header
# {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {...}},
# then raw little-endian row-major data; offsets are relative to the data start.
# ---------------------------------------------------------------------------

_ST_DTYPES = {"F32": ("<f4", 4), "F16": ("<f2", 2), "BF16": ("<u2", 2)}


def read_safetensors(path):
    """Returns ({name: float64 ndarray}, {name: dtype string}, metadata)."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise ValueError(f"{path}: too short")
    (n,) = struct.unpack("<Q", data[:8])
    if 8 + n > len(data):
        raise ValueError(f"{path}: header length {n} past end of file")
    header = json.loads(data[8:8 + n].decode("utf-8"))
    base = 8 + n
    tensors, dtypes = {}, {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dt = info["dtype"]
        if dt not in _ST_DTYPES:
            raise ValueError(f"{name}: unsupported dtype {dt}")
        np_dt, size = _ST_DTYPES[dt]
        shape = [int(s) for s in info["shape"]]
        begin, end = info["data_offsets"]
        count = int(np.prod(shape)) if shape else 1
        if end - begin != count * size or base + end > len(data):
            raise ValueError(f"{name}: bad data_offsets {begin},{end} for {dt}{shape}")
        raw = np.frombuffer(data, dtype=np_dt, count=count, offset=base + begin)
        if dt == "BF16":
            # bf16 is the top half of a float32: shift into place, reinterpret.
            values = (raw.astype(np.uint32) << 16).view(np.float32)
        else:
            values = raw
        tensors[name] = values.astype(np.float64).reshape(shape)  # exact widening
        dtypes[name] = dt
    return tensors, dtypes, header.get("__metadata__")


def float_to_bf16_bits(x):
    """float32 values -> bf16 bit patterns (uint16), round to nearest even."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    if not np.all(np.isfinite(np.asarray(x, dtype=np.float32))):
        raise ValueError("non-finite value")
    rounded = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return rounded.astype(np.uint16)


def encode_tensor(values, dtype):
    """values: float ndarray. Returns little-endian bytes in the storage dtype."""
    if dtype == "F32":
        return np.ascontiguousarray(values, dtype="<f4").tobytes()
    if dtype == "F16":
        v = np.ascontiguousarray(values, dtype="<f2")
        if not np.all(np.isfinite(v)):
            raise ValueError("F16 overflow")
        return v.tobytes()
    if dtype == "BF16":
        return float_to_bf16_bits(values).astype("<u2").tobytes()
    raise ValueError(dtype)


def write_safetensors(path, tensors):
    """tensors: list of (name, dtype string, float ndarray), written in that order."""
    header = {"__metadata__": {"format": "pt"}}
    blobs, offset = [], 0
    for name, dtype, values in tensors:
        raw = encode_tensor(values, dtype)
        header[name] = {"dtype": dtype, "shape": list(values.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    hjson = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hjson += b" " * ((-len(hjson)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hjson)))
        f.write(hjson)
        for raw in blobs:
            f.write(raw)


def read_checkpoint(directory):
    """transformers' order: model.safetensors, else model.safetensors.index.json (weight_map:
    tensor -> shard file). Returns ({name: float64 ndarray}, {name: dtype})."""
    single = os.path.join(directory, "model.safetensors")
    if os.path.exists(single):
        tensors, dtypes, _ = read_safetensors(single)
        return tensors, dtypes
    with open(os.path.join(directory, "model.safetensors.index.json")) as f:
        weight_map = json.load(f)["weight_map"]
    tensors, dtypes = {}, {}
    for shard in sorted(set(weight_map.values())):
        t, d, _ = read_safetensors(os.path.join(directory, shard))
        for name in t:
            if weight_map.get(name) != shard:
                raise ValueError(f"{shard}: {name} is not mapped to this shard")
        tensors.update(t)
        dtypes.update(d)
    if set(tensors) != set(weight_map):
        raise ValueError("index weight_map and shards disagree")
    return tensors, dtypes


# ---------------------------------------------------------------------------
# Config
# ---------------------------------------------------------------------------

class Config:
    def __init__(self, d):
        self.raw = d
        self.model_type = d["model_type"]
        if self.model_type not in ("llama", "mistral", "qwen2", "qwen3"):
            raise NotImplementedError(f"model_type {self.model_type}")
        self.hidden = d["hidden_size"]
        self.ffn = d["intermediate_size"]
        self.layers = d["num_hidden_layers"]
        self.heads = d["num_attention_heads"]
        self.kv_heads = d.get("num_key_value_heads") or self.heads
        self.head_dim = d.get("head_dim") or self.hidden // self.heads
        self.vocab = d["vocab_size"]
        self.eps = float(d["rms_norm_eps"])
        # transformers >= 5 folds rope_theta / rope_scaling into rope_parameters.
        rope = d.get("rope_parameters") or {}
        self.rope_theta = float(d.get("rope_theta", rope.get("rope_theta", 10000.0)))
        scaling = d.get("rope_scaling")
        if scaling is None and rope.get("rope_type", "default") != "default":
            scaling = rope
        self.rope_scaling = scaling
        self.tie = bool(d.get("tie_word_embeddings", False))
        if d.get("hidden_act", "silu") != "silu":
            raise NotImplementedError("hidden_act " + str(d.get("hidden_act")))
        if d.get("mlp_bias", False):
            raise NotImplementedError("mlp_bias")
        # Qwen2Attention: q/k/v_proj with bias=True, o_proj without (no config field).
        # LlamaAttention, Qwen3Attention: bias=config.attention_bias on all four.
        # MistralAttention: no biases.
        attention_bias = bool(d.get("attention_bias", False)) and self.model_type != "qwen2"
        if attention_bias and self.model_type == "mistral":
            raise NotImplementedError("attention_bias for mistral")
        self.qkv_bias = self.model_type == "qwen2" or attention_bias
        self.o_bias = attention_bias
        if d.get("partial_rotary_factor", 1.0) != 1.0:
            raise NotImplementedError("partial_rotary_factor")
        self.qk_norm = self.model_type == "qwen3"
        self.sliding_window = None
        if self.model_type == "mistral":
            self.sliding_window = d.get("sliding_window")
        elif self.model_type in ("qwen2", "qwen3") and d.get("use_sliding_window", False):
            raise NotImplementedError(f"{self.model_type} use_sliding_window")
        if self.heads % self.kv_heads:
            raise ValueError("num_attention_heads not a multiple of num_key_value_heads")


class Model:
    def __init__(self, directory):
        with open(os.path.join(directory, "config.json")) as f:
            self.config = Config(json.load(f))
        self.weights, self.dtypes = read_checkpoint(directory)
        c = self.config
        if c.tie:
            emb, head = "model.embed_tokens.weight", "lm_head.weight"
            if emb not in self.weights and head in self.weights:
                self.weights[emb] = self.weights.pop(head)     # saved under lm_head only
            elif emb in self.weights and head in self.weights:
                if not np.array_equal(self.weights[emb], self.weights[head]):
                    raise ValueError("tied embed_tokens and lm_head differ")
                del self.weights[head]
        self._cast = {np.dtype(np.float64): self.weights}
        self._check_shapes()

    def _check_shapes(self):
        c, w = self.config, self.weights
        want = {"model.embed_tokens.weight": (c.vocab, c.hidden), "model.norm.weight": (c.hidden,)}
        if not c.tie:
            want["lm_head.weight"] = (c.vocab, c.hidden)
        for l in range(c.layers):
            p = f"model.layers.{l}."
            want[p + "input_layernorm.weight"] = (c.hidden,)
            want[p + "post_attention_layernorm.weight"] = (c.hidden,)
            want[p + "self_attn.q_proj.weight"] = (c.heads * c.head_dim, c.hidden)
            want[p + "self_attn.k_proj.weight"] = (c.kv_heads * c.head_dim, c.hidden)
            want[p + "self_attn.v_proj.weight"] = (c.kv_heads * c.head_dim, c.hidden)
            want[p + "self_attn.o_proj.weight"] = (c.hidden, c.heads * c.head_dim)
            want[p + "mlp.gate_proj.weight"] = (c.ffn, c.hidden)
            want[p + "mlp.up_proj.weight"] = (c.ffn, c.hidden)
            want[p + "mlp.down_proj.weight"] = (c.hidden, c.ffn)
            if c.qkv_bias:
                want[p + "self_attn.q_proj.bias"] = (c.heads * c.head_dim,)
                want[p + "self_attn.k_proj.bias"] = (c.kv_heads * c.head_dim,)
                want[p + "self_attn.v_proj.bias"] = (c.kv_heads * c.head_dim,)
            if c.o_bias:
                want[p + "self_attn.o_proj.bias"] = (c.hidden,)
            if c.qk_norm:
                want[p + "self_attn.q_norm.weight"] = (c.head_dim,)
                want[p + "self_attn.k_norm.weight"] = (c.head_dim,)
        for name, shape in want.items():
            if name not in w:
                raise ValueError(f"missing tensor {name}")
            if tuple(w[name].shape) != shape:
                raise ValueError(f"{name}: shape {w[name].shape}, expected {shape}")
        extra = set(w) - set(want)
        if extra:
            raise ValueError(f"unexpected tensors: {sorted(extra)[:5]}")

    def weights_as(self, dtype):
        dtype = np.dtype(dtype)
        if dtype not in self._cast:
            self._cast[dtype] = {k: v.astype(dtype) for k, v in self.weights.items()}
        return self._cast[dtype]


# ---------------------------------------------------------------------------
# Building blocks
# ---------------------------------------------------------------------------

def rms_norm(x, weight, eps):
    """Normalises over the last axis: x / sqrt(mean(x^2) + eps) * weight."""
    variance = np.mean(x * x, axis=-1, keepdims=True)
    return x / np.sqrt(variance + x.dtype.type(eps)) * weight


def silu(x):
    with np.errstate(over="ignore"):
        return x / (1 + np.exp(-x))


def default_inv_freq(theta, head_dim):
    exponents = np.arange(0, head_dim, 2, dtype=np.float64) / head_dim
    return 1.0 / (theta ** exponents)


def llama3_inv_freq(inv_freq, scaling, medium_unscaled=False):
    """transformers modeling_rope_utils._compute_llama3_parameters, element by element."""
    factor = float(scaling["factor"])
    low_ff = float(scaling["low_freq_factor"])
    high_ff = float(scaling["high_freq_factor"])
    orig = float(scaling["original_max_position_embeddings"])
    low_freq_wavelen = orig / low_ff
    high_freq_wavelen = orig / high_ff
    out = np.empty_like(inv_freq)
    for i, freq in enumerate(inv_freq):
        wavelen = 2 * math.pi / freq
        if wavelen > low_freq_wavelen:        # low frequency: interpolate fully
            out[i] = freq / factor
        elif wavelen < high_freq_wavelen:     # high frequency: unchanged
            out[i] = freq
        elif medium_unscaled:                 # deliberate mistake, for sensitivity only
            out[i] = freq
        else:                                 # in between: blend
            smooth = (orig / wavelen - low_ff) / (high_ff - low_ff)
            out[i] = (1 - smooth) * freq / factor + smooth * freq
    return out


def rope_inv_freq(c, variant):
    inv_freq = default_inv_freq(c.rope_theta, c.head_dim)
    s = c.rope_scaling
    if s is None or variant.get("no_rope_scaling"):
        return inv_freq
    rope_type = s.get("rope_type", s.get("type", "default"))
    if rope_type == "default":
        return inv_freq
    if rope_type == "llama3":
        return llama3_inv_freq(inv_freq, s, variant.get("llama3_medium_unscaled", False))
    raise NotImplementedError(f"rope_type {rope_type}")


def rotate_half(x):
    half = x.shape[-1] // 2
    return np.concatenate([-x[..., half:], x[..., :half]], axis=-1)


def apply_rope(x, cos, sin, interleaved=False):
    """x: [T, heads, head_dim]; cos/sin: [T, head_dim] (each frequency twice)."""
    if interleaved:  # NOT HF semantics; only used to measure how much a wrong RoPE shows
        out = np.empty_like(x)
        c, s = cos[:, None, 0::2], sin[:, None, 0::2]
        x0, x1 = x[..., 0::2], x[..., 1::2]
        out[..., 0::2] = x0 * c - x1 * s
        out[..., 1::2] = x1 * c + x0 * s
        return out
    return x * cos[:, None, :] + rotate_half(x) * sin[:, None, :]


def attention_allowed(T, window):
    """allowed[p, j]: may query position p attend to key position j?"""
    p = np.arange(T)[:, None]
    j = np.arange(T)[None, :]
    allowed = j <= p
    if window is not None:
        allowed &= j > p - window
    return allowed


# ---------------------------------------------------------------------------
# Forward pass
# ---------------------------------------------------------------------------

def forward(model, ids, dtype=np.float64, variant=None):
    """Logits [T, vocab] for token ids at positions 0..T-1.

    dtype: np.float64 (the reference) or np.float32 (to measure float32 rounding).
    variant: dict of deliberate deviations used only to measure sensitivity:
      no_rope_scaling, llama3_medium_unscaled, no_qk_norm, interleaved_rope,
      sliding_window (override; 0 = none), no_bias.
    """
    variant = variant or {}
    c = model.config
    W = model.weights_as(dtype)
    ids = np.asarray(ids, dtype=np.int64)
    T = len(ids)
    hd, nh, nkv = c.head_dim, c.heads, c.kv_heads
    group = nh // nkv

    # RoPE tables: angle[p, i] = p * inv_freq[i], duplicated to head_dim.
    # (In float32 mode the table is computed in float32 too, as transformers does.)
    inv_freq = rope_inv_freq(c, variant).astype(dtype)
    angles = np.arange(T, dtype=dtype)[:, None] * inv_freq[None, :]
    angles = np.concatenate([angles, angles], axis=-1)
    cos = np.cos(angles)
    sin = np.sin(angles)

    window = c.sliding_window
    if "sliding_window" in variant:
        window = variant["sliding_window"] or None
    allowed = attention_allowed(T, window)
    scale = dtype(1.0 / math.sqrt(hd))

    x = W["model.embed_tokens.weight"][ids]  # [T, hidden]
    for l in range(c.layers):
        p = f"model.layers.{l}."
        h = rms_norm(x, W[p + "input_layernorm.weight"], c.eps)
        q = h @ W[p + "self_attn.q_proj.weight"].T
        k = h @ W[p + "self_attn.k_proj.weight"].T
        v = h @ W[p + "self_attn.v_proj.weight"].T
        if c.qkv_bias and not variant.get("no_bias"):
            q = q + W[p + "self_attn.q_proj.bias"]
            k = k + W[p + "self_attn.k_proj.bias"]
            v = v + W[p + "self_attn.v_proj.bias"]
        q, k, v = q.reshape(T, nh, hd), k.reshape(T, nkv, hd), v.reshape(T, nkv, hd)
        if c.qk_norm and not variant.get("no_qk_norm"):
            q = rms_norm(q, W[p + "self_attn.q_norm.weight"], c.eps)
            k = rms_norm(k, W[p + "self_attn.k_norm.weight"], c.eps)
        q = apply_rope(q, cos, sin, variant.get("interleaved_rope", False))
        k = apply_rope(k, cos, sin, variant.get("interleaved_rope", False))

        attn = np.empty((T, nh, hd), dtype=dtype)
        for hq in range(nh):
            hk = hq // group
            scores = (q[:, hq, :] @ k[:, hk, :].T) * scale           # [T query, T key]
            scores = np.where(allowed, scores, dtype(-np.inf))
            scores = scores - scores.max(axis=1, keepdims=True)
            probs = np.exp(scores)
            probs = probs / probs.sum(axis=1, keepdims=True)
            attn[:, hq, :] = probs @ v[:, hk, :]
        o = attn.reshape(T, nh * hd) @ W[p + "self_attn.o_proj.weight"].T
        if c.o_bias and not variant.get("no_bias"):
            o = o + W[p + "self_attn.o_proj.bias"]
        x = x + o

        h = rms_norm(x, W[p + "post_attention_layernorm.weight"], c.eps)
        gate = h @ W[p + "mlp.gate_proj.weight"].T
        up = h @ W[p + "mlp.up_proj.weight"].T
        x = x + (silu(gate) * up) @ W[p + "mlp.down_proj.weight"].T

    x = rms_norm(x, W["model.norm.weight"], c.eps)
    lm_head = W["model.embed_tokens.weight"] if c.tie else W["lm_head.weight"]
    return x @ lm_head.T


def top2_margin(row):
    top = np.sort(row)[-2:]
    return float(top[1] - top[0])


def greedy(model, ids, n, dtype=np.float64, variant=None):
    """Greedy argmax decoding of n tokens, no stop token. Full recompute each step.
    Returns (generated ids, top1-top2 margins, logits of the first step)."""
    seq = list(ids)
    out, margins, first = [], [], None
    for _ in range(n):
        row = forward(model, seq, dtype, variant)[-1]
        if first is None:
            first = row
        nxt = int(np.argmax(row))
        margins.append(top2_margin(row))
        out.append(nxt)
        seq.append(nxt)
    return out, margins, first


# ---------------------------------------------------------------------------
# Checks
# ---------------------------------------------------------------------------

def check_stories(path):
    model = Model(path)
    with open(os.path.join(path, "reference.json")) as f:
        ref = json.load(f)
    ok = True
    for case in ref["cases"]:
        ids = case["input_ids"]
        want = case["generated_ids"]
        got, margins, first = greedy(model, ids, len(want))
        same = got == want
        ok &= same
        print(f"stories260k prompt {case.get('prompt')!r} input_ids={ids}")
        print(f"  greedy {len(want)} tokens: {'all equal' if same else 'MISMATCH'}"
              f" (min top1-top2 margin {min(margins):.6f})")
        if not same:
            k = next(i for i, (a, b) in enumerate(zip(got, want)) if a != b)
            print(f"  first difference at {k}: got {got[k]}, reference {want[k]}")
        worst = 0.0
        for t in case["top5_first_logits"]:
            d = abs(first[t["id"]] - t["logit"])
            worst = max(worst, d)
            print(f"  id {t['id']:4d} {t.get('token', ''):>8s} ours {first[t['id']]:.6f}"
                  f" ref {t['logit']:.6f} |d| {d:.2e}")
        top5 = [int(i) for i in np.argsort(-first)[:5]]
        same_top5 = top5 == [t["id"] for t in case["top5_first_logits"]]
        ok &= same_top5 and worst <= 1e-4
        print(f"  top-5 ids {'equal' if same_top5 else 'DIFFER'}; max |d| {worst:.2e} (limit 1e-4)")
    print("stories260k check:", "PASS" if ok else "FAIL")
    return ok


def check_goldens(directory):
    with open(os.path.join(directory, "goldens.json")) as f:
        goldens = json.load(f)
    ok = True
    for name, entry in goldens["models"].items():
        model = Model(os.path.join(directory, entry["dir"]))
        worst = 0.0
        for case in entry["cases"]:
            ids = case["prompt_ids"]
            logits = forward(model, ids)
            rows = [(len(ids) - 1, case["logits_last"])]
            rows += [(r["position"], r["logits"]) for r in case["logits_rows"]]
            for pos, want in rows:
                d = np.abs(logits[pos] - np.asarray(want))
                worst = max(worst, float(np.max(d / np.maximum(1.0, np.abs(want)))))
            got, _, _ = greedy(model, ids, len(case["greedy_ids"]))
            if got != case["greedy_ids"]:
                ok = False
                print(f"{name}: greedy ids differ for prompt of length {len(ids)}")
        good = worst <= 1e-6
        ok &= good
        print(f"{name}: max relative |d| vs goldens {worst:.2e} {'ok' if good else 'FAIL'}")
    print("goldens check:", "PASS" if ok else "FAIL")
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check-stories", metavar="DIR")
    ap.add_argument("--check-goldens", metavar="DIR")
    ap.add_argument("--model", metavar="DIR")
    ap.add_argument("--ids", help="comma-separated token ids")
    ap.add_argument("--generate", type=int, default=0)
    ap.add_argument("--float32", action="store_true", help="compute in float32 instead")
    args = ap.parse_args()
    ok = True
    if args.check_stories:
        ok &= check_stories(args.check_stories)
    if args.check_goldens:
        ok &= check_goldens(args.check_goldens)
    if args.model:
        model = Model(args.model)
        ids = [int(t) for t in args.ids.split(",")]
        dtype = np.float32 if args.float32 else np.float64
        last = forward(model, ids, dtype)[-1]
        top = np.argsort(-last)[:5]
        print("top-5 at last position:", ", ".join(f"{int(i)}:{last[i]:.6f}" for i in top))
        if args.generate:
            got, margins, _ = greedy(model, ids, args.generate, dtype)
            print("greedy:", got)
            print("min top1-top2 margin:", min(margins))
    if not (args.check_stories or args.check_goldens or args.model):
        ap.print_help()
        return 2
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
