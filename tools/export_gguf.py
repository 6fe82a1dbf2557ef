#!/usr/bin/env python3
"""Write a Qwen3 HF checkpoint (what `contextcache-cli export` writes) as a GGUF file for llama.cpp.

    PYTHONPATH=<llama.cpp checkout>/gguf-py python3 tools/export_gguf.py HF_DIR OUT.gguf [--outtype bf16|f16|f32]

Used by bench/side_by_side.sh. llama.cpp's own convert_hf_to_gguf.py needs torch and
transformers (for the tokenizer); this converter needs only numpy and llama.cpp's gguf-py package,
used as a library (the writer, the key names, the tensor names). It reads:

  config.json            the hyper-parameters (Qwen3ForCausalLM only);
  tokenizer.json         the byte-level BPE vocabulary, merges and added tokens;
  tokenizer_config.json  eos / pad / bos tokens and add_bos_token;
  model.safetensors      the weights (one file, or model.safetensors.index.json shards).

Matrices keep the checkpoint's width (bf16 stays bf16) unless --outtype says otherwise; 1-D
tensors (the RMSNorm weights) are written as f32, as llama.cpp's converter does. The tokenizer is
written as llama.cpp's "gpt2" BPE model with the "qwen2" pre-tokenizer; ids the tokenizer does not
use up to vocab_size become [PADn] tokens of type UNUSED.
"""
from __future__ import annotations

import argparse
import json
import struct
import sys
from pathlib import Path

import numpy as np

try:
    import gguf
except ImportError:  # pragma: no cover - told to the user
    sys.exit("export_gguf.py: put llama.cpp's gguf-py on PYTHONPATH (PYTHONPATH=<llama.cpp>/gguf-py)")


# HF tensor name (inside model.layers.N.) -> GGUF tensor (llama.cpp's names for qwen3)
LAYER_TENSORS = {
    "input_layernorm.weight": gguf.MODEL_TENSOR.ATTN_NORM,
    "self_attn.q_proj.weight": gguf.MODEL_TENSOR.ATTN_Q,
    "self_attn.k_proj.weight": gguf.MODEL_TENSOR.ATTN_K,
    "self_attn.v_proj.weight": gguf.MODEL_TENSOR.ATTN_V,
    "self_attn.o_proj.weight": gguf.MODEL_TENSOR.ATTN_OUT,
    "self_attn.q_norm.weight": gguf.MODEL_TENSOR.ATTN_Q_NORM,
    "self_attn.k_norm.weight": gguf.MODEL_TENSOR.ATTN_K_NORM,
    "post_attention_layernorm.weight": gguf.MODEL_TENSOR.FFN_NORM,
    "mlp.gate_proj.weight": gguf.MODEL_TENSOR.FFN_GATE,
    "mlp.up_proj.weight": gguf.MODEL_TENSOR.FFN_UP,
    "mlp.down_proj.weight": gguf.MODEL_TENSOR.FFN_DOWN,
}
GLOBAL_TENSORS = {
    "model.embed_tokens.weight": gguf.MODEL_TENSOR.TOKEN_EMBD,
    "model.norm.weight": gguf.MODEL_TENSOR.OUTPUT_NORM,
    "lm_head.weight": gguf.MODEL_TENSOR.OUTPUT,
}

SAFETENSORS_DTYPES = {"BF16": np.uint16, "F16": np.float16, "F32": np.float32}


def gguf_name(hf_name: str) -> str:
    if hf_name in GLOBAL_TENSORS:
        return gguf.TENSOR_NAMES[GLOBAL_TENSORS[hf_name]] + ".weight"
    parts = hf_name.split(".")
    if len(parts) > 3 and parts[0] == "model" and parts[1] == "layers":
        rest = ".".join(parts[3:])
        if rest in LAYER_TENSORS:
            return gguf.TENSOR_NAMES[LAYER_TENSORS[rest]].format(bid=int(parts[2])) + ".weight"
    raise ValueError(f"export_gguf.py: no GGUF name for tensor {hf_name!r}")


