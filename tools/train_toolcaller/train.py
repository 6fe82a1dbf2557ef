#!/usr/bin/python3
"""Train the small Qwen3-architecture tool-calling model (CPU or CUDA) and export it as an HF directory.

The forward is transformers' Qwen3 (the semantics tools/reference_forward.py documents): RMSNorm,
per-head q_norm/k_norm before rotate_half RoPE, GQA, SwiGLU MLP, tied embeddings.

Training step = one tool context (the cacheable prefix) and up to --max-queries queries asked
against it, the way ContextCache serves them: the prefix is run once, every query's suffix attends
to the prefix K/V and to itself (causally). Each query's computation is exactly a full-prompt
forward of prefix + suffix; sharing the prefix makes a step many times cheaper than separate
prompts. The loss is cross-entropy on the assistant answer tokens (the first 10 optionally weighted
more), plus an optional auxiliary next-token loss on sampled schema and query tokens; lm_head
logits are computed only at those positions, over the ids that occur in the data.

Optional attention supervision (-log of a head's attention mass on target positions; inference is
an ordinary Qwen3 forward either way), which spells out the circuit a tool call needs:
  --gather-weight   layer 1, head 1: a <tools> line's later tokens attend to its name tokens;
  --match-weight    layer 2, head 1: a user word attends to the same word in the <tools> lines;
  --collect-weight  last layer, head 1: the rows writing the called name attend to the user's
                    words that occur in that tool's line;
  --point-weight    last layer, head 0: those rows attend to the tool's line / the next name token.
--bf16 runs the forward under bf16 autocast (weights, gradients and AdamW state stay f32): on a
CPU with AVX-512 BF16 a forward and backward alone is about 2x faster, a whole step ~13% (see the
card). --prefix-chunk N computes the prefix's causal attention in blocks of N rows and skips the
blocks above the diagonal (the same values up to float rounding; ~9% a whole step at 512).
--schedule wsd holds the learning rate after the warm-up and decays it linearly to 10% over the
last --decay-frac of the run (the default, cosine, decays over the whole run).
--device cuda runs the same computation on a GPU (runs 10 and 14: run_gpu.sh, run_gpu_long.sh); --workers N
builds each step's inputs in N processes ahead of the step, with a sampling seed per step;
--save-compact also writes the f32 training weights as compact.npz (~10 MB), which
export_compact.py turns into the HF directory elsewhere. With none of these flags the run is the
CPU computation it always was.

Resuming (--state DIR): a run that adds up over several sessions on different machines (a lent GPU's
15 minutes, the CPU between them). The run's data order and each step's sampling depend only on the
step, so the step is the data position, and the schedule runs on steps (--steps is the whole run;
--time-limit-s and --session-steps only end a session). DIR/state.pt is the exact state (f32
weights, AdamW moments, learning rates, log, sessions): a session resumed from it gives the bits of
the run made in one go (check_resume.py). DIR/carry/ is what travels (bf16 weights, run.json): a
session that finds only it starts the moments again over --rewarm steps. --branch-decay N exports a
decayed copy for shipping and leaves the state as it was. A session of another run (other data,
shape, schedule or seed) is refused with the difference named. run15.sh drives it.
--tokenizer DIR: the tokenizer the data was made with (make_data.py --tokenizer); the config's rows
and special ids and the export's tokenizer files come from it.

Usage: train.py --data DIR/train.pkl --out DIR --steps N [--time-limit-s S] [--seed 1234] [--threads 2]
(run.sh has the settings of run 2; run_gpu.sh, run_long.sh and run_gpu_long.sh the stages of the shipped model)
"""
import argparse
import json
import math
import os
import pickle
import random
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tools"))
from reference_forward import write_safetensors  # noqa: E402  (bf16 round-to-nearest-even writer)
sys.path.insert(0, HERE)
from qwen3_tokenizer import unpacked  # noqa: E402  (the Qwen3 tokenizer.json is stored as .tar.xz)

CONFIG = {
    "architectures": ["Qwen3ForCausalLM"],
    "model_type": "qwen3",
    "vocab_size": 151936,
    "hidden_size": 112,
    "intermediate_size": 384,
    "num_hidden_layers": 3,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 32,
    "hidden_act": "silu",
    "max_position_embeddings": 40960,
    "rms_norm_eps": 1e-06,
    "rope_theta": 1000000.0,
    "rope_scaling": None,
    "attention_bias": False,
    "attention_dropout": 0.0,
    "use_sliding_window": False,
    "sliding_window": None,
    "max_window_layers": 3,
    "tie_word_embeddings": True,
    "torch_dtype": "bfloat16",
    "bos_token_id": 151643,
    "eos_token_id": 151645,
    "use_cache": True,
}


QWEN3_TOKENIZER = os.path.join(ROOT, "resources/tokenizers/qwen3")


class TokenizerInfo:
    """What training needs to know of a tokenizer directory (tokenizer.json, tokenizer_config.json):
    its rows (regular and added tokens), the ids of the special tokens the config names, and a hash
    that the data's stats must match."""

    def __init__(self, tok_dir):
        import hashlib
        self.dir = os.path.abspath(tok_dir)
        path = unpacked(os.path.join(self.dir, "tokenizer.json"))
        with open(path, "rb") as f:
            raw = f.read()
        self.sha256 = hashlib.sha256(raw).hexdigest()
        tj = json.loads(raw)
        ids = list(tj["model"]["vocab"].values()) + [t["id"] for t in tj["added_tokens"]]
        self.rows = max(ids) + 1
        self.special = {t["content"]: t["id"] for t in tj["added_tokens"]}
        self.is_qwen3 = os.path.samefile(self.dir, QWEN3_TOKENIZER)

    def config_overrides(self):
        """vocab_size and the bos/eos ids for config.json (Qwen3's own keeps its padded 151,936 rows)."""
        return {"vocab_size": 151936 if self.is_qwen3 else self.rows,
                "bos_token_id": self.special["<|endoftext|>"], "eos_token_id": self.special["<|im_end|>"]}


def rms_norm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


PREFIX_CHUNK = 0   # query rows per block of the prefix's causal attention (0: one block); --prefix-chunk


