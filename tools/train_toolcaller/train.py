#!/usr/bin/python3
"""Train the small Qwen3-architecture tool-calling model on CPU and export it as an HF directory.

The forward is transformers' Qwen3 (the semantics tools/reference_forward.py documents): RMSNorm,
per-head q_norm/k_norm before rotate_half RoPE, GQA, SwiGLU MLP, tied embeddings.

Training step = one tool context (the cacheable prefix) and up to 16 queries asked against it,
the way ContextCache serves them: the prefix is run once, every query's suffix attends to the
prefix K/V and to itself (causally). Each query's computation is exactly a full-prompt forward of
prefix + suffix; sharing the prefix makes a step ~10x cheaper than 16 separate prompts. The loss
is cross-entropy on the assistant answer tokens only, and lm_head logits (the 151,936-wide matmul)
are computed only at those positions.

Usage: train.py --data DIR/train.pkl --out DIR --steps N [--seed 1234] [--threads 2] [--pilot]
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


def rms_norm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


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

    def forward(self, xp, xs, rope_p, rope_s, mask_p, mask_s):
        """xp: prefix (1, P, hidden); xs: suffixes (N, S, hidden), positions P.. for every suffix."""
        P, S, N = xp.shape[1], xs.shape[1], xs.shape[0]
        scale = 1.0 / math.sqrt(self.hd)
        qp, kp, vp = self.qkv(xp, *rope_p)
        qs, ks, vs = self.qkv(xs, *rope_s)
        kp, vp, ks, vs = map(self.expand_kv, (kp, vp, ks, vs))
        H = self.nh
        # prefix: causal self-attention
        sp = torch.baddbmm(mask_p, qp[0] * scale, kp[0].transpose(-1, -2))          # (H, P, P)
        ap = (torch.softmax(sp, dim=-1) @ vp[0])[None]
        # suffixes: every query sees the whole prefix, then its own suffix causally
        k_all = torch.cat((kp.expand(N, -1, -1, -1), ks), dim=2).reshape(N * H, P + S, self.hd)
        v_all = torch.cat((vp.expand(N, -1, -1, -1), vs), dim=2).reshape(N * H, P + S, self.hd)
        s = torch.baddbmm(mask_s, (qs * scale).reshape(N * H, S, self.hd), k_all.transpose(-1, -2))  # (N*H, S, P+S)
        as_ = (torch.softmax(s, dim=-1) @ v_all).view(N, H, S, self.hd)
        ap = ap.transpose(1, 2).reshape(1, P, -1)
        as_ = as_.transpose(1, 2).reshape(N, S, -1)
        return self.mlp_out(xp, ap), self.mlp_out(xs, as_)


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
        pos = torch.arange(start, start + n, dtype=torch.float64)
        f = pos[:, None] * self.inv_freq[None, :]
        emb = torch.cat((f, f), dim=-1)
        return emb.cos().float(), emb.sin().float()

    def forward(self, prefix, suffix, targets_at, targets):
        """prefix (P,), suffix (N, S) padded; targets_at (M, 2) [row, col] positions whose next
        token is targets (M,). Ids index self.embed_tokens, which during training holds only the
        rows of the ids that occur in the data (see main). Returns the mean cross-entropy
        and which argmaxes were right."""
        P, S = prefix.shape[0], suffix.shape[1]
        xp = self.embed_tokens(prefix)[None]
        xs = self.embed_tokens(suffix)
        rope_p, rope_s = self.rope(0, P), self.rope(P, S)
        mask_p = torch.full((P, P), float("-inf")).triu(1)    # additive causal masks, built once per step
        mask_s = torch.cat((torch.zeros(S, P), torch.full((S, S), float("-inf")).triu(1)), dim=1)
        for layer in self.layers:
            xp, xs = layer(xp, xs, rope_p, rope_s, mask_p, mask_s)
        h = rms_norm(xs[targets_at[:, 0], targets_at[:, 1]], self.norm, self.c["rms_norm_eps"])   # (M, hidden)
        logits = h @ self.embed_tokens.weight.t()                                                # (M, vocab), tied
        loss = F.cross_entropy(logits, targets)
        return loss, (logits.argmax(-1) == targets)

    def n_params(self):
        total = sum(p.numel() for p in self.parameters())
        return total, total - self.embed_tokens.weight.numel()


def batch_of(group, max_queries):
    suf = group["suffixes"][:max_queries]
    S = max(len(ids) for ids, _ in suf)
    suffix = torch.zeros(len(suf), S, dtype=torch.long)
    at, tg = [], []
    for r, (ids, n_prompt) in enumerate(suf):
        suffix[r, :len(ids)] = torch.tensor(list(ids), dtype=torch.long)
        for t in range(n_prompt, len(ids)):
            at.append((r, t - 1))
            tg.append(ids[t])
    return (torch.tensor(list(group["prefix"]), dtype=torch.long), suffix, torch.tensor(at, dtype=torch.long),
            torch.tensor(tg, dtype=torch.long))


def export(model, remap, out_dir):
    """HF directory: config.json, generation_config.json, model.safetensors (bf16). The compact
    embedding is scattered back to all vocab_size rows (ids that never occurred get row 0)."""
    os.makedirs(out_dir, exist_ok=True)
    c = model.c
    tensors = [("model.embed_tokens.weight", model.embed_tokens.weight.detach()[remap])]
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
                      [(n, "BF16", t.detach().float().numpy()) for n, t in tensors])
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(c, f, indent=2)
        f.write("\n")
    with open(os.path.join(out_dir, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": 151643, "eos_token_id": [151645, 151643], "pad_token_id": 151643,
                   "do_sample": False}, f, indent=2)
        f.write("\n")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        link = os.path.join(out_dir, name)
        if not os.path.lexists(link):
            os.symlink(os.path.relpath(os.path.join(ROOT, "resources/tokenizers/qwen3", name), out_dir), link)


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
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    random.seed(args.seed)
    np.random.seed(args.seed)
    c = dict(CONFIG)
    if args.config:
        c.update(json.loads(args.config))
        c["max_window_layers"] = c["num_hidden_layers"]

    with open(args.data, "rb") as f:
        data = pickle.load(f)
    groups = data["groups"]
    val, train = groups[:args.val_groups], groups[args.val_groups:]
    rng = random.Random(args.seed + args.data_seed_offset)

    # Compact vocabulary: only ~14k of the 151,936 ids occur in the data (prompts and answers).
    # Training runs on those rows plus one shared "unseen" row (index 0), so the embedding
    # gradient, the AdamW update and the lm_head matmul are ~10x smaller. The unseen row is never
    # a target, so the softmax pushes its logit down; at export every id that never occurred gets
    # that row, which keeps them from ever winning the argmax and gives unknown input ids one
    # trained embedding.
    seen = torch.zeros(c["vocab_size"], dtype=torch.bool)
    for g in groups:
        seen[torch.tensor(list(g["prefix"]), dtype=torch.long)] = True
        for ids, _ in g["suffixes"]:
            seen[torch.tensor(list(ids), dtype=torch.long)] = True
    vocab = seen.nonzero().flatten()
    remap = torch.zeros(c["vocab_size"], dtype=torch.long)
    remap[vocab] = torch.arange(1, len(vocab) + 1)
    print(json.dumps({"softmax_vocab": len(vocab) + 1}), flush=True)


    model = Model(dict(c, vocab_size=len(vocab) + 1))
    model.c = c
    # init: N(0, 0.02) everywhere, residual outputs scaled by 1/sqrt(2 * n_layers) (GPT-2 style)
    for n, p in model.named_parameters():
        if p.dim() == 2:
            std = 0.02 / math.sqrt(2 * c["num_hidden_layers"]) if n.endswith(("o_proj.weight", "down_proj.weight")) else 0.02
            nn.init.normal_(p, 0.0, std)
    if args.init_from:
        # continue from an exported directory (bf16 weights; optimizer state starts fresh)
        sys.path.insert(0, HERE)
        from reference_forward import read_safetensors
        w, _, _ = read_safetensors(os.path.join(args.init_from, "model.safetensors"))
        full = torch.tensor(w["model.embed_tokens.weight"], dtype=torch.float32)
        unseen = (remap == 0).nonzero().flatten()[0]
        sd = {"embed_tokens.weight": torch.cat((full[unseen][None], full[vocab])), "norm": w["model.norm.weight"]}
        names = {"input_layernorm": "input_layernorm.weight", "q_norm": "self_attn.q_norm.weight",
                 "k_norm": "self_attn.k_norm.weight", "post_attention_layernorm": "post_attention_layernorm.weight"}
        for k in model.state_dict():
            if k.startswith("layers."):
                _, i, rest = k.split(".", 2)
                base = rest.rsplit(".", 1)[0] if rest.endswith(".weight") else rest
                hf = names.get(base) or (("mlp." if "_proj" in base and base in ("gate_proj", "up_proj", "down_proj")
                                          else "self_attn.") + base + ".weight")
                sd[k] = w[f"model.layers.{i}.{hf}"]
        model.load_state_dict({k: torch.as_tensor(v, dtype=torch.float32) for k, v in sd.items()})
    non_emb = model.n_params()[1]
    total = non_emb + c["vocab_size"] * c["hidden_size"]
    print(json.dumps({"params": total, "non_embedding_params": non_emb, "train_groups": len(train),
                      "val_groups": len(val), "config": c}), flush=True)

    decay = [p for n, p in model.named_parameters() if p.dim() == 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8)

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
        return args.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, t))))

    def step_batch(g):
        prefix, suffix, at, tg = batch_of(g, args.max_queries)
        return remap[prefix], remap[suffix], at, remap[tg]

    def evaluate():
        """Teacher-forced loss and accuracy on held-back generated groups (not the test set)."""
        model.eval()
        tot, n, correct, n_ans, exact = 0.0, 0, 0, 0, 0
        with torch.no_grad():
            for g in val:
                prefix, suffix, at, tg = step_batch(g)
                loss, ok = model(prefix, suffix, at, tg)
                tot += loss.item() * ok.numel()
                n += ok.numel()
                correct += ok.sum().item()
                for r in range(suffix.shape[0]):
                    exact += int(ok[at[:, 0] == r].all())
                    n_ans += 1
        model.train()
        return {"val_loss": tot / n, "val_token_acc": correct / n, "val_answer_exact": exact / n_ans}

    log = []
    t0 = time.time()
    order = list(range(len(train)))
    rng.shuffle(order)
    step, pos, ema = 0, 0, None
    while step < args.steps:
        if pos == len(order):
            rng.shuffle(order)
            pos = 0
        g = train[order[pos]]
        pos += 1
        lr = lr_at(step, time.time() - t0)
        lrs.append(lr)
        for pg in opt.param_groups:
            pg["lr"] = lr
        loss, ok = model(*step_batch(g))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        ema = loss.item() if ema is None else 0.95 * ema + 0.05 * loss.item()
        elapsed = time.time() - t0
        if step % 10 == 0:
            print(f"step {step} loss {loss.item():.4f} ema {ema:.4f} acc {ok.float().mean().item():.3f} "
                  f"lr {lr:.2e} prefix {len(g['prefix'])} s/step {elapsed / step:.3f} t {elapsed:.0f}s",
                  flush=True)
        done = step == args.steps or (replay is not None and step == len(replay)) or \
            (args.time_limit_s and replay is None and elapsed > args.time_limit_s)
        if step % args.eval_every == 0 or done:
            ev = evaluate()
            ev.update({"step": step, "train_loss_ema": ema, "elapsed_s": round(time.time() - t0, 1)})
            log.append(ev)
            print("EVAL " + json.dumps(ev), flush=True)
        if args.export_every and step % args.export_every == 0 and not done:
            export(model, remap, os.path.join(args.out, f"ckpt-{step}"))
        if done:
            break
    export(model, remap, args.out)
    with open(os.path.join(args.out, "train_log.json"), "w") as f:
        json.dump({"steps": step, "train_seconds": round(time.time() - t0, 1), "params": total,
                   "non_embedding_params": non_emb, "seed": args.seed, "lr": args.lr, "warmup": args.warmup,
                   "max_queries": args.max_queries, "softmax_vocab": len(vocab) + 1, "config": c, "data_stats": data["stats"], "evals": log,
                   "lrs": lrs}, f)
    print(f"done: {step} steps in {time.time() - t0:.0f}s", flush=True)


if __name__ == "__main__":
    main()