def read_safetensors(path: Path) -> dict[str, tuple[str, np.ndarray]]:
    """name -> (safetensors dtype, array view over a read-only memory map)."""
    with path.open("rb") as f:
        (header_len,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(header_len))
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + header_len)
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = info["dtype"]
        if dtype not in SAFETENSORS_DTYPES:
            raise ValueError(f"export_gguf.py: tensor {name} has dtype {dtype}; BF16, F16 and F32 are read")
        begin, end = info["data_offsets"]
        arr = data[begin:end].view(SAFETENSORS_DTYPES[dtype]).reshape(info["shape"])
        out[name] = (dtype, arr)
    return out


def load_weights(model_dir: Path) -> dict[str, tuple[str, np.ndarray]]:
    single = model_dir / "model.safetensors"
    if single.exists():
        return read_safetensors(single)
    index = model_dir / "model.safetensors.index.json"
    if not index.exists():
        raise FileNotFoundError(f"export_gguf.py: no model.safetensors(.index.json) in {model_dir}")
    weights: dict[str, tuple[str, np.ndarray]] = {}
    for shard in sorted(set(json.loads(index.read_text())["weight_map"].values())):
        weights.update(read_safetensors(model_dir / shard))
    return weights


def bf16_to_f32(a: np.ndarray) -> np.ndarray:
    return (a.astype(np.uint32) << 16).view(np.float32)


def f32_to_bf16(a: np.ndarray) -> np.ndarray:
    """Round to nearest even, as torch does (NaN kept quiet)."""
    bits = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(a)
    if nan.any():
        rounded[nan] = ((bits[nan] >> 16) | 0x40).astype(np.uint16)
    return rounded


def convert_tensor(dtype: str, arr: np.ndarray, outtype: str):
    """-> (array to write, raw GGML type or None)."""
    if arr.ndim == 1 or outtype == "f32":
        f32 = bf16_to_f32(arr) if dtype == "BF16" else arr.astype(np.float32)
        return np.ascontiguousarray(f32), None
    if outtype == "bf16":
        if dtype == "BF16":
            return arr, gguf.GGMLQuantizationType.BF16  # the checkpoint's bytes, unchanged
        return f32_to_bf16(arr.astype(np.float32)), gguf.GGMLQuantizationType.BF16
    if outtype == "f16":
        f32 = bf16_to_f32(arr) if dtype == "BF16" else arr.astype(np.float32)
        return f32.astype(np.float16), None
    raise ValueError(outtype)


def token_type_of(added: dict) -> int:
    if added.get("special", False):
        return gguf.TokenType.CONTROL
    return gguf.TokenType.USER_DEFINED


