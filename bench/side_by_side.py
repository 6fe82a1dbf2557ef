#!/usr/bin/env python3
"""ContextCache vs llama.cpp on the same weights, the same prompt and the same machine, in one sitting.

Driven by bench/side_by_side.sh (which documents the options); see docs/benchmarks.md,
"Side by side with llama.cpp". Standard library only (numpy is needed by tools/export_gguf.py).

Every server is bound to 127.0.0.1 on a free port, every request loop has a fixed count, and every
process this script starts is stopped by its own pid before the script ends.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

# the helpers and the same-weights export, shared with bench/serve_concurrency.py
from side_by_side_common import Server, export_weights, figure, free_port, http, llama_version, log, machine_info, \
    run, set_name

set_name("side_by_side")


# ---------------------------------------------------------------- the two sides

class Bench:
    def __init__(self, a: argparse.Namespace):
        self.a = a
        self.work = Path(a.work)
        self.work.mkdir(parents=True, exist_ok=True)
        self.cli = str(Path(a.cc_bin) / "contextcache-cli")
        self.lb = Path(a.llama_bin)
        self.out: dict = {"benchmark": "side_by_side", "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        self.T = str(a.threads)
        self.R = a.runs

    # ---- setup
    def versions(self) -> None:
        self.out["llama_cpp"] = llama_version(self.lb, self.a.llama_commit)
        self.out["contextcache"] = {"commit": self.a.cc_commit, "bin": self.a.cc_bin, "weights": self.a.cc_weights,
                                    "kv_dtype": self.a.kv_dtype, "cc_cpu_isa_env": os.environ.get("CC_CPU_ISA")}
        self.out["machine"] = machine_info()
        self.out["threads"] = self.a.threads
        self.out["runs"] = self.R

    def weights(self) -> None:
        w = export_weights(cli=self.cli, model=self.a.model, work=self.work, repo=Path(self.a.repo),
                           python=self.a.python, gguf_py=self.a.gguf_py, llama_bin=self.lb, threads=self.T)
        self.hf, self.gguf_bf16, self.gguf_q8 = w["hf"], w["gguf_bf16"], w["gguf_q8"]
        self.out["weights"] = w["info"]

    def prompt(self) -> None:
        repo = Path(self.a.repo)
        self.tools_file = repo / "resources" / "toolsets" / f"tools_{self.a.tools}.json"
        self.system_file = repo / "resources" / "system_prompt.txt"
        out, _ = run([self.cli, "--model", str(self.hf), "--json", "render", "--tools", str(self.tools_file),
                      "--system-file", str(self.system_file), "--query", self.a.query])
        r = json.loads(out)
        self.prefix_ids, self.suffix_ids, self.full_ids = r["prefix_ids"], r["suffix_ids"], r["full_ids"]
        assert self.full_ids == self.prefix_ids + self.suffix_ids
        self.tools = json.loads(self.tools_file.read_text())
        self.check_ids = self.full_ids[:self.a.check_prompt]
        self.system = self.system_file.read_text()
        (self.work / "prompt.json").write_text(json.dumps(r))
        self.out["prompt"] = {"tools_file": f"resources/toolsets/{self.tools_file.name}",
                              "system_file": "resources/system_prompt.txt", "query": self.a.query,
                              "prefix_tokens": len(self.prefix_ids), "suffix_tokens": len(self.suffix_ids),
                              "full_tokens": len(self.full_ids), "group_key": r["group_key"]}
        log(f"prompt: {len(self.prefix_ids)} prefix + {len(self.suffix_ids)} suffix tokens")

    # ---- llama.cpp
    def llama_bench(self, args: list[str], label: str) -> list[dict]:
        cmd = [str(self.lb / "llama-bench"), "-t", self.T, "-r", str(self.R), "-o", "json"] + args
        log(f"llama-bench {label}: {' '.join(args)}")
        out, rss = run(cmd, rss=True)
        rows = json.loads(out)
        return [{"model": Path(r["model_filename"]).name, "type": r.get("model_type"), "n_prompt": r["n_prompt"],
                 "n_gen": r["n_gen"], "n_depth": r.get("n_depth", 0), "flash_attn": r.get("flash_attn"),
                 "tok_s": figure(r["samples_ts"], "tok/s"), "avg_ts": r["avg_ts"], "peak_rss_mib": rss}
                for r in rows]

    def llama_side(self) -> None:
        fa = self.a.llama_fa
        P, S = len(self.prefix_ids), len(self.suffix_ids)
        lb = {}
        lb["prefill"] = self.llama_bench(["-m", str(self.gguf_bf16), "-p", f"512,{self.a.prefill_long}", "-n", "0",
                                          "-fa", fa, "--no-warmup"], "prefill")
        lb["suffix_over_prefix"] = self.llama_bench(["-m", str(self.gguf_bf16), "-p", str(S), "-n", "0",
                                                     "-d", str(P), "-fa", fa, "--no-warmup"], "suffix over cached prefix")
        lb["decode"] = self.llama_bench(["-m", str(self.gguf_bf16), "-m", str(self.gguf_q8), "-p", "0",
                                         "-n", str(self.a.decode_tokens), "-d", f"0,{self.a.decode_depth}",
                                         "-fa", fa], "decode")
        self.out.setdefault("llama_cpp_results", {})["llama_bench"] = lb
        servers = {}
        for mode in self.a.llama_server_fa.split(","):
            servers[f"fa_{mode}"] = self.llama_server(mode)
        self.out["llama_cpp_results"]["server"] = servers

    def llama_server(self, fa: str) -> dict:
        slot_dir = self.work / "llama-slots"
        slot_dir.mkdir(exist_ok=True)
        port = free_port()
        cmd = [str(self.lb / "llama-server"), "-m", str(self.gguf_bf16), "-t", self.T, "-tb", self.T,
               "-c", str(self.a.ctx), "-np", "1", "-fa", fa, "--host", "127.0.0.1", "--port", str(port),
               "--slot-save-path", str(slot_dir), "--cache-ram", "0", "--no-webui"]
        srv = Server(f"llama-server (fa {fa})", cmd, port, "/health", self.work / f"llama-server-fa-{fa}.log")
        res: dict = {"cmd": cmd[1:], "startup_ms": srv.startup_ms}
        try:
            base = srv.base
            greedy = {"n_predict": 1, "temperature": 0.0, "top_k": 1}
            # full prompt, no reuse
            wall, server_ms, n_eval = [], [], []
            for i in range(self.R):
                r, ms = http("POST", base + "/completion", {"prompt": self.full_ids, "cache_prompt": False, **greedy})
                wall.append(ms)
                server_ms.append(r["timings"]["prompt_ms"])
                n_eval.append(r["timings"]["prompt_n"])
                log(f"  llama full TTFT run {i + 1}: {ms:.0f} ms (prompt_n {r['timings']['prompt_n']})")
            res["full_ttft_ms"] = figure(wall, "ms", server_prompt_ms=server_ms, prompt_n=n_eval)
            # the prefix, saved to a slot file
            r, ms = http("POST", base + "/completion", {"prompt": self.prefix_ids, "cache_prompt": True, **greedy})
            res["prefix_request_ms"] = ms  # reuses the slot KV of the last full run: not a prefill time
            fname = f"prefix-fa-{fa}.bin"
            r, ms = http("POST", base + "/slots/0?action=save", {"filename": fname})
            res["save"] = {"client_ms": ms, "server_ms": r.get("timings", {}).get("save_ms"),
                           "n_saved": r.get("n_saved"), "bytes": (slot_dir / fname).stat().st_size}
            # cache hits: erase, restore from the file (page cache warm), then the full prompt
            restore, resident, hit, evaluated, cached_n = [], [], [], [], []
            for i in range(self.R):
                http("POST", base + "/slots/0?action=erase")
                r, ms_restore = http("POST", base + "/slots/0?action=restore", {"filename": fname})
                assert r.get("n_restored", 0) >= len(self.prefix_ids) - 1, r
                c, ms_suffix = http("POST", base + "/completion", {"prompt": self.full_ids, "cache_prompt": True,
                                                                    **greedy})
                restore.append(ms_restore)
                resident.append(ms_suffix)
                hit.append(ms_restore + ms_suffix)
                evaluated.append(c["timings"]["prompt_n"])
                cached_n.append(c["timings"].get("cache_n"))
                log(f"  llama restore {ms_restore:.0f} ms + suffix {ms_suffix:.0f} ms (prompt_n {c['timings']['prompt_n']})")
            res["restore_ms"] = figure(restore, "ms")
            res["resident_suffix_ms"] = figure(resident, "ms", prompt_n=evaluated, cache_n=cached_n)
            res["restore_plus_suffix_ms"] = figure(hit, "ms")
            # same weights? greedy continuation of a short prompt, compared with ours in agreement()
            c, _ = http("POST", base + "/completion", {"prompt": self.check_ids, "cache_prompt": False,
                                                       "n_predict": self.a.check_tokens, "temperature": 0.0,
                                                       "top_k": 1, "return_tokens": True, "ignore_eos": True})
            res["greedy_check_tokens"] = c.get("tokens")
            res["peak_rss_mib"] = srv.peak_rss_mib()
        finally:
            srv.stop()
        return res

    # ---- ContextCache
    def cc_generate(self, ids: list[int], n_new: int) -> tuple[list[dict], float]:
        """The timings of R runs of `generate` in one process (--repeat R: the first cold, the rest
        warm, as llama-bench's -r R), and the process's peak RSS."""
        out, rss = run([self.cli, "--model", str(self.hf), "--threads", self.T, "--kv-dtype", self.a.kv_dtype, "--weights", self.a.cc_weights,
                        "--json", "generate", "--prompt-ids", ",".join(map(str, ids)), "--max-new-tokens", str(n_new),
                        "--ignore-eos", "--repeat", str(self.R)], rss=True)
        j = json.loads(out)
        return [r["timings"] for r in j.get("runs", [j])], rss

    def cc_side(self) -> None:
        res: dict = {"kv_dtype": self.a.kv_dtype}
        # the numerics the runs below use (instruction set, weights), as `info` reports them
        out, _ = run([self.cli, "--model", str(self.hf), "--threads", self.T, "--kv-dtype", self.a.kv_dtype,
                      "--weights", self.a.cc_weights, "--json", "info"])
        res["numerics"] = json.loads(out).get("numerics")
        out, _ = run([self.cli, "--model", str(self.hf), "--threads", self.T, "--kv-dtype", self.a.kv_dtype, "--weights", self.a.cc_weights, "--json",
                      "generate", "--prompt-ids", ",".join(map(str, self.check_ids)), "--max-new-tokens",
                      str(self.a.check_tokens), "--ignore-eos"])
        res["greedy_check_tokens"] = json.loads(out)["ids"]
        long_ids = (self.full_ids * (self.a.prefill_long // len(self.full_ids) + 1))[: self.a.prefill_long]
        # the long prefill and the decode at depth come from one `generate` (prefill N ids, then decode)
        # when --decode-depth equals --prefill-long (the default); otherwise two calls
        depth_ids = (self.full_ids * (self.a.decode_depth // len(self.full_ids) + 1))[: self.a.decode_depth]
        # each figure: R runs in one process, as llama-bench's -r R (runs[0] is the cold one)
        rss = []
        ts, m = self.cc_generate(self.full_ids[:512], 1)
        p512 = [512 / t["prefill_ms"] * 1000 for t in ts]
        rss.append(m)
        ts, m = self.cc_generate(depth_ids, self.a.decode_tokens)
        dd = [t["decode_tok_s"] for t in ts]
        rss.append(m)
        if depth_ids != long_ids:
            ts, m = self.cc_generate(long_ids, 1)
            rss.append(m)
        plong = [len(long_ids) / t["prefill_ms"] * 1000 for t in ts]
        ts, m = self.cc_generate(self.full_ids[:1], self.a.decode_tokens)
        d0 = [t["decode_tok_s"] for t in ts]
        rss.append(m)
        log(f"  cc generate: prefill 512 {p512}, {len(long_ids)} {plong} tok/s; decode d0 {d0}, d{len(depth_ids)} {dd} tok/s")
        res["generate"] = {
            "prefill_512_tok_s": figure(p512, "tok/s"),
            f"prefill_{len(long_ids)}_tok_s": figure(plong, "tok/s"),
            "decode_depth_0_tok_s": figure(d0, "tok/s", tokens=self.a.decode_tokens),
            f"decode_depth_{len(depth_ids)}_tok_s": figure(dd, "tok/s", tokens=self.a.decode_tokens),
            "peak_rss_mib_max": max(rss),
            "runs_per_process": self.R,
        }
        res["server"] = self.cc_server()
        self.out["contextcache_results"] = res

    def cc_serve(self, cache_dir: Path, tag: str) -> Server:
        port = free_port()
        cmd = [self.cli, "--model", str(self.hf), "--threads", self.T, "--kv-dtype", self.a.kv_dtype, "--weights", self.a.cc_weights,
               "--cache-dir", str(cache_dir), "serve", "--host", "127.0.0.1", "--port", str(port)]
        return Server(f"contextcache serve ({tag})", cmd, port, "/health", self.work / f"cc-serve-{tag}.log")

    def cc_server(self) -> dict:
        cache_dir = self.work / f"cc-cache-{self.a.kv_dtype}"
        if cache_dir.exists():
            shutil.rmtree(cache_dir)
        cache_dir.mkdir()
        body = {"tools": self.tools, "system": self.system, "query": self.a.query, "max_new_tokens": 1,
                "temperature": 0.0}
        res: dict = {}
        srv = self.cc_serve(cache_dir, "main")
        res["startup_ms"] = srv.startup_ms
        try:
            # compile first: /query sets the tools before answering, so a full-mode query on a new
            # tool set would also compile the group inside the timed request
            r, ms = http("POST", srv.base + "/tools", {"tools": self.tools, "system": self.system})
            res["compile"] = {"client_ms": ms, "compile_ms": r.get("compile_ms"), "prefix_tokens": r.get("prefix_tokens"),
                              "kv_bytes": r.get("kv_bytes"), "group_key": r.get("group_key"), "tier": r.get("tier")}
            key = r.get("group_key")
            if r.get("prefix_tokens") != len(self.prefix_ids):
                raise SystemExit(f"side_by_side: server prefix {r.get('prefix_tokens')} tokens, render {len(self.prefix_ids)}")
            # the group's file is written off the request path after the compile (hashing and
            # writing its 300+ MB): the hits are measured once it is done, as in steady serving
            group_file = cache_dir / "groups" / f"{key}.kv"
            deadline = time.time() + 120
            while not group_file.exists() and time.time() < deadline:
                time.sleep(0.2)
            wall, server_ttft, tiers = [], [], []
            for i in range(self.R):
                r, ms = http("POST", srv.base + "/query", dict(body, mode="cached"))
                wall.append(ms)
                server_ttft.append(r["timings"]["ttft_ms"])
                tiers.append(r.get("tier"))
                log(f"  cc memory hit run {i + 1}: {ms:.0f} ms (tier {r.get('tier')})")
            res["memory_hit_ms"] = figure(wall, "ms", server_ttft_ms=server_ttft, tiers=tiers)
            if any(t != "memory" for t in tiers):
                raise SystemExit(f"side_by_side: expected memory-tier hits, got {tiers}")
            # what serving the group costs (the compile and the hits), before the full-mode requests,
            # a measuring mode that holds each request's own K/V beside the group in the memory tier
            res["peak_rss_mib_compile_and_hits"] = srv.peak_rss_mib()
            wall, server_ttft, prefilled = [], [], []
            for i in range(self.R):
                r, ms = http("POST", srv.base + "/query", dict(body, mode="full"))
                wall.append(ms)
                server_ttft.append(r["timings"]["ttft_ms"])
                prefilled.append(r.get("prefix_tokens", 0) + r.get("suffix_tokens", 0))
                log(f"  cc full TTFT run {i + 1}: {ms:.0f} ms (server {r['timings']['ttft_ms']:.0f} ms)")
            res["full_ttft_ms"] = figure(wall, "ms", server_ttft_ms=server_ttft, prompt_tokens=prefilled)
            res["group_file_bytes"] = group_file.stat().st_size if group_file.exists() else None
            res["peak_rss_mib"] = srv.peak_rss_mib()
        finally:
            srv.stop()
        # The disk tier: a new server process on the same cache dir (memory tier empty, page cache warm);
        # one unrelated warm-up request (no tools), then the cached query links the group from its file.
        wall, server_ttft, tiers = [], [], []
        for i in range(self.R):
            srv = self.cc_serve(cache_dir, f"disk-{i + 1}")
            try:
                http("POST", srv.base + "/v1/chat/completions",
                     {"model": "x", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1})
                r, ms = http("POST", srv.base + "/query", dict(body, mode="cached"))
                wall.append(ms)
                server_ttft.append(r["timings"]["ttft_ms"])
                tiers.append(r.get("compile", {}).get("tier"))
                log(f"  cc disk hit run {i + 1}: {ms:.0f} ms (group from {tiers[-1]})")
            finally:
                srv.stop()
        res["disk_hit_ms"] = figure(wall, "ms", server_ttft_ms=server_ttft, tiers=tiers)
        if any(t != "disk" for t in tiers):
            raise SystemExit(f"side_by_side: expected the group to link from the disk tier, got {tiers}")
        return res

    def agreement(self) -> None:
        ours = self.out["contextcache_results"]["greedy_check_tokens"]
        agree = {}
        for k, v in self.out["llama_cpp_results"]["server"].items():
            theirs = v.get("greedy_check_tokens") or []
            n = 0
            while n < min(len(ours), len(theirs)) and ours[n] == theirs[n]:
                n += 1
            agree[k] = n
        self.out["greedy_agreement"] = {
            "prompt_tokens": len(self.check_ids), "generated": self.a.check_tokens, "leading_tokens_equal": agree,
            "note": "greedy tokens after the first check_prompt ids of the prompt, both sides; synthetic weights "
                    "give near-ties, so a late divergence is numerics, an early one a conversion error"}
        log(f"greedy agreement (leading equal tokens of {self.a.check_tokens}): {agree}")

    # ---- the table
    def table(self) -> str:
        o = self.out
        L = o["llama_cpp_results"]
        C = o["contextcache_results"]
        lb = L["llama_bench"]

        def pick(rows, **kw):
            return [r for r in rows if all(r.get(k) == v for k, v in kw.items())]

        def lbfig(rows, **kw) -> str:
            parts = []
            for r in pick(rows, **kw):
                parts.append(f"{r['tok_s']['median']:.1f} (fa {'on' if r['flash_attn'] in (1, True, 'on') else 'off'})")
            return ", ".join(parts) or "–"

        def best(rows, **kw):
            v = [r["tok_s"]["median"] for r in pick(rows, **kw)]
            return max(v) if v else None

        def ratio(ours, theirs, higher_better=True):
            if not ours or not theirs:
                return "–"
            return f"{ours / theirs:.2f}×" if higher_better else f"{theirs / ours:.2f}× faster" if theirs >= ours \
                else f"{ours / theirs:.2f}× slower"

        g = C["generate"]
        P, S = o["prompt"]["prefix_tokens"], o["prompt"]["suffix_tokens"]
        N = self.a.prefill_long
        D = self.a.decode_depth
        bf16 = self.gguf_bf16.name
        q8 = self.gguf_q8.name
        rows = []
        rows.append(("prefill 512 tokens (tok/s)", lbfig(lb["prefill"], n_prompt=512),
                     f"{g['prefill_512_tok_s']['median']:.1f} (`generate`)",
                     ratio(g["prefill_512_tok_s"]["median"], best(lb["prefill"], n_prompt=512))))
        rows.append((f"prefill {N:,} tokens (tok/s)", lbfig(lb["prefill"], n_prompt=N),
                     f"{g[f'prefill_{N}_tok_s']['median']:.1f} (`generate`)",
                     ratio(g[f"prefill_{N}_tok_s"]["median"], best(lb["prefill"], n_prompt=N))))
        srv = L["server"]

        def srvfig(key):
            return ", ".join(f"{v[key]['median']:,.0f} ms ({k.replace('_', ' ')})" for k, v in srv.items())

        def srvbest(key):
            return min(v[key]["median"] for v in srv.values())

        cs = C["server"]
        rows.append((f"full-prompt TTFT, {P + S:,} tokens, over HTTP", srvfig("full_ttft_ms"),
                     f"{cs['full_ttft_ms']['median']:,.0f} ms (`/query` full)",
                     ratio(cs["full_ttft_ms"]["median"], srvbest("full_ttft_ms"), False)))
        rows.append((f"cache hit, prefix in memory: {S}-token suffix over {P:,} cached tokens",
                     srvfig("resident_suffix_ms") + " (KV resident in the slot)",
                     f"{cs['memory_hit_ms']['median']:,.0f} ms (memory tier)",
                     ratio(cs["memory_hit_ms"]["median"], srvbest("resident_suffix_ms"), False)))
        rows.append(("cache hit from a file: restore + suffix", srvfig("restore_plus_suffix_ms") + " (slot restore)",
                     f"{cs['disk_hit_ms']['median']:,.0f} ms (disk tier, new process)",
                     ratio(cs["disk_hit_ms"]["median"], srvbest("restore_plus_suffix_ms"), False)))
        sop = lb["suffix_over_prefix"]
        rows.append((f"{S}-token suffix over {P:,} cached tokens, no HTTP (tok/s)",
                     lbfig(sop) + " (llama-bench -d)",
                     f"{S / (statistics.median(cs['memory_hit_ms']['server_ttft_ms']) / 1000):.1f} "
                     f"(server TTFT {statistics.median(cs['memory_hit_ms']['server_ttft_ms']):.0f} ms)",
                     ratio(S / (statistics.median(cs["memory_hit_ms"]["server_ttft_ms"]) / 1000), best(sop))))
        T = self.a.decode_tokens
        rows.append((f"decode, empty context ({T} tokens, tok/s)",
                     f"bf16 {lbfig(lb['decode'], model=bf16, n_depth=0)}; q8_0 {lbfig(lb['decode'], model=q8, n_depth=0)}",
                     f"{g['decode_depth_0_tok_s']['median']:.2f}",
                     ratio(g["decode_depth_0_tok_s"]["median"], best(lb["decode"], model=bf16, n_depth=0)) + " of bf16"))
        rows.append((f"decode at depth {D:,} ({T} tokens, tok/s)",
                     f"bf16 {lbfig(lb['decode'], model=bf16, n_depth=D)}; q8_0 {lbfig(lb['decode'], model=q8, n_depth=D)}",
                     f"{g[f'decode_depth_{D}_tok_s']['median']:.2f}",
                     ratio(g[f"decode_depth_{D}_tok_s"]["median"], best(lb["decode"], model=bf16, n_depth=D)) + " of bf16"))
        sv = next(iter(srv.values()))
        rows.append(("stored prefix (file)", f"{sv['save']['bytes'] / 1e6:,.1f} MB slot file (f16 KV), "
                     f"save {sv['save']['client_ms']:,.0f} ms, restore {sv['restore_ms']['median']:,.0f} ms",
                     f"{(cs['group_file_bytes'] or 0) / 1e6:,.1f} MB group file ({self.a.kv_dtype} KV), "
                     f"compile {cs['compile']['compile_ms']:,.0f} ms", ""))
        w = o["weights"]
        rows.append(("weights file", f"{w['gguf_bf16_bytes'] / 1e6:,.0f} MB bf16 GGUF, {w['gguf_q8_0_bytes'] / 1e6:,.0f} MB q8_0",
                     f"{w['safetensors_bytes'] / 1e6:,.0f} MB safetensors ({w['checkpoint_dtype']})", ""))
        llama_rss = [v["peak_rss_mib"] for v in srv.values() if v.get("peak_rss_mib")]
        serving_rss = cs.get("peak_rss_mib_compile_and_hits")
        rows.append(("peak RSS, server", ", ".join(f"{v['peak_rss_mib']:,.0f} MiB ({k.replace('_', ' ')})"
                                                     for k, v in srv.items() if v.get("peak_rss_mib")),
                     (f"{serving_rss:,.0f} MiB (compile and hits); " if serving_rss else "") +
                     f"{cs['peak_rss_mib']:,.0f} MiB after the full-mode requests too",
                     ratio(serving_rss, min(llama_rss)) if serving_rss and llama_rss else ""))
        lines = [f"| | llama.cpp {str(o['llama_cpp']['commit'])[:8]} | ContextCache {str(o['contextcache']['commit'])[:7]} | ratio |",
                 "|---|---|---|---|"]
        lines += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows]
        return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repo", required=True)
    ap.add_argument("--cc-bin", required=True)
    ap.add_argument("--cc-commit", default=None)
    ap.add_argument("--llama-bin", required=True)
    ap.add_argument("--llama-commit", default=None)
    ap.add_argument("--gguf-py", required=True)
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--work", required=True)
    ap.add_argument("--model", default="builtin:qwen3-0.6b")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--tools", type=int, default=20)
    ap.add_argument("--query", default="What's the weather in Oslo tomorrow, in Celsius?")
    ap.add_argument("--kv-dtype", default="f32")
    ap.add_argument("--cc-weights", default="stored", help="ContextCache --weights: stored|bf16|q8|bf16dot")
    ap.add_argument("--prefill-long", type=int, default=3000)
    ap.add_argument("--decode-tokens", type=int, default=64)
    ap.add_argument("--decode-depth", type=int, default=3000)
    ap.add_argument("--llama-fa", default="0,1", help="llama-bench -fa values")
    ap.add_argument("--llama-server-fa", default="on,off", help="llama-server -fa values, one server each")
    ap.add_argument("--ctx", type=int, default=4096)
    ap.add_argument("--check-prompt", type=int, default=3, help="prompt ids for the greedy agreement check")
    ap.add_argument("--check-tokens", type=int, default=16)
    ap.add_argument("--only", default="all", help="all | setup (weights and prompt only)")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    if a.runs < 3:
        log("note: fewer than 3 runs; medians of 3 or more are what the docs report")
    b = Bench(a)
    t0 = time.time()
    b.versions()
    b.weights()
    b.prompt()
    if a.only == "setup":
        Path(a.out).write_text(json.dumps(b.out, indent=2) + "\n")
        return 0
    b.llama_side()
    b.cc_side()
    b.agreement()
    b.out["machine"]["loadavg_end"] = Path("/proc/loadavg").read_text().split()[:3]
    b.out["wall_s"] = round(time.time() - t0, 1)
    b.out["table_md"] = b.table()
    Path(a.out).write_text(json.dumps(b.out, indent=2) + "\n")
    print(b.out["table_md"])
    log(f"wrote {a.out} ({b.out['wall_s']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
