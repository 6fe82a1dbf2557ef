#!/usr/bin/python3
"""Derive the toolcaller's tokenizer from the Qwen3 tokenizer: the same byte-level BPE restricted
to the tokens that matter, so that the demo model's embedding needs ~24k rows instead of 151,936.

What is kept (as Qwen3 token strings; their ids are renumbered densely, in Qwen3's order):
  * all 256 byte-level tokens (ids 0-255 in both), so any text still tokenizes;
  * every added (special) token, after the regular ones, in Qwen3's order;
  * --keep-model DIR: every id whose embedding row in that checkpoint was trained (differs from
    the row that all never-seen ids share), so that the shipped model moves onto the new
    tokenizer without losing a row it learned;
  * the ids of the corpus (--corpus files; by default the bundled tool sets, the evaluation sets
    with their tool files, BFCL v4 and the system prompt) that occur at least --min-count times (default 1) under the
    Qwen3 tokenizer. The evaluation set's words are kept on purpose: the shipped model's rows for
    ids it never trained are all one shared row, so keeping them leaves its input on those texts
    exactly what it was (its answers are the same, checked), and a model trained later learns
    nothing from a row that no training example uses;
  * then Qwen3's regular tokens in merge order (its earliest merges are its most frequent
    pieces) whose bytes are printable ASCII, until the vocabulary holds --size rows;
  * every token's merge parts, recursively (the closure), so the merges stay consistent.

Merges are the Qwen3 merges whose result is kept, in their order. Qwen3 has exactly one merge per
non-byte token and a merge's parts always precede it, so for any text whose Qwen3 tokens are all
kept, BPE applies the same merges in the same order: the tokenization is Qwen3's, id for id after
the renumbering (check_tokenizer.py verifies it with the Hugging Face `tokenizers` library and
with the engine). Text with other tokens falls back to shorter kept pieces, down to bytes.

Usage: derive_tokenizer.py --out DIR [--size 24576] [--keep-model resources/models/toolcaller]
       [--corpus FILE ...] [--min-count 1]
Writes DIR/tokenizer.json and DIR/tokenizer_config.json (added_tokens_decoder renumbered).
"""
import argparse
import glob
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tools"))
from qwen3_tokenizer import Qwen3Tokenizer, qwen3_json  # noqa: E402

QWEN3 = os.path.join(ROOT, "resources/tokenizers/qwen3")


def trained_ids(model_dir):
    """Ids whose embedding row differs from the row shared by the ids that never occurred."""
    import numpy as np
    from reference_forward import read_safetensors
    w, _, _ = read_safetensors(os.path.join(model_dir, "model.safetensors"))
    e = np.ascontiguousarray(np.asarray(w["model.embed_tokens.weight"], dtype=np.float32))
    rows = e.view(np.uint32)
    _, first, counts = np.unique(rows, axis=0, return_index=True, return_counts=True)
    shared = rows[first[counts.argmax()]]
    return {int(i) for i in np.nonzero((rows != shared).any(axis=1))[0]}