def write_vocab(writer: gguf.GGUFWriter, model_dir: Path, vocab_size: int) -> None:
    tok = json.loads((model_dir / "tokenizer.json").read_text(encoding="utf-8"))
    model = tok["model"]
    if model.get("type") != "BPE":
        raise ValueError("export_gguf.py: tokenizer.json is not a BPE tokenizer")
    by_id: dict[int, tuple[str, int]] = {}
    for text, i in model["vocab"].items():
        by_id[i] = (text, gguf.TokenType.NORMAL)
    for added in tok.get("added_tokens", []):
        by_id[added["id"]] = (added["content"], token_type_of(added))
    if max(by_id) >= vocab_size:
        raise ValueError(f"export_gguf.py: token id {max(by_id)} >= vocab_size {vocab_size}")
    tokens, types = [], []
    for i in range(vocab_size):
        text, kind = by_id.get(i, (f"[PAD{i}]", gguf.TokenType.UNUSED))
        tokens.append(text)
        types.append(kind)
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]

    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("qwen2")  # Qwen2/Qwen3's split regex, see the pre_tokenizer in tokenizer.json
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)

    ids = {text: i for i, (text, _) in by_id.items()}
    cfg_path = model_dir / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text(encoding="utf-8")) if cfg_path.exists() else {}

    def token_id(value) -> int | None:
        if isinstance(value, dict):
            value = value.get("content")
        return ids.get(value) if isinstance(value, str) else None

    if (bos := token_id(cfg.get("bos_token"))) is not None:
        writer.add_bos_token_id(bos)
    if (eos := token_id(cfg.get("eos_token"))) is not None:
        writer.add_eos_token_id(eos)
    if (pad := token_id(cfg.get("pad_token"))) is not None:
        writer.add_pad_token_id(pad)
    writer.add_add_bos_token(bool(cfg.get("add_bos_token", False)))
    if isinstance(cfg.get("chat_template"), str):
        writer.add_chat_template(cfg["chat_template"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model_dir", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--outtype", choices=["bf16", "f16", "f32"], default="bf16")
    ap.add_argument("--name", default=None)
    args = ap.parse_args()

    config = json.loads((args.model_dir / "config.json").read_text())
    archs = config.get("architectures") or []
    if archs != ["Qwen3ForCausalLM"]:
        raise SystemExit(f"export_gguf.py: only Qwen3ForCausalLM is written, not {archs}")
    n_embd = config["hidden_size"]
    n_head = config["num_attention_heads"]
    head_dim = config.get("head_dim") or n_embd // n_head
    n_layer = config["num_hidden_layers"]

    arch = gguf.MODEL_ARCH_NAMES[gguf.MODEL_ARCH.QWEN3]
    writer = gguf.GGUFWriter(args.out, arch)
    writer.add_type(gguf.GGUFType.MODEL)
    writer.add_name(args.name or args.model_dir.name)
    writer.add_context_length(config["max_position_embeddings"])
    writer.add_embedding_length(n_embd)
    writer.add_block_count(n_layer)
    writer.add_feed_forward_length(config["intermediate_size"])
    writer.add_head_count(n_head)
    writer.add_head_count_kv(config.get("num_key_value_heads", n_head))
    writer.add_key_length(head_dim)
    writer.add_value_length(head_dim)
    writer.add_rope_freq_base(float(config.get("rope_theta", 10000.0)))
    writer.add_layer_norm_rms_eps(float(config["rms_norm_eps"]))
    if config.get("rope_scaling"):
        raise SystemExit("export_gguf.py: rope_scaling is not written by this converter")
    ftype = {"bf16": gguf.LlamaFileType.MOSTLY_BF16, "f16": gguf.LlamaFileType.MOSTLY_F16,
             "f32": gguf.LlamaFileType.ALL_F32}[args.outtype]
    writer.add_file_type(ftype)
    write_vocab(writer, args.model_dir, config["vocab_size"])

    weights = load_weights(args.model_dir)
    tied = config.get("tie_word_embeddings", False)
    seen = set()
    for hf_name in sorted(weights, key=lambda n: (n.count("layers"), n)):
        if tied and hf_name == "lm_head.weight":
            continue  # llama.cpp uses token_embd for the output when there is no output tensor
        name = gguf_name(hf_name)
        dtype, arr = weights[hf_name]
        data, raw = convert_tensor(dtype, arr, args.outtype)
        writer.add_tensor(name, data, raw_dtype=raw)
        seen.add(name)
    expected = {gguf.TENSOR_NAMES[gguf.MODEL_TENSOR.TOKEN_EMBD] + ".weight",
                gguf.TENSOR_NAMES[gguf.MODEL_TENSOR.OUTPUT_NORM] + ".weight"}
    for bid in range(n_layer):
        expected |= {gguf.TENSOR_NAMES[t].format(bid=bid) + ".weight" for t in LAYER_TENSORS.values()}
    if not tied:
        expected.add(gguf.TENSOR_NAMES[gguf.MODEL_TENSOR.OUTPUT] + ".weight")
    if missing := sorted(expected - seen):
        raise SystemExit(f"export_gguf.py: checkpoint lacks {missing[:5]}")

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    print(f"wrote {args.out} ({args.outtype}, {len(seen)} tensors, {args.out.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
