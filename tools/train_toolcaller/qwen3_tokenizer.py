"""Encoder for the bundled Qwen3 tokenizer.json (byte-level BPE), no `tokenizers` package.

Only what training needs: plain text -> ids (NFC, the Split regex of the pre-tokenizer, byte-level
BPE) and special tokens by name. The project's C++ tokenizer is the reference; `check_against_cli`
in make_data.py compares both on every rendered tool set and a sample of prompts.
"""
import functools
import json
import os
import sys
import unicodedata

import regex

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from packed_files import unpacked  # noqa: E402,F401  (re-exported: the tools import it from here)

QWEN3_DIR = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "resources", "tokenizers", "qwen3"))


def qwen3_json():
    """The bundled Qwen3 tokenizer.json, unpacked if needed."""
    return unpacked(os.path.join(QWEN3_DIR, "tokenizer.json"))


def _bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, (chr(c) for c in cs)))


class Qwen3Tokenizer:
    def __init__(self, path):
        with open(unpacked(path), encoding="utf-8") as f:
            tj = json.load(f)
        if tj["model"]["type"] != "BPE" or tj["normalizer"]["type"] != "NFC":
            raise ValueError(f"{path}: not the Qwen3 byte-level BPE tokenizer")
        self.vocab = tj["model"]["vocab"]
        self.id_to_token = {i: t for t, i in self.vocab.items()}
        merges = tj["model"]["merges"]
        self.ranks = {}
        for r, m in enumerate(merges):
            a, b = m.split(" ") if isinstance(m, str) else m
            self.ranks[(a, b)] = r
        self.special = {t["content"]: t["id"] for t in tj["added_tokens"]}
        for t, i in self.special.items():
            self.id_to_token[i] = t
        split = tj["pre_tokenizer"]["pretokenizers"][0]
        self.pattern = regex.compile(split["pattern"]["Regex"])
        self.byte_encoder = _bytes_to_unicode()
        self.byte_decoder = {c: b for b, c in self.byte_encoder.items()}

    @functools.lru_cache(maxsize=1 << 20)
    def _bpe(self, word):
        parts = list(word)
        while len(parts) > 1:
            best, best_rank = None, None
            for i in range(len(parts) - 1):
                r = self.ranks.get((parts[i], parts[i + 1]))
                if r is not None and (best_rank is None or r < best_rank):
                    best, best_rank = i, r
            if best is None:
                break
            parts[best:best + 2] = [parts[best] + parts[best + 1]]
        return tuple(self.vocab[p] for p in parts)

    def encode(self, text):
        """Plain text (never parsed for special tokens) -> ids."""
        ids = []
        for piece in self.pattern.findall(unicodedata.normalize("NFC", text)):
            ids.extend(self._bpe("".join(self.byte_encoder[b] for b in piece.encode("utf-8"))))
        return ids

    def sp(self, name):
        return self.special[name]

    def decode(self, ids):
        out = bytearray()
        for i in ids:
            t = self.id_to_token[i]
            if i in self.special.values():
                out += t.encode("utf-8")
            else:
                out += bytes(self.byte_decoder[c] for c in t)
        return out.decode("utf-8", errors="replace")


if __name__ == "__main__":
    # `python3 tools/train_toolcaller/qwen3_tokenizer.py`: unpack the bundled tokenizer.json (for the
    # Node tools that read it: tools/gen_tokenizer_goldens.js, tests/data/tokenizer_variants/make_goldens.js)
    print(qwen3_json())