def corpus_texts(paths):
    """Every string in the JSON / JSON-lines files (keys and values), and text files as they are."""
    def strings(v):
        if isinstance(v, str):
            yield v
        elif isinstance(v, dict):
            for k, x in v.items():
                yield k
                yield from strings(x)
        elif isinstance(v, list):
            for x in v:
                yield from strings(x)
    for p in paths:
        with open(p, encoding="utf-8") as f:
            text = f.read()
        if p.endswith((".json", ".jsonl")):
            try:
                docs = [json.loads(text)]
            except json.JSONDecodeError:
                docs = [json.loads(line) for line in text.splitlines() if line.strip()]
            for d in docs:
                # the tool JSON as it appears in a prompt, and its strings on their own
                yield json.dumps(d, ensure_ascii=False, separators=(", ", ": "))
                yield from strings(d)
        else:
            yield text


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--size", type=int, default=24576, help="rows of the vocabulary, special tokens included")
    ap.add_argument("--keep-model", default="", help="keep every id this checkpoint trained")
    ap.add_argument("--corpus", nargs="*", default=None,
                    help="files whose tokens are kept (default: the bundled tool sets, the evaluation sets, BFCL v4, the system prompt)")
    ap.add_argument("--min-count", type=int, default=1)
    args = ap.parse_args()

    with open(qwen3_json(), encoding="utf-8") as f:
        tj = json.load(f)
    vocab = tj["model"]["vocab"]                      # token -> Qwen3 id
    token_of = {i: t for t, i in vocab.items()}
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in tj["model"]["merges"]]
    parts = {}
    for a, b in merges:
        if a + b in parts:
            sys.exit("derive_tokenizer.py: a Qwen3 token has two merges; the restriction would not be exact")
        parts[a + b] = (a, b)
        if not vocab[a] < vocab[a + b] > vocab[b]:
            sys.exit(f"derive_tokenizer.py: merge {a!r} {b!r} does not follow its parts")
    n_regular = len(vocab)
    special = sorted(tj["added_tokens"], key=lambda t: t["id"])
    if any(t["id"] < n_regular for t in special) or len(token_of) != n_regular or any(
            len(token_of[i]) != 1 for i in range(256)):
        sys.exit("derive_tokenizer.py: not the Qwen3 layout (256 byte tokens, then merges, then added tokens)")
    budget = args.size - len(special)

    keep = set(range(256))
    reasons = {"bytes": 256}
    if args.keep_model:
        ids = {i for i in trained_ids(args.keep_model) if i < n_regular}
        reasons["trained_by_model"] = len(ids - keep)
        keep |= ids
    tok = Qwen3Tokenizer(qwen3_json())
    corpus = args.corpus
    if corpus is None:
        corpus = (sorted(glob.glob(os.path.join(ROOT, "resources/toolsets/tools_*.json")))
                  + sorted(glob.glob(os.path.join(ROOT, "resources/eval/*.jsonl")))
                  + sorted(glob.glob(os.path.join(ROOT, "resources/eval/tool_families/*.json")))
                  + sorted(glob.glob(os.path.join(os.environ.get("BFCL_DIR", "/work/shared/data/bfcl"), "BFCL_v4_*.json")))
                  + [os.path.join(ROOT, "resources/system_prompt.txt")])
        corpus = [p for p in corpus if os.path.exists(p)]
    counts = {}
    for text in corpus_texts(corpus):
        for i in tok.encode(text):
            counts[i] = counts.get(i, 0) + 1
    ids = {i for i, n in counts.items() if n >= args.min_count and i < n_regular}
    reasons["corpus"] = len(ids - keep)
    keep |= ids

    def close(ids):
        out, stack = set(ids), list(ids)
        while stack:
            t = token_of[stack.pop()]
            for p in parts.get(t, ()):
                if vocab[p] not in out:
                    out.add(vocab[p])
                    stack.append(vocab[p])
        return out
    closed = close(keep)
    reasons["merge_parts"] = len(closed - keep)
    keep = closed
    if len(keep) > budget:
        sys.exit(f"derive_tokenizer.py: {len(keep)} tokens are needed before any fill, more than --size allows")

    # fill with printable-ASCII tokens in merge order (their parts come earlier, so the set stays closed)
    byte_decoder = tok.byte_decoder
    filled = 0
    for i in range(256, n_regular):
        if len(keep) >= budget:
            break
        if i in keep:
            continue
        raw = bytes(byte_decoder[c] for c in token_of[i])
        if all(0x20 <= b < 0x7F or b in (0x09, 0x0A) for b in raw):
            keep.add(i)
            filled += 1
    reasons["ascii_fill"] = filled
    assert close(keep) == keep

    kept = sorted(keep)
    new_id = {q: n for n, q in enumerate(kept)}
    kept_tokens = {token_of[q] for q in kept}
    out = json.loads(json.dumps(tj))
    out["model"]["vocab"] = {token_of[q]: new_id[q] for q in kept}
    out["model"]["merges"] = [[a, b] if not isinstance(tj["model"]["merges"][0], str) else f"{a} {b}"
                              for a, b in merges if a + b in kept_tokens]
    special_id = {}
    for k, t in enumerate(special):
        special_id[t["id"]] = len(kept) + k
    for t in out["added_tokens"]:
        t["id"] = special_id[t["id"]]
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False)
        f.write("\n")
    with open(os.path.join(QWEN3, "tokenizer_config.json"), encoding="utf-8") as f:
        cfg = json.load(f)
    cfg["added_tokens_decoder"] = {str(special_id[int(k)]): v for k, v in cfg["added_tokens_decoder"].items()}
    with open(os.path.join(args.out, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(cfg, f, ensure_ascii=False, indent=2)
        f.write("\n")
    summary = {"rows": len(kept) + len(special), "regular": len(kept), "special": len(special),
               "merges": len(out["model"]["merges"]), "kept_because": reasons,
               "corpus_files": [os.path.relpath(p, ROOT) if p.startswith(ROOT) else os.path.basename(p) for p in corpus],
               "min_count": args.min_count,
               "special_ids": {t["content"]: t["id"] for t in out["added_tokens"]}}
    print(json.dumps(summary, indent=1))
    with open(os.path.join(args.out, "derivation.json"), "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