class Layer(nn.Module):
    def __init__(self, c):
        super().__init__()
        d, hd = c["hidden_size"], c["head_dim"]
        self.nh, self.nkv, self.hd, self.eps = c["num_attention_heads"], c["num_key_value_heads"], hd, c["rms_norm_eps"]
        self.input_layernorm = nn.Parameter(torch.ones(d))
        self.q_proj = nn.Linear(d, self.nh * hd, bias=False)     # (n_heads * head_dim, hidden)
        self.k_proj = nn.Linear(d, self.nkv * hd, bias=False)    # (n_kv_heads * head_dim, hidden)
        self.v_proj = nn.Linear(d, self.nkv * hd, bias=False)
        self.o_proj = nn.Linear(self.nh * hd, d, bias=False)     # (hidden, n_heads * head_dim)
        self.q_norm = nn.Parameter(torch.ones(hd))
        self.k_norm = nn.Parameter(torch.ones(hd))
        self.post_attention_layernorm = nn.Parameter(torch.ones(d))
        self.gate_proj = nn.Linear(d, c["intermediate_size"], bias=False)
        self.up_proj = nn.Linear(d, c["intermediate_size"], bias=False)
        self.down_proj = nn.Linear(c["intermediate_size"], d, bias=False)

    def qkv(self, x, cos, sin):
        """x (B, T, hidden) -> q (B, n_heads, T, hd), k, v (B, n_kv_heads, T, hd), RoPE applied."""
        B, T, _ = x.shape
        h = rms_norm(x, self.input_layernorm, self.eps)
        q = self.q_proj(h).view(B, T, self.nh, self.hd)
        k = self.k_proj(h).view(B, T, self.nkv, self.hd)
        v = self.v_proj(h).view(B, T, self.nkv, self.hd).transpose(1, 2)
        q = rms_norm(q, self.q_norm, self.eps).transpose(1, 2)   # q_norm/k_norm per head, before RoPE
        k = rms_norm(k, self.k_norm, self.eps).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        return q, k, v

    def expand_kv(self, t):
        # GQA: query head h reads kv head h // (n_heads / n_kv_heads)
        return t.repeat_interleave(self.nh // self.nkv, dim=1)

    def mlp_out(self, x, attn):
        x = x + self.o_proj(attn)
        h = rms_norm(x, self.post_attention_layernorm, self.eps)
        return x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))

    def forward(self, xp, xs_list, rope_p, rope_s_list, mask_p, mask_s_list, probe=None):
        """xp: prefix (1, P, hidden); xs_list: buckets of suffixes (N_b, S_b, hidden), positions P..
        for every suffix. Each suffix row attends to the whole prefix and causally to itself: the
        scores against the prefix are one product per head over every row of the bucket (the
        prefix K/V are never copied per query), and the softmax runs over both parts at once.
        probe: optional {name: (kind, head, rows)}, returned as a third value {name: attention
        probabilities of those rows in that head}: kind "pre", rows (K,) of the prefix, over the
        prefix (K, P); kind "suf", per bucket flat row indices (row * S + col) of the suffixes,
        over the prefix (K, P); kind "self", the same rows, over their own suffix (K, max S)."""
        scale = 1.0 / math.sqrt(self.hd)
        H, hd = self.nh, self.hd
        P = xp.shape[1]
        qp, kp, vp = self.qkv(xp, *rope_p)
        kpe, vpe = self.expand_kv(kp)[0], self.expand_kv(vp)[0]                     # (H, P, hd)
        probe = probe or {}
        # prefix: causal self-attention, in blocks of PREFIX_CHUNK query rows that each score
        # only the keys up to their own end (the blocks above the diagonal are all masked, so
        # skipping them changes no value a row sees; it saves ~40% of this product at 3,500 tokens)
        C = PREFIX_CHUNK if 0 < PREFIX_CHUNK < P else P
        ap_parts, pre_got = [], {name: [] for name, (kind, _, _) in probe.items() if kind == "pre"}
        for s0 in range(0, P, C):
            e = min(P, s0 + C)
            sp = torch.baddbmm(mask_p[s0:e, :e], qp[0, :, s0:e] * scale, kpe[:, :e].transpose(-1, -2))  # (H, c, e)
            pp = torch.softmax(sp, dim=-1)
            ap_parts.append(pp @ vpe[:, :e])                                          # (H, c, hd)
            for name in pre_got:
                _, head, rows = probe[name]
                sel = ((rows >= s0) & (rows < e)).nonzero().flatten()
                pre_got[name].append((sel, F.pad(pp[head, rows[sel] - s0], (0, P - e))))
        ap = torch.cat(ap_parts, 1).transpose(0, 1).reshape(1, P, -1)
        got = {}
        for name, parts_ in pre_got.items():   # the probed rows back in the order asked
            sel = torch.cat([i for i, _ in parts_])
            got[name] = torch.cat([v for _, v in parts_])[torch.argsort(sel)]
        parts = {name: [] for name, (kind, _, _) in probe.items() if kind != "pre"}
        S_max = max(s.shape[1] for s in xs_list) if xs_list else 0
        outs = []
        for xs, rope_s, mask_s in zip(xs_list, rope_s_list, mask_s_list):
            N, S = xs.shape[0], xs.shape[1]
            qs, ks, vs = self.qkv(xs, *rope_s)
            qs = qs * scale
            kse, vse = self.expand_kv(ks), self.expand_kv(vs)                          # (N, H, S, hd)
            s_pre = torch.bmm(qs.permute(1, 0, 2, 3).reshape(H, N * S, hd), kpe.transpose(-1, -2))   # (H, N*S, P)
            s_self = torch.baddbmm(mask_s, qs.reshape(N * H, S, hd), kse.reshape(N * H, S, hd).transpose(-1, -2))
            s_self = s_self.view(N, H, S, S).permute(1, 0, 2, 3).reshape(H, N * S, S)
            m = torch.maximum(s_pre.amax(-1, keepdim=True), s_self.amax(-1, keepdim=True)).detach()
            e_pre, e_self = torch.exp(s_pre - m), torch.exp(s_self - m)
            z = e_pre.sum(-1, keepdim=True) + e_self.sum(-1, keepdim=True)
            o_self = torch.bmm(e_self.view(H, N, S, S).permute(1, 0, 2, 3).reshape(N * H, S, S), vse.reshape(N * H, S, hd))
            o = (torch.bmm(e_pre, vpe) + o_self.view(N, H, S, hd).permute(1, 0, 2, 3).reshape(H, N * S, hd)) / z
            outs.append(self.mlp_out(xs, o.view(H, N, S, hd).permute(1, 2, 0, 3).reshape(N, S, H * hd)))
            for name in parts:
                kind, head, rows = probe[name]
                rows = rows[len(outs) - 1]
                if kind == "suf":
                    parts[name].append(e_pre[head, rows] / z[head, rows])
                else:
                    e = e_self.view(H, N * S, S)[head, rows] / z[head, rows]
                    parts[name].append(F.pad(e, (0, S_max - S)))
        if probe:
            for name, ps in parts.items():
                got[name] = torch.cat(ps) if ps else xp.new_zeros(0, P if probe[name][0] == "suf" else S_max)
            return self.mlp_out(xp, ap), outs, got
        return self.mlp_out(xp, ap), outs


