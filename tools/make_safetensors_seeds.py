#!/usr/bin/env python3
"""Writes the seed corpus of fuzz/fuzz_safetensors_header.cpp: small safetensors files made here
with the standard library (not copies of any checkpoint), deterministic, so the files can be
regenerated and reviewed.

    python3 tools/make_safetensors_seeds.py [OUT_DIR]   (default fuzz/corpus/safetensors_header)
"""
import json
import pathlib
import struct
import sys

DTYPE_BYTES = {"F32": 4, "F16": 2, "BF16": 2}


def safetensors(tensors, metadata=None, pad=True):
    """tensors: list of (name, dtype, shape); data bytes are a deterministic ramp."""
    header, blobs, offset = {}, [], 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape in tensors:
        n = DTYPE_BYTES[dtype]
        for d in shape:
            n *= d
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + n]}
        blobs.append(bytes((offset + i) % 251 for i in range(n)))
        offset += n
    text = json.dumps(header, separators=(",", ":")).encode()
    if pad:  # the reference writer pads the header with spaces to a multiple of 8
        text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(blobs)


def main():
    out = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "fuzz/corpus/safetensors_header")
    out.mkdir(parents=True, exist_ok=True)
    seeds = {
        "empty_header.safetensors": safetensors([]),
        "one_f32.safetensors": safetensors([("w", "F32", [2, 3])], {"format": "pt"}),
        "mixed_dtypes.safetensors": safetensors(
            [("a.weight", "BF16", [4, 2]), ("b.weight", "F16", [3]), ("c", "F32", []), ("z", "F32", [0, 5])]),
        "tiny_llama_layer.safetensors": safetensors(
            [("model.embed_tokens.weight", "F32", [8, 4]),
             ("model.layers.0.input_layernorm.weight", "F32", [4]),
             ("model.layers.0.self_attn.q_proj.weight", "BF16", [4, 4]),
             ("model.layers.0.self_attn.k_proj.weight", "BF16", [2, 4]),
             ("model.norm.weight", "F32", [4])], {"format": "pt", "note": "seed"}),
        "unpadded.safetensors": safetensors([("x", "F16", [3, 1])], pad=False),
    }
    for name, data in seeds.items():
        (out / name).write_bytes(data)


if __name__ == "__main__":
    main()