class Model(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.embed_tokens = nn.Embedding(c["vocab_size"], c["hidden_size"])
        self.layers = nn.ModuleList(Layer(c) for _ in range(c["num_hidden_layers"]))
        self.norm = nn.Parameter(torch.ones(c["hidden_size"]))
        hd = c["head_dim"]
        self.register_buffer("inv_freq", 1.0 / (c["rope_theta"] ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd)),
                             persistent=False)

    def rope(self, start, n):
        pos = torch.arange(start, start + n, dtype=torch.float64, device=self.inv_freq.device)
        f = pos[:, None] * self.inv_freq[None, :]
        emb = torch.cat((f, f), dim=-1)
        return emb.cos().float(), emb.sin().float()

    def forward(self, prefix, suffixes, targets_at, targets, weights=None, aux=None, sup=None):
        """prefix (P,); suffixes: buckets of padded suffixes (N_b, S_b); targets_at (M, 3)
        [bucket, row, col] positions whose next token is targets (M,), weighted by `weights` (M,)
        in the mean. Ids index self.embed_tokens, which during training holds only the rows of the
        ids that occur in the data (see main). aux: optional (prefix positions (K,), their next ids
        (K,), suffix positions (L, 3), their next ids (L,)): next-token prediction on sampled
        tokens of the tool schemas and the user's queries, an auxiliary loss that costs one small
        lm_head product (the forward and backward through the prefix happen anyway). sup:
        optional {name: (layer, "pre" | "suf" | "self", head, rows, (K, P or widest suffix) 0/1
        target mask)}: attention supervision, -log of the attention mass a row puts on its
        targets, averaged over rows (see pointer_targets, gather_targets, match_targets,
        collect_targets). Returns (answer loss, auxiliary loss or None, which argmaxes of the
        answer were right, {name: supervision loss})."""
        P = prefix.shape[0]
        xp = self.embed_tokens(prefix)[None]
        xs = [self.embed_tokens(s) for s in suffixes]
        rope_p = self.rope(0, P)
        rope_s = [self.rope(P, s.shape[1]) for s in suffixes]
        dv = prefix.device
        mask_p = torch.full((P, P), float("-inf"), device=dv).triu(1)    # additive causal masks, built once per step
        mask_s = [torch.full((s.shape[1], s.shape[1]), float("-inf"), device=dv).triu(1) for s in suffixes]
        sup = {k: v for k, v in (sup or {}).items() if v is not None and len(v[4])}
        sup_loss = {}
        for i, layer in enumerate(self.layers):
            probe = {name: (kind, head, rows) for name, (layer_i, kind, head, rows, _) in sup.items() if layer_i == i}
            if probe:
                xp, xs, got = layer(xp, xs, rope_p, rope_s, mask_p, mask_s, probe)
                for name in probe:   # -log of the attention mass on the target positions, per row
                    sup_loss[name] = -torch.log((got[name].float() * sup[name][4]).sum(-1) + 1e-6).mean()
            else:
                xp, xs = layer(xp, xs, rope_p, rope_s, mask_p, mask_s)
        eps = self.c["rms_norm_eps"]

        # every suffix position as one row of a flat table, so that picking the answer positions
        # is one index (and its backward one scatter) rather than a select per position
        flat = torch.cat([x.reshape(-1, x.shape[-1]) for x in xs]) if xs else xp.new_zeros(0, xp.shape[2])
        widths = torch.tensor([x.shape[1] for x in xs], dtype=torch.long, device=dv)
        starts = torch.cumsum(torch.tensor([0] + [x.shape[0] * x.shape[1] for x in xs[:-1]], dtype=torch.long,
                                           device=dv), 0)

        def rows(at):   # hidden states at [bucket, row, col] positions, in order
            if not len(at):
                return xp.new_zeros(0, xp.shape[2])
            return flat[starts[at[:, 0]] + at[:, 1] * widths[at[:, 0]] + at[:, 2]]

        h = rms_norm(rows(targets_at), self.norm, eps)                      # (M, hidden)
        logits = h @ self.embed_tokens.weight.t()                           # (M, vocab), tied
        if weights is None:
            loss = F.cross_entropy(logits, targets)
        else:
            loss = (F.cross_entropy(logits, targets, reduction="none") * weights).sum() / weights.sum()
        aux_loss = None
        if aux is not None:
            p_at, p_next, s_at, s_next = aux
            ha = torch.cat((xp[0, p_at], rows(s_at)))
            la = rms_norm(ha, self.norm, eps) @ self.embed_tokens.weight.t()
            aux_loss = F.cross_entropy(la, torch.cat((p_next, s_next)))
        return loss, aux_loss, (logits.argmax(-1) == targets), sup_loss

    def n_params(self):
        total = sum(p.numel() for p in self.parameters())
        return total, total - self.embed_tokens.weight.numel()


BUCKET_ROWS = 12   # suffixes per bucket: queries sorted by length, so little of a bucket is padding


def batch_of(group, max_queries, lead_weight=1.0, lead_tokens=10):
    """The step's tensors: the prefix, the queries in length-sorted buckets, the answer positions
    [bucket, row, col] and their next ids; the first `lead_tokens` answer tokens (the call-or-not
    decision and the tool's name) weigh `lead_weight` in the loss, the rest 1. Also returns, per
    bucket, which query of the group each row is (for aux_targets)."""
    suf = group["suffixes"][:max_queries]
    order = sorted(range(len(suf)), key=lambda i: len(suf[i][0]))
    buckets, members = [], []
    at, tg, w = [], [], []
    for b0 in range(0, len(order), BUCKET_ROWS):
        idx = order[b0:b0 + BUCKET_ROWS]
        S = max(len(suf[i][0]) for i in idx)
        t = torch.zeros(len(idx), S, dtype=torch.long)
        for r, i in enumerate(idx):
            ids, n_prompt = suf[i]
            t[r, :len(ids)] = torch.tensor(list(ids), dtype=torch.long)
            for c in range(n_prompt, len(ids)):
                at.append((len(buckets), r, c - 1))
                tg.append(ids[c])
                w.append(lead_weight if c - n_prompt < lead_tokens else 1.0)
        buckets.append(t)
        members.append(idx)
    return (torch.tensor(list(group["prefix"]), dtype=torch.long), buckets, torch.tensor(at, dtype=torch.long),
            torch.tensor(tg, dtype=torch.long), torch.tensor(w), members)


def aux_targets(group, prefix, buckets, members, rng, n_prefix, n_query):
    """Sampled next-token targets inside the prefix (tool schemas) and the user's queries."""
    P = prefix.shape[0]
    p_at = torch.tensor(sorted(rng.sample(range(P - 1), min(n_prefix, P - 1))), dtype=torch.long)
    cand = [(b, r, c) for b, idx in enumerate(members) for r, i in enumerate(idx)
            for c in range(0, group["suffixes"][i][1] - 1)]
    s_at = torch.tensor(sorted(rng.sample(cand, min(n_query, len(cand)))), dtype=torch.long).reshape(-1, 3)
    s_next = torch.stack([buckets[b][r, c + 1] for b, r, c in s_at.tolist()]) if len(s_at) else prefix.new_zeros(0)
    return p_at, prefix[p_at + 1], s_at, s_next


class NameTokens:
    """Which Qwen3 ids matter for finding tool names: `<tool_call>` (the first token of every call
    answer), `name`, `":`, `Ġ"` (the `"name": "` of both the <tools> lines and the answer), ids
    that start with a double quote (the one after a name) and ids that hold a newline (the end of
    a <tools> line). Read from tokenizer.json (train.py does not need the BPE encoder)."""

    def __init__(self, tokenizer_json):
        with open(tokenizer_json, encoding="utf-8") as f:
            tj = json.load(f)
        vocab = tj["model"]["vocab"]
        self.tool_call = next(t["id"] for t in tj["added_tokens"] if t["content"] == "<tool_call>")
        self.name, self.colon, self.quote = vocab["name"], vocab['":'], vocab["\u0120\""]
        self.quote_start = {i for t, i in vocab.items() if t.startswith('"')}
        self.newline = {i for t, i in vocab.items() if "\u010a" in t}

    def called_name(self, ans):
        """The tool name's ids of an answer that is a call (`<tool_call>\n{"name": "...`), else None."""
        if len(ans) < 8 or ans[0] != self.tool_call or (ans[3], ans[4], ans[5]) != (self.name, self.colon, self.quote):
            return None
        return self.name_at(ans, 6)

    def name_at(self, ids, start):
        """The name's ids from `start` (just after `"name": "`) up to the closing quote."""
        end = start
        while end < len(ids) and ids[end] not in self.quote_start:
            end += 1
        return tuple(ids[start:end]) if end < len(ids) else None


def tool_lines(pre, nt):
    """The <tools> lines of a prefix: [(first name position, name length, end of the line)]."""
    P, out = len(pre), []
    for p in range(3, P):
        if pre[p - 3] == nt.name and pre[p - 2] == nt.colon and pre[p - 1] == nt.quote:
            nm = nt.name_at(pre, p)
            if nm:
                end = p
                while end < P and pre[end] not in nt.newline:
                    end += 1
                out.append((p, len(nm), end))
    return out


def content_positions(pre, lines):
    """Where each content word of the <tools> lines stands: {id: [positions]} for the ids that
    occur in at most a quarter of the lines (a tool's own words, not JSON syntax)."""
    where, in_lines = {}, {}
    for li, (start, _, end) in enumerate(lines):
        for q in range(start, end):
            where.setdefault(pre[q], []).append(q)
            in_lines.setdefault(pre[q], set()).add(li)
    limit = max(1, len(lines) // 4)
    return {t: qs for t, qs in where.items() if len(in_lines[t]) <= limit}


def gather_targets(group, nt, rng, k):
    """Attention supervision that files each tool's name under its schema: `k` sampled positions
    of the <tools> lines after the name (description, parameters) attend to that line's name
    tokens. Returns (prefix rows (K,), (K, P) 0/1 mask) or None."""
    pre = list(group["prefix"])
    P = len(pre)
    cand = [(q, start, n) for start, n, end in tool_lines(pre, nt) for q in range(start + n + 1, end)]
    if not cand:
        return None
    cand = rng.sample(cand, min(k, len(cand)))
    mask = torch.zeros(len(cand), P)
    for j, (_, start, n) in enumerate(cand):
        mask[j, start:start + n] = 1.0
    return torch.tensor([q for q, _, _ in cand], dtype=torch.long), mask


def match_targets(group, members, bucket_widths, nt, k):
    """Attention supervision of lexical matching: a token of the user's message that occurs in
    few <tools> lines (at most a quarter of them: a content word, not JSON syntax) attends to its
    occurrences in those lines. Up to `k` rows per step. Returns (per bucket flat row indices,
    (K, P) 0/1 mask) or None."""
    pre = list(group["prefix"])
    P = len(pre)
    content = content_positions(pre, tool_lines(pre, nt))
    rows, masks = [[] for _ in members], []
    for b, idx in enumerate(members):
        for r, i in enumerate(idx):
            ids, n_prompt = group["suffixes"][i]
            for c in range(n_prompt):
                if ids[c] in content and len(masks) < k:
                    m = torch.zeros(P)
                    m[content[ids[c]]] = 1.0
                    rows[b].append(r * bucket_widths[b] + c)
                    masks.append(m)
    if not masks:
        return None
    return [torch.tensor(x, dtype=torch.long) for x in rows], torch.stack(masks)


def collect_targets(group, members, bucket_widths, nt):
    """Attention supervision that carries the match to the answer: the rows that write the called
    tool's name attend, within their own message, to the user's words that occur in that tool's
    <tools> line and in few others (match_targets' content words). Returns (per bucket flat row
    indices, (K, widest bucket) 0/1 mask) or None."""
    pre = list(group["prefix"])
    lines = tool_lines(pre, nt)
    content = content_positions(pre, lines)
    by_name = {}
    for start, n, end in lines:
        by_name.setdefault(tuple(pre[start:start + n]), set()).update(pre[start:end])
    width = max(bucket_widths)
    rows, masks = [[] for _ in members], []
    for b, idx in enumerate(members):
        for r, i in enumerate(idx):
            ids, n_prompt = group["suffixes"][i]
            nm = nt.called_name(list(ids[n_prompt:]))
            words = by_name.get(nm) if nm else None
            if not words:
                continue
            m = torch.zeros(width)
            for c in range(n_prompt):
                if ids[c] in words and ids[c] in content:
                    m[c] = 1.0
            if not m.any():
                continue
            for j in range(len(nm)):
                rows[b].append(r * bucket_widths[b] + n_prompt + 6 + j - 1)
                masks.append(m)
    if not masks:
        return None
    return [torch.tensor(x, dtype=torch.long) for x in rows], torch.stack(masks)


def pointer_targets(group, members, bucket_widths, nt):
    """Attention supervision for the tool-name tokens of call answers (the model's pointer into
    its context). For answer token j of the called tool's name, the row that predicts it should
    attend, in head 0 of the last layer, to: for j = 0 (choosing the tool) anywhere in that tool's
    <tools> line from its name on; for j > 0 (copying the name) the name's token j in the line.
    Returns (per bucket flat row indices, (K, prefix length) 0/1 mask) or None when no call of
    this group names a tool found in its prefix."""
    pre = list(group["prefix"])
    P = len(pre)
    lines = {}   # name ids -> [(first name position, end of its line)]
    for start, n, end in tool_lines(pre, nt):
        lines.setdefault(tuple(pre[start:start + n]), []).append((start, end))
    rows, masks = [[] for _ in members], []
    for b, idx in enumerate(members):
        for r, i in enumerate(idx):
            ids, n_prompt = group["suffixes"][i]
            nm = nt.called_name(list(ids[n_prompt:]))
            if not nm or nm not in lines:
                continue
            for j in range(len(nm)):
                m = torch.zeros(P)
                for start, end in lines[nm]:
                    if j == 0:
                        m[start:end] = 1.0
                    else:
                        m[start + j] = 1.0
                rows[b].append(r * bucket_widths[b] + n_prompt + 6 + j - 1)
                masks.append(m)
    if not masks:
        return None
    return [torch.tensor(x, dtype=torch.long) for x in rows], torch.stack(masks)


def compact_vocab(groups, vocab_size):
    """Compact vocabulary: only ~14k of the 151,936 ids occur in the data (prompts and answers).
    Training runs on those rows plus one shared "unseen" row (index 0), so the embedding
    gradient, the AdamW update and the lm_head matmul are ~10x smaller. The unseen row is never a
    target, so the softmax pushes its logit down; at export every id that never occurred gets that
    row, which keeps them from ever winning the argmax and gives unknown input ids one trained
    embedding. Returns (the ids that occur, id -> compact index)."""
    every = np.concatenate([np.asarray(g["prefix"], dtype=np.int64) for g in groups]
                           + [np.asarray(ids, dtype=np.int64) for g in groups for ids, _ in g["suffixes"]])
    vocab = torch.from_numpy(np.unique(every))
    return vocab, remap_of(vocab, vocab_size)


def remap_of(vocab, vocab_size):
    """id -> compact index (1.. for the ids in `vocab`, 0 for the shared unseen row)."""
    remap = torch.zeros(vocab_size, dtype=torch.long)
    remap[vocab] = torch.arange(1, len(vocab) + 1)
    return remap


def save_compact(model, vocab, path):
    """The training weights as they are (compact vocabulary, f32) in one .npz of ~10 MB rather than
    the 36 MB export; export_compact.py makes the HF directory from it (what export() writes)."""
    arrays = {k: v.detach().float().cpu().numpy() for k, v in model.state_dict().items()}
    np.savez(path, __vocab__=vocab.numpy(), __config__=np.frombuffer(json.dumps(model.c).encode(), dtype=np.uint8),
             **arrays)


def load_compact(path):
    """(Model, remap) from save_compact's file."""
    z = np.load(path)
    c = json.loads(bytes(z["__config__"]).decode())
    vocab = torch.from_numpy(z["__vocab__"]).long()
    model = Model(dict(c, vocab_size=len(vocab) + 1))
    model.c = c
    model.load_state_dict({k: torch.from_numpy(z[k]) for k in z.files if not k.startswith("__")})
    return model, remap_of(vocab, c["vocab_size"])


def load_exported(model, path, vocab, remap):
    """Weights of an exported HF directory into a compact-vocabulary Model."""
    from reference_forward import read_safetensors
    w, _, _ = read_safetensors(os.path.join(path, "model.safetensors"))
    full = torch.tensor(w["model.embed_tokens.weight"], dtype=torch.float32)
    unseen = (remap == 0).nonzero().flatten()
    first = full[unseen[0]][None] if len(unseen) else torch.zeros(1, full.shape[1])   # every id occurs: row 0 unused
    sd = {"embed_tokens.weight": torch.cat((first, full[vocab])), "norm": w["model.norm.weight"]}
    hf_names = {"input_layernorm": "input_layernorm.weight", "q_norm": "self_attn.q_norm.weight",
                "k_norm": "self_attn.k_norm.weight", "post_attention_layernorm": "post_attention_layernorm.weight"}
    for k in model.state_dict():
        if k.startswith("layers."):
            _, i, rest = k.split(".", 2)
            base = rest.rsplit(".", 1)[0] if rest.endswith(".weight") else rest
            hf = hf_names.get(base) or (("mlp." if base in ("gate_proj", "up_proj", "down_proj") else "self_attn.")
                                        + base + ".weight")
            sd[k] = w[f"model.layers.{i}.{hf}"]
    model.load_state_dict({k: torch.as_tensor(v, dtype=torch.float32) for k, v in sd.items()})


def export(model, remap, out_dir, tok_dir=QWEN3_TOKENIZER):
    """HF directory: config.json, generation_config.json, model.safetensors (bf16), and links to the
    tokenizer files of `tok_dir`. The compact embedding is scattered back to all vocab_size rows
    (ids that never occurred get row 0)."""
    os.makedirs(out_dir, exist_ok=True)
    c = model.c
    tensors = [("model.embed_tokens.weight", model.embed_tokens.weight.detach().cpu()[remap])]
    for i, l in enumerate(model.layers):
        p = f"model.layers.{i}."
        tensors += [(p + "input_layernorm.weight", l.input_layernorm),
                    (p + "self_attn.q_proj.weight", l.q_proj.weight), (p + "self_attn.k_proj.weight", l.k_proj.weight),
                    (p + "self_attn.v_proj.weight", l.v_proj.weight), (p + "self_attn.o_proj.weight", l.o_proj.weight),
                    (p + "self_attn.q_norm.weight", l.q_norm), (p + "self_attn.k_norm.weight", l.k_norm),
                    (p + "post_attention_layernorm.weight", l.post_attention_layernorm),
                    (p + "mlp.gate_proj.weight", l.gate_proj.weight), (p + "mlp.up_proj.weight", l.up_proj.weight),
                    (p + "mlp.down_proj.weight", l.down_proj.weight)]
    tensors.append(("model.norm.weight", model.norm))
    write_safetensors(os.path.join(out_dir, "model.safetensors"),
                      [(n, "BF16", t.detach().float().cpu().numpy()) for n, t in tensors])
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(c, f, indent=2)
        f.write("\n")
    sp = TokenizerInfo(tok_dir).special
    with open(os.path.join(out_dir, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": sp["<|endoftext|>"], "eos_token_id": [sp["<|im_end|>"], sp["<|endoftext|>"]],
                   "pad_token_id": sp["<|endoftext|>"], "do_sample": False}, f, indent=2)
        f.write("\n")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        link = os.path.join(out_dir, name)
        if not os.path.lexists(link):
            os.symlink(os.path.relpath(os.path.join(tok_dir, name), out_dir), link)


# ---- resumable runs (--state DIR) -----------------------------------------------------------------
# DIR/state.pt: everything a session needs to continue the run exactly where the last one stopped
# (f32 weights, AdamW moments, the step, which is also the data position: with --state the groups
# come in a fixed order and each step samples with its own seed; the learning rates, the log, the
# sessions). DIR/carry/: the same run in a form small enough to travel to a lent GPU and back
# (bf16 weights as an HF directory, run.json): a session that finds only the carry continues from
# it with fresh AdamW moments and --rewarm steps of learning-rate ramp (the one inexact step,
# recorded in the sessions list). What identifies the run (data, shape, schedule, seed) must match.


def git_commit():
    import subprocess
    try:
        return subprocess.run(["git", "-C", ROOT, "describe", "--always", "--dirty"], capture_output=True, text=True,
                              timeout=10).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def save_state(state_dir, run_id, model, opt, vocab, remap, tok_dir, step, ema, lrs, log, sessions):
    os.makedirs(state_dir, exist_ok=True)
    record = {"format": 1, "run": run_id, "step": step, "ema": None if ema is None else float(ema),
              "lrs": lrs, "log": log, "sessions": sessions}
    tmp = os.path.join(state_dir, "state.pt.tmp")
    torch.save(dict(record, model={k: v.detach().cpu() for k, v in model.state_dict().items()},
                    opt=mapped(opt.state_dict(), lambda t: t.detach().cpu()), vocab=vocab), tmp)
    os.replace(tmp, os.path.join(state_dir, "state.pt"))
    carry, tmp_dir = os.path.join(state_dir, "carry"), os.path.join(state_dir, "carry.tmp")
    if os.path.isdir(tmp_dir):
        import shutil
        shutil.rmtree(tmp_dir)
    export(model, remap, tmp_dir, tok_dir)
    for name in ("tokenizer.json", "tokenizer_config.json"):   # the carry names its tokenizer by hash
        os.unlink(os.path.join(tmp_dir, name))
    with open(os.path.join(tmp_dir, "run.json"), "w") as f:
        json.dump(record, f)
    if os.path.isdir(carry):
        import shutil
        shutil.rmtree(carry)
    os.replace(tmp_dir, carry)


def load_state(state_dir, run_id, model, vocab, remap):
    """The saved state of the run in `state_dir` applied to `model` (None when there is none yet):
    {"from": "exact" | "carry", "step", "ema", "lrs", "log", "sessions", "opt" (exact only)}."""
    full, carry = os.path.join(state_dir, "state.pt"), os.path.join(state_dir, "carry")
    st = None
    if os.path.exists(os.path.join(carry, "run.json")):
        with open(os.path.join(carry, "run.json")) as f:
            st = json.load(f)
        source = os.path.join(carry, "run.json")
    if os.path.exists(full):   # the exact state, unless a carry that came back from elsewhere is further on
        exact = torch.load(full, map_location="cpu")
        if st is None or exact["step"] >= st["step"]:
            st, source = exact, full
    if st is None:
        return None
    if st.get("format") != 1:
        sys.exit(f"train.py: {source}: not a state this train.py writes (format {st.get('format')!r})")
    mine = json.loads(json.dumps(run_id))
    for key in mine:
        if st["run"].get(key) != mine[key]:
            sys.exit(f"train.py: {source} is another run: its {key} is {json.dumps(st['run'].get(key))[:200]}, "
                     f"this session's {json.dumps(mine[key])[:200]}")
    if "model" in st:
        if not torch.equal(st["vocab"], vocab):
            sys.exit(f"train.py: {source}: the compact vocabulary differs (other data)")
        model.load_state_dict(st["model"])
        st["from"] = "exact"
    else:
        load_exported(model, carry, vocab, remap)
        st["from"] = "carry"
    print(json.dumps({"resumed": source, "from": st["from"], "step": st["step"]}), flush=True)
    return st


def remapped_batch(g, max_queries, lead_weight, remap):
    """batch_of with the ids mapped to the compact vocabulary."""
    prefix, buckets, at, tg, w, members = batch_of(g, max_queries, lead_weight)
    return remap[prefix], [remap[b] for b in buckets], at, remap[tg], w, members


def step_inputs(g, rng, args, remap, names):
    """Everything one training step feeds the model, on the CPU: (prefix, buckets, answer positions,
    targets, weights, members, aux targets or None, {name: attention supervision or None})."""
    prefix, buckets, at, tg, w, members = remapped_batch(g, args.max_queries, args.lead_weight, remap)
    aux = (aux_targets(g, prefix, buckets, members, rng, args.aux_prefix_tokens, args.aux_query_tokens)
           if args.aux_weight else None)
    widths = [b.shape[1] for b in buckets]
    last = args.n_layers - 1
    sup = {}
    if args.point_weight:   # the answer's tool name: last layer, head 0
        t = pointer_targets(g, members, widths, names)
        sup["point"] = (last, "suf", 0, t[0], t[1]) if t else None
    if args.gather_weight:  # schema under its name: second layer, head 1
        t = gather_targets(g, names, rng, args.sup_rows)
        sup["gather"] = (1, "pre", 1, t[0], t[1]) if t else None
    if args.match_weight:   # query word to the same word in <tools>: third layer, head 1
        t = match_targets(g, members, widths, names, args.sup_rows)
        sup["match"] = (2, "suf", 1, t[0], t[1]) if t else None
    if args.collect_weight:  # the answer's name rows to the matched query words: last layer, head 1
        t = collect_targets(g, members, widths, names)
        sup["collect"] = (last, "self", 1, t[0], t[1]) if t else None
    # the 0/1 target masks travel as bool (4x less to move between processes; the loss's product
    # promotes them to float, the same values)
    sup = {k: v[:4] + (v[4].bool(),) if v is not None else None for k, v in sup.items()}
    return prefix, buckets, at, tg, w, members, aux, sup


def mapped(x, fn, kind=torch.Tensor):
    """x with every `kind` t in it (a tensor; through tuples, lists and dicts) replaced by fn(t)."""
    if isinstance(x, kind):
        return fn(x)
    if isinstance(x, (list, tuple)):
        return type(x)(mapped(v, fn, kind) for v in x)
    if isinstance(x, dict):
        return {k: mapped(v, fn, kind) for k, v in x.items()}
    return x


_W = {}   # what step_inputs_of reads in the worker processes (filled before they fork)


def _worker_init():
    torch.set_num_threads(1)


def step_inputs_of(step):
    """Worker process: step `step`'s inputs, with a sampling RNG seeded by the step (so the run does
    not depend on which worker builds which step), as numpy arrays for the trip back."""
    a = _W["args"]
    g = _W["train"][_W["seq"][step]]
    x = step_inputs(g, random.Random(a.seed * 1000003 + step), a, _W["remap"], _W["names"])
    return mapped(x, lambda t: t.numpy())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--max-queries", type=int, default=14)
    ap.add_argument("--val-groups", type=int, default=16)
    ap.add_argument("--eval-every", type=int, default=200)
    ap.add_argument("--export-every", type=int, default=0, help="also export checkpoints to OUT/ckpt-STEP")
    ap.add_argument("--time-limit-s", type=float, default=0, help="stop early (and export) after this long")
    ap.add_argument("--init-from", default="", help="continue from an exported model directory")
    ap.add_argument("--data-seed-offset", type=int, default=0, help="shuffle the data differently when continuing")
    ap.add_argument("--replay-lrs", default="", help="train_log.json of a run to repeat step for step")
    ap.add_argument("--config", default="", help="JSON overrides of the model shape")
    ap.add_argument("--short-first", type=float, default=0.0,
                    help="fraction of the run (steps or time) that sees only contexts of <= --short-prefix tokens")
    ap.add_argument("--short-prefix", type=int, default=1300)
    ap.add_argument("--lead-weight", type=float, default=1.0,
                    help="loss weight of the first 10 answer tokens (call or not, and the tool's name)")
    ap.add_argument("--aux-weight", type=float, default=0.0,
                    help="weight of next-token prediction on sampled schema and query tokens (0 = off)")
    ap.add_argument("--aux-prefix-tokens", type=int, default=256)
    ap.add_argument("--aux-query-tokens", type=int, default=64)
    ap.add_argument("--gather-weight", type=float, default=0.0,
                    help="weight of the attention supervision that files a tool's schema under its name (0 = off)")
    ap.add_argument("--match-weight", type=float, default=0.0,
                    help="weight of the attention supervision of query words to the same words in <tools> (0 = off)")
    ap.add_argument("--collect-weight", type=float, default=0.0,
                    help="weight of the attention supervision of the answer's name rows to the matched query words (0 = off)")
    ap.add_argument("--sup-rows", type=int, default=192, help="rows per step of each of those two supervisions")
    ap.add_argument("--bf16", action="store_true",
                    help="bf16 autocast for the forward (weights and optimizer stay f32); ~2x faster on AVX-512 BF16, "
                         "~28x slower on a CPU without it (torch's fallback), where run15.sh leaves it off")
    ap.add_argument("--prefix-chunk", type=int, default=0,
                    help="compute the prefix's causal attention in blocks of this many rows, skipping the masked "
                         "blocks (same values up to float rounding; faster on long prefixes); 0: one block")
    ap.add_argument("--schedule", choices=("cosine", "wsd"), default="cosine",
                    help="cosine: decay to 10%% over the run; wsd: hold --lr after the warm-up, then decay "
                         "linearly to 10%% over the last --decay-frac of the run")
    ap.add_argument("--decay-frac", type=float, default=0.2)
    ap.add_argument("--point-weight", type=float, default=0.0,
                    help="weight of the attention supervision of the tool-name tokens (0 = off)")
    ap.add_argument("--device", default="cpu",
                    help="cpu, or cuda: the same computation on a GPU (the step inputs stay CPU-built)")
    ap.add_argument("--workers", type=int, default=0,
                    help="build the steps' inputs in this many processes ahead of the step (each step's sampling "
                         "then has its own seed, so a run differs from --workers 0); needs --short-first 0")
    ap.add_argument("--eval-only", action="store_true",
                    help="with --init-from: print the validation figures of those weights on --data's validation groups and stop")
    ap.add_argument("--tokenizer", default=QWEN3_TOKENIZER,
                    help="tokenizer directory the data was made with (default the Qwen3 one; "
                         "resources/tokenizers/toolcaller for the derived one); the export links to it")
    ap.add_argument("--state", default="",
                    help="resumable run: keep the run's state in DIR and continue from it when it is there "
                         "(see Resuming in the docstring)")
    ap.add_argument("--state-every", type=int, default=200, help="write the state every N steps (and at the end)")
    ap.add_argument("--session-steps", type=int, default=0, help="stop this session after N steps (0: no limit)")
    ap.add_argument("--rewarm", type=int, default=50,
                    help="steps over which the learning rate ramps up again after resuming from a carry "
                         "(its optimizer state starts at zero)")
    ap.add_argument("--branch-decay", type=int, default=0,
                    help="with --state: from where the run stands, N steps with the learning rate decaying "
                         "linearly to 10%% of its value there, exported to --out; the run's state is left as it "
                         "was (a WSD run ships such a branch and goes on from the state)")
    ap.add_argument("--save-compact", action="store_true",
                    help="also write compact.npz (the f32 training weights, ~10 MB) beside each export")
    args = ap.parse_args()
    if not 0.0 < args.decay_frac <= 1.0:
        ap.error(f"--decay-frac must be in (0, 1], got {args.decay_frac}")
    if args.eval_only and not args.init_from:
        ap.error("--eval-only needs --init-from")
    if args.workers and args.short_first:
        ap.error("--workers needs --short-first 0 (the curriculum picks groups by the elapsed time)")
    if args.state and (args.short_first or args.replay_lrs or args.init_from or args.eval_only):
        ap.error("--state cannot be combined with --short-first, --replay-lrs, --init-from or --eval-only")
    if args.branch_decay and not args.state:
        ap.error("--branch-decay needs --state (the run to branch from)")
    dev = torch.device(args.device)

    torch.set_num_threads(args.threads)
    global PREFIX_CHUNK
    PREFIX_CHUNK = args.prefix_chunk
    tok = TokenizerInfo(args.tokenizer)
    names = NameTokens(os.path.join(tok.dir, "tokenizer.json"))
    torch.manual_seed(args.seed)
    random.seed(args.seed)
    np.random.seed(args.seed)
    c = dict(CONFIG, **tok.config_overrides())
    if args.eval_only and args.init_from and not args.config:   # the shape of the weights evaluated
        args.config = open(os.path.join(args.init_from, "config.json")).read()
    if args.config:
        c.update(json.loads(args.config))
        c["max_window_layers"] = c["num_hidden_layers"]
    args.n_layers = c["num_hidden_layers"]

    with open(args.data, "rb") as f:
        data = pickle.load(f)
    groups = data["groups"]
    val, train = groups[:args.val_groups], groups[args.val_groups:]
    rng = random.Random(args.seed + args.data_seed_offset)
    made_with = data["stats"].get("tokenizer_sha256")
    if made_with and made_with != tok.sha256:
        sys.exit(f"train.py: {args.data} was tokenized with another tokenizer than {args.tokenizer} (pass --tokenizer)")
    top = max(max(max(g["prefix"]), max(max(ids) for ids, _ in g["suffixes"])) for g in groups)
    if top >= c["vocab_size"]:
        sys.exit(f"train.py: {args.data} holds token id {top}, past the {c['vocab_size']} rows of {args.tokenizer}")

    vocab, remap = compact_vocab(groups, c["vocab_size"])
    print(json.dumps({"softmax_vocab": len(vocab) + 1}), flush=True)

    model = Model(dict(c, vocab_size=len(vocab) + 1))
    model.c = c
    # init: N(0, 0.02) everywhere, residual outputs scaled by 1/sqrt(2 * n_layers) (GPT-2 style)
    for n, p in model.named_parameters():
        if p.dim() == 2:
            std = 0.02 / math.sqrt(2 * c["num_hidden_layers"]) if n.endswith(("o_proj.weight", "down_proj.weight")) else 0.02
            nn.init.normal_(p, 0.0, std)
    if args.init_from:   # continue from an exported directory (bf16 weights; optimizer state starts fresh)
        load_exported(model, args.init_from, vocab, remap)
    # A resumable run (--state): what must match for a session to continue it, and where it stands.
    run_id = {"seed": args.seed, "data_seed_offset": args.data_seed_offset, "steps": args.steps, "lr": args.lr,
              "warmup": args.warmup, "schedule": args.schedule, "decay_frac": args.decay_frac, "config": c,
              "tokenizer_sha256": tok.sha256, "data_groups": len(groups), "val_groups": args.val_groups,
              "data_stats": data["stats"]}
    resumed = load_state(args.state, run_id, model, vocab, remap) if args.state else None
    step0 = resumed["step"] if resumed else 0
    last = step0 + args.branch_decay if args.branch_decay else args.steps   # this session's last step
    seq = None
    if args.workers or args.state:   # the groups in the order the loop below takes them, step by step
        seq, order = [], list(range(len(train)))
        while len(seq) < last:
            rng.shuffle(order)
            seq += order
    pool = None
    if args.workers:   # fork the input builders before CUDA is touched
        import collections
        import multiprocessing
        _W.update(args=args, train=train, seq=seq, remap=remap, names=names)
        pool = multiprocessing.get_context("fork").Pool(args.workers, initializer=_worker_init)
        pending = collections.deque(pool.apply_async(step_inputs_of, (i,))
                                    for i in range(step0, min(last, step0 + 3 * args.workers)))
    model.to(dev)
    non_emb = model.n_params()[1]
    total = non_emb + c["vocab_size"] * c["hidden_size"]
    print(json.dumps({"params": total, "non_embedding_params": non_emb, "train_groups": len(train),
                      "val_groups": len(val), "config": c}), flush=True)

    decay = [p for n, p in model.named_parameters() if p.dim() == 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8, **({"fused": True} if dev.type == "cuda" else {}))
    if resumed and resumed.get("opt"):
        opt.load_state_dict(resumed["opt"])

    # Cosine decay to 10% after a linear warm-up. Progress is steps/steps, or with --time-limit-s
    # elapsed/limit when that is further along (the shared machine's speed varies), and every
    # step's learning rate is logged so --replay-lrs can repeat the run exactly.
    replay = json.load(open(args.replay_lrs))["lrs"] if args.replay_lrs else None
    lrs = []

    def lr_at(step, elapsed=0.0):
        if replay is not None:
            return replay[min(step, len(replay) - 1)]
        if step < args.warmup:
            return args.lr * (step + 1) / args.warmup
        t = (step - args.warmup) / max(1, args.steps - args.warmup)
        if args.time_limit_s:
            t = max(t, elapsed / args.time_limit_s)
        t = min(1.0, t)
        if args.schedule == "wsd":
            return args.lr * (1.0 - 0.9 * max(0.0, t - (1.0 - args.decay_frac)) / args.decay_frac)
        return args.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * t)))

    def to_dev(x):
        return mapped(x, lambda t: t.to(dev, non_blocking=True))

    def evaluate():
        """Teacher-forced loss and accuracy on held-back generated groups (not the test set), and
        the share of answers whose first 10 tokens (call or not, and the tool's name) are right."""
        model.eval()
        tot, n, correct, n_ans, exact, lead = 0.0, 0, 0, 0, 0, 0
        n_call, call_lead = 0, 0    # answers that are tool calls, and those whose lead is right
        by_len = {"short": [0, 0], "long": [0, 0]}   # the same, for prefixes <= / > --short-prefix
        call_open = remap[names.tool_call]
        with torch.no_grad(), torch.autocast(dev.type, dtype=torch.bfloat16, enabled=args.bf16):
            for g in val:
                part = by_len["short" if len(g["prefix"]) <= args.short_prefix else "long"]
                prefix, buckets, at, tg, w, members = remapped_batch(g, args.max_queries, 2.0, remap)
                loss, _, ok, _ = model(*to_dev((prefix, buckets, at, tg)))
                ok = ok.cpu()
                tot += loss.item() * ok.numel()
                n += ok.numel()
                correct += ok.sum().item()
                for b, idx in enumerate(members):
                    for r in range(len(idx)):
                        rows = (at[:, 0] == b) & (at[:, 1] == r)
                        exact += int(ok[rows].all())
                        lead_ok = int(ok[rows & (w == 2.0)].all())
                        lead += lead_ok
                        n_ans += 1
                        if tg[rows][0] == call_open:
                            n_call += 1
                            call_lead += lead_ok
                            part[0] += 1
                            part[1] += lead_ok
        model.train()
        return {"val_loss": tot / n, "val_token_acc": correct / n, "val_answer_exact": exact / n_ans,
                "val_answer_lead": lead / n_ans, "val_call_lead": call_lead / max(1, n_call),
                "val_call_lead_short": by_len["short"][1] / max(1, by_len["short"][0]),
                "val_call_lead_long": by_len["long"][1] / max(1, by_len["long"][0])}

    if args.eval_only:
        print("EVAL " + json.dumps(dict(evaluate(), init_from=args.init_from)), flush=True)
        return

    log = resumed["log"] if resumed else []
    if resumed:
        lrs[:] = resumed["lrs"]
    sessions = resumed["sessions"] if resumed else []
    session = {"start_step": step0, "resumed_from": resumed["from"] if resumed else "start",
               "branch_decay": args.branch_decay, "bf16_autocast": bool(args.bf16),
               "device": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu",
               "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "commit": git_commit()}
    t0 = time.time()
    order = list(range(len(train)))
    if not pool and not args.state:
        rng.shuffle(order)
    step, pos = step0, 0
    ema = torch.tensor(resumed["ema"]) if resumed and resumed["ema"] is not None else None
    sup_w = {"point": args.point_weight, "gather": args.gather_weight, "match": args.match_weight,
             "collect": args.collect_weight}
    while step < last:
        if pool:   # built ahead by the workers; queue the step that many steps later
            inputs = pending.popleft().get()
            if step + len(pending) + 1 < last:
                pending.append(pool.apply_async(step_inputs_of, (step + len(pending) + 1,)))
            g = train[seq[step]]
            inputs = mapped(inputs, torch.from_numpy, np.ndarray)
        elif args.state:   # the workers' order and sampling, built here
            g = train[seq[step]]
            inputs = step_inputs(g, random.Random(args.seed * 1000003 + step), args, remap, names)
        else:
            if pos == len(order):
                rng.shuffle(order)
                pos = 0
            g = train[order[pos]]
            pos += 1
            # Curriculum: short contexts first (the reading and copying is learned where a step is
            # cheap), every context length after --short-first of the run.
            progress = max(step / args.steps, (time.time() - t0) / args.time_limit_s if args.time_limit_s else 0.0)
            if progress < args.short_first and len(g["prefix"]) > args.short_prefix:
                continue
            inputs = step_inputs(g, rng, args, remap, names)
        lr = lr_at(step, 0.0 if args.state else time.time() - t0)
        if args.branch_decay:
            lr = lr_at(step0) * (1.0 - 0.9 * (step - step0) / args.branch_decay)
        if resumed and resumed["from"] == "carry" and step - step0 < args.rewarm:
            lr *= (step - step0 + 1) / args.rewarm   # its AdamW moments start again from zero
        lrs.append(lr)
        for pg in opt.param_groups:
            pg["lr"] = lr
        prefix, buckets, at, tg, w, members, aux, sup = to_dev(inputs)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=args.bf16):
            loss, aux_loss, ok, sup_loss = model(prefix, buckets, at, tg, w if args.lead_weight != 1.0 else None,
                                                 aux, sup)
        loss = loss.float()
        aux_loss = aux_loss.float() if aux_loss is not None else None
        opt.zero_grad(set_to_none=True)
        total_loss = loss + args.aux_weight * aux_loss if aux_loss is not None else loss
        for name, l in sup_loss.items():
            total_loss = total_loss + sup_w[name] * l
        total_loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        ema = loss.detach() if ema is None else 0.95 * ema + 0.05 * loss.detach()   # no sync with the device
        elapsed = time.time() - t0
        if step % 10 == 0:
            aux_text = f" aux {aux_loss.item():.3f}" if aux_loss is not None else ""
            aux_text += "".join(f" {name} {l.item():.3f}" for name, l in sup_loss.items())
            print(f"step {step} loss {loss.item():.4f} ema {ema.item():.4f}{aux_text} acc {ok.float().mean().item():.3f} "
                  f"lr {lr:.2e} prefix {len(g['prefix'])} s/step {elapsed / (step - step0):.3f} t {elapsed:.0f}s",
                  flush=True)
        done = step == args.steps or (replay is not None and step == len(replay)) or \
            (args.time_limit_s and replay is None and elapsed > args.time_limit_s) or \
            (args.session_steps and step - step0 >= args.session_steps) or \
            (args.branch_decay and step - step0 >= args.branch_decay)
        if step % args.eval_every == 0 or done:
            ev = evaluate()
            ev.update({"step": step, "train_loss_ema": ema.item(), "elapsed_s": round(time.time() - t0, 1)})
            log.append(ev)
            print("EVAL " + json.dumps(ev), flush=True)
        if args.export_every and step % args.export_every == 0 and not done:
            export(model, remap, os.path.join(args.out, f"ckpt-{step}"), tok.dir)
            if args.save_compact:
                save_compact(model, vocab, os.path.join(args.out, f"ckpt-{step}", "compact.npz"))
        if args.state and not args.branch_decay and (step % args.state_every == 0 or done):
            session.update(end_step=step, seconds=round(time.time() - t0, 1))
            save_state(args.state, run_id, model, opt, vocab, remap, tok.dir, step, ema, lrs, log,
                       sessions + [session])
        if done:
            break
    if pool:
        pool.terminate()
    export(model, remap, args.out, tok.dir)
    if args.save_compact:
        save_compact(model, vocab, os.path.join(args.out, "compact.npz"))
    with open(os.path.join(args.out, "train_log.json"), "w") as f:
        json.dump({"args": vars(args), "steps": step, "train_seconds": round(time.time() - t0, 1), "params": total,
                   "non_embedding_params": non_emb, "seed": args.seed, "lr": args.lr, "warmup": args.warmup,
                   "max_queries": args.max_queries, "softmax_vocab": len(vocab) + 1, "config": c, "data_stats": data["stats"], "evals": log,
                   "lrs": lrs, "device": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu",
                   "sessions": sessions + [dict(session, end_step=step, seconds=round(time.time() - t0, 1))]}, f)
    print(f"done: {step} steps in {time.time() - t0:.0f}s", flush=True)


if __name__ == "__main__":
    main()
