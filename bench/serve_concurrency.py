#!/usr/bin/env python3
"""ContextCache `serve --parallel N` against `llama-server --parallel N` under 1..16 concurrent clients,
on the same weights, the same prompt and the same machine, in one sitting (issue 36, item 6).

Driven by bench/serve_concurrency.sh (which documents the options); see docs/benchmarks.md,
"Side by side with llama.cpp". Python standard library plus numpy (percentiles; numpy is also what
tools/export_gguf.py needs). The weights come from the same export as bench/side_by_side.py
(bench/side_by_side_common.py: contextcache-cli export, then tools/export_gguf.py).

For each client count C, in turn for each server configuration (interleaved, so drift on a shared
machine lands on every side alike):
  1. start the server (127.0.0.1, a free port, a fresh cache dir / a fresh process);
  2. warm it: one request (the cold one: ContextCache compiles the group, llama-server prefills the
     prompt into a slot), then one concurrent round of C requests with max_tokens 1 (every
     llama-server slot then holds the prompt, or loads it from its RAM prompt cache);
  3. the load: C client threads, started together, each sending --requests-per-client streamed
     OpenAI /v1/chat/completions requests one after another (closed loop): the 20-tool list as
     `tools`, the bundled system prompt as the system message, a short user query (the sample
     queries of tools_20.json, round robin, each led by "Request N. " with N new for every request
     unless --fresh-queries 0, so that no stored conversation covers it), greedy, `ignore_eos` so every reply has --max-tokens
     tokens, each server rendering the prompt with its own chat template (llama-server: --jinja,
     enable_thinking false, as ContextCache's Qwen3 format renders);
  4. read VmHWM (peak RSS) from /proc/PID/status, stop the server by its pid. The server's page
     faults and CPU seconds during the load (/proc/PID/stat, differenced) are recorded as
     `server_during_load`, also per generated token: fresh memory touched per step shows there,
     where this VM's noise does not reach.

Per request: TTFT = time from sending to the first delta with content, reasoning or a tool call
(the SSE stream parsed by hand); latency = time to `data: [DONE]`; the reply's completion tokens
(usage), cached prompt tokens, the server's own prefill/TTFT timing and, for ContextCache, the
`contextcache.batch` object. Per client count: aggregate tok/s = all completion tokens / the wall
time from the start of the load to the last reply; TTFT and latency p50/p95 over all requests.

Every server is bound to 127.0.0.1 on a free port, every loop has a fixed count, every request a
timeout, and every process this script starts is stopped by its own pid before the script ends.
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np

from side_by_side_common import Server, export_weights, free_port, http, llama_version, log, machine_info, run, \
    set_name

set_name("serve_concurrency")


# ---------------------------------------------------------------- one streamed request

def stream_chat(base: str, body: dict, timeout: float) -> dict:
    """POST a streamed chat completion; parse the SSE by hand. -> a record with times in ms from the
    send (ttft_ms: first content/reasoning/tool-call delta; first_event_ms: first chunk of any kind;
    latency_ms: [DONE]) and what the chunks carried. Never raises for a failed request: `error`."""
    assert base.startswith("http://127.0.0.1:"), base
    req = urllib.request.Request(base + "/v1/chat/completions", data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json", "Accept": "text/event-stream"})
    rec: dict = {"ok": False}
    t0 = time.perf_counter()
    rec["t_start"] = t0
    deadline = t0 + timeout
    first_event = first_token = None
    deltas = 0
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            for raw in r:
                now = time.perf_counter()
                if now > deadline:
                    raise TimeoutError(f"request took over {timeout:.0f} s")
                line = raw.decode("utf-8", "replace").strip()
                if not line.startswith("data:"):
                    continue
                payload = line[5:].strip()
                if payload == "[DONE]":
                    rec["ok"] = "error" not in rec
                    break
                ev = json.loads(payload)
                if "error" in ev:
                    rec["error"] = ev["error"]
                    continue
                if first_event is None:
                    first_event = now
                for ch in ev.get("choices") or []:
                    d = ch.get("delta") or {}
                    if d.get("content") or d.get("reasoning_content") or d.get("tool_calls"):
                        deltas += 1
                        if first_token is None:
                            first_token = now
                    if ch.get("finish_reason"):
                        rec["finish_reason"] = ch["finish_reason"]
                if ev.get("usage"):
                    rec["usage"] = ev["usage"]
                if ev.get("timings"):  # llama-server's
                    rec["timings"] = ev["timings"]
                if ev.get("contextcache"):
                    rec["contextcache"] = ev["contextcache"]
    except urllib.error.HTTPError as e:
        rec["error"] = f"HTTP {e.code}: {e.read()[:500]!r}"
    except (urllib.error.URLError, OSError, TimeoutError, ValueError) as e:
        rec["error"] = repr(e)
    t_end = time.perf_counter()
    rec["t_end"] = t_end
    rec["latency_ms"] = (t_end - t0) * 1000.0
    rec["first_event_ms"] = None if first_event is None else (first_event - t0) * 1000.0
    rec["ttft_ms"] = None if first_token is None else (first_token - t0) * 1000.0
    rec["deltas"] = deltas
    u = rec.get("usage") or {}
    rec["completion_tokens"] = u.get("completion_tokens")
    rec["prompt_tokens"] = u.get("prompt_tokens")
    rec["cached_tokens"] = (u.get("prompt_tokens_details") or {}).get("cached_tokens")
    if first_token is not None and rec["completion_tokens"] and rec["completion_tokens"] > 1:
        rec["decode_tok_s"] = (rec["completion_tokens"] - 1) / max(t_end - first_token, 1e-9)
    return rec


def listen_overflows() -> int | None:
    """TcpExt ListenOverflows + ListenDrops (the whole machine): a burst of connects that overflowed a
    server's accept queue costs its client a SYN retransmit (1 s), which would land in TTFT."""
    try:
        lines = Path("/proc/net/netstat").read_text().splitlines()
    except OSError:
        return None
    for names, values in zip(lines[::2], lines[1::2]):
        if names.startswith("TcpExt:"):
            d = dict(zip(names.split()[1:], values.split()[1:]))
            return int(d.get("ListenOverflows", 0)) + int(d.get("ListenDrops", 0))
    return None


def pct(values: list[float], qs=(50, 95)) -> dict:
    v = [x for x in values if x is not None]
    if not v:
        return {f"p{q}": None for q in qs} | {"mean": None, "min": None, "max": None, "n": 0}
    p = np.percentile(np.asarray(v, dtype=np.float64), qs)
    return {f"p{q}": round(float(x), 2) for q, x in zip(qs, p)} | {
        "mean": round(float(np.mean(v)), 2), "min": round(float(np.min(v)), 2), "max": round(float(np.max(v)), 2),
        "n": len(v)}


# ---------------------------------------------------------------- the benchmark

class Bench:
    def __init__(self, a: argparse.Namespace):
        self.request_lock = threading.Lock()
        self.request_number = 0
        self.a = a
        self.work = Path(a.work)
        self.work.mkdir(parents=True, exist_ok=True)
        self.cli = str(Path(a.cc_bin) / "contextcache-cli")
        self.lb = Path(a.llama_bin) if a.llama_bin else None
        self.T = str(a.threads)
        self.clients = [int(x) for x in a.clients.split(",") if x]
        self.sides = [s for s in a.sides.split(",") if s]
        for s in self.sides:
            if s not in ("cc", "cc-default", "llama"):
                raise SystemExit(f"serve_concurrency: unknown side {s} (cc, cc-default, llama)")
        self.out: dict = {"benchmark": "serve_concurrency", "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        self.results: dict = {}

    # ---- setup
    def setup(self) -> None:
        llama = "llama" in self.sides
        if llama:
            self.out["llama_cpp"] = llama_version(self.lb, self.a.llama_commit)
        self.out["contextcache"] = {"commit": self.a.cc_commit, "bin": self.a.cc_bin,
                                    "weights": self.a.cc_weights or "serve's default",
                                    "kv_dtype": self.a.kv_dtype or "serve's default"}
        self.out["machine"] = machine_info()
        self.out["threads"] = self.a.threads
        w = export_weights(cli=self.cli, model=self.a.model, work=self.work, repo=Path(self.a.repo),
                           python=self.a.python, gguf_py=self.a.gguf_py, quantize=False, gguf=llama)
        self.hf, self.gguf = w["hf"], w["gguf_bf16"]
        self.out["weights"] = w["info"]
        repo = Path(self.a.repo)
        self.tools_file = repo / "resources" / "toolsets" / f"tools_{self.a.tools}.json"
        self.tools = json.loads(self.tools_file.read_text())
        self.system = (repo / "resources" / "system_prompt.txt").read_text()
        self.queries = json.loads((repo / "resources" / "toolsets" / "sample_queries.json").read_text())[
            self.tools_file.name]
        self.out["load"] = {
            "tools_file": f"resources/toolsets/{self.tools_file.name}", "system_file": "resources/system_prompt.txt",
            "queries": self.queries, "query_order": "client i, request j: queries[(i * R + j) % len]",
            "fresh_queries": self.a.fresh_queries,
            "clients": self.clients, "requests_per_client": self.a.requests_per_client,
            "max_tokens": self.a.max_tokens, "ignore_eos": True, "greedy": True, "stream": True,
            "client_stagger_ms": self.a.stagger_ms,
            "burst": self.a.burst,
            "warmup": "1 request (max_tokens as the load), then 1 concurrent round of C requests (max_tokens 1)",
            "request_timeout_s": self.a.timeout}
        self.prompt_check(llama)

    def body(self, query: str, max_tokens: int, llama: bool) -> dict:
        b = {"model": "bench", "messages": [{"role": "system", "content": self.system},
                                            {"role": "user", "content": query}],
             "tools": self.tools, "max_tokens": max_tokens, "temperature": 0.0, "ignore_eos": True,
             "stream": True, "stream_options": {"include_usage": True}}
        if llama:
            # ContextCache's Qwen3 format renders enable_thinking=False (the empty think block); so does this
            b.update({"chat_template_kwargs": {"enable_thinking": False}, "cache_prompt": True})
        return b

    def prompt_check(self, llama: bool) -> None:
        """Each side's rendering of the first query's prompt: ContextCache's `render` ids against
        llama-server's /apply-template + /tokenize (a probe server, -np 1). Sizes llama-server's -c.
        Without the llama side: ContextCache's rendering and the canonical tool order only."""
        out, _ = run([self.cli, "--model", str(self.hf), "--json", "render", "--tools", str(self.tools_file),
                      "--system-file", str(Path(self.a.repo) / "resources" / "system_prompt.txt"),
                      "--query", self.queries[0]])
        r = json.loads(out)
        ours = r["full_ids"]
        # ContextCache renders the tools in its canonical order (by name: the group does not depend on
        # the order); send them in that order, so llama-server's template renders the same ids
        pos = {t["function"]["name"]: r["prefix_text"].find(f'"name": "{t["function"]["name"]}"') for t in self.tools}
        if all(v >= 0 for v in pos.values()):
            self.tools = sorted(self.tools, key=lambda t: pos[t["function"]["name"]])
        if not llama:
            self.out["prompt_check"] = {
                "query": self.queries[0], "contextcache_render_tokens": len(ours),
                "contextcache_prefix_tokens": len(r["prefix_ids"]),
                "tools_sent_in_order": [t["function"]["name"] for t in self.tools], "llama_side": "not run"}
            log(f"prompt: ContextCache {len(ours)} ids ({len(r['prefix_ids'])} prefix); no llama side")
            return
        port = free_port()
        cmd = [str(self.lb / "llama-server"), "-m", str(self.gguf), "-t", self.T, "-c", "8192", "-np", "1",
               "--jinja", "--host", "127.0.0.1", "--port", str(port), "--no-webui"]
        srv = Server("llama-server (template probe)", cmd, port, "/health", self.work / "llama-probe.log")
        lens = []
        try:
            theirs = None
            for q in self.queries:
                b = self.body(q, 1, True)
                b.pop("stream"), b.pop("stream_options")
                t, _ = http("POST", srv.base + "/apply-template", b)
                ids, _ = http("POST", srv.base + "/tokenize", {"content": t["prompt"], "add_special": False,
                                                               "parse_special": True})
                lens.append(len(ids["tokens"]))
                if theirs is None:
                    theirs = ids["tokens"]
                    (self.work / "llama-prompt-0.txt").write_text(t["prompt"])
        finally:
            srv.stop()
        n = 0
        while n < min(len(ours), len(theirs)) and ours[n] == theirs[n]:
            n += 1
        self.llama_prompt_max = max(lens)
        # per slot: the longest prompt + the reply + a margin, rounded up to 256
        need = self.llama_prompt_max + self.a.max_tokens + 64
        self.slot_ctx = self.a.slot_ctx or ((need + 255) // 256) * 256
        self.out["prompt_check"] = {
            "query": self.queries[0], "contextcache_render_tokens": len(ours),
            "contextcache_prefix_tokens": len(r["prefix_ids"]), "llama_template_tokens": len(theirs),
            "tools_sent_in_order": [t["function"]["name"] for t in self.tools],
            "leading_tokens_equal": n, "same_ids": ours == theirs, "llama_prompt_tokens_per_query": lens,
            "llama_slot_ctx": self.slot_ctx}
        log(f"prompt: ContextCache {len(ours)} ids ({len(r['prefix_ids'])} prefix), llama-server {len(theirs)}; "
            f"{n} leading ids equal{' (identical)' if ours == theirs else ''}; llama slot ctx {self.slot_ctx}")

    # ---- servers
    def start(self, side: str, clients: int, tag: str) -> tuple[Server, dict]:
        if side.startswith("llama"):
            fa = side.split("-fa-")[1]
            port = free_port()
            cmd = [str(self.lb / "llama-server"), "-m", str(self.gguf), "-t", self.T, "-tb", self.T,
                   "-c", str(self.slot_ctx * clients), "-np", str(clients), "-cb", "-fa", fa, "--jinja",
                   "--host", "127.0.0.1", "--port", str(port), "--no-webui"] + self.a.llama_extra.split()
            srv = Server(f"llama-server -np {clients} -fa {fa}", cmd, port, "/health",
                         self.work / f"{tag}.log")
            info = {"cmd": cmd[1:], "parallel": clients, "ctx": self.slot_ctx * clients, "flash_attn": fa}
            m = re.search(r"n_slots = (\d+), n_ctx_slot = (\d+), kv_unified = '(\w+)'",
                          srv.log_path.read_text(errors="replace"))
            if m:
                info["reported"] = {"n_slots": int(m.group(1)), "n_ctx_slot": int(m.group(2)),
                                    "kv_unified": m.group(3) == "true"}
            return srv, info
        cache_dir = self.work / f"cc-cache-{tag}"
        if cache_dir.exists():
            shutil.rmtree(cache_dir)
        cache_dir.mkdir()
        cmd = [self.cli, "--model", str(self.hf), "--threads", self.T]
        if self.a.kv_dtype:
            cmd += ["--kv-dtype", self.a.kv_dtype]
        if self.a.cc_weights:
            cmd += ["--weights", self.a.cc_weights]
        cmd += ["--cache-dir", str(cache_dir), "--json", "serve", "--host", "127.0.0.1", "--port", "0",
                "--request-timeout-s", str(int(self.a.timeout)), "--max-queue", "64"]
        if side == "cc":
            cmd += ["--parallel", str(clients)]
        cmd += self.a.cc_extra.split()
        srv = Server(f"contextcache serve ({tag})", cmd, None, "/health", self.work / f"{tag}.log")
        return srv, {"cmd": cmd[1:], "announced": srv.announced,
                     "parallel": (srv.announced or {}).get("parallel")}

    # ---- one server at one client count
    def one(self, side: str, clients: int) -> dict:
        tag = f"{side}-c{clients}"
        llama = side.startswith("llama")
        srv, res = self.start(side, clients, tag)
        res["startup_ms"] = round(srv.startup_ms, 1)
        res["rss_mib_after_start"] = (srv.status_kib("VmRSS") or 0) / 1024.0
        try:
            if side == "cc-default":
                cc = self.results.get("cc", {}).get(str(clients))
                if res["parallel"] == clients and cc is not None:
                    log(f"  {tag}: default parallel {res['parallel']} = the client count: same as cc-c{clients}")
                    return {"same_as": f"cc at {clients} clients", "parallel": res["parallel"], "cmd": res["cmd"]}
            # warm-up: the cold request, then a concurrent round so every slot / runner has run once
            cold = stream_chat(srv.base, self.body(self.queries[0], self.a.max_tokens, llama), self.a.timeout)
            if not cold["ok"]:
                raise SystemExit(f"serve_concurrency: {tag} warm-up failed: {cold.get('error')}; see {srv.log_path}")
            round_recs = self.load(srv.base, clients, 1, 1, llama)
            bad = [r.get("error") for r in round_recs if not r["ok"]]
            if bad:
                raise SystemExit(f"serve_concurrency: {tag} warm-up round failed: {bad[:3]}; see {srv.log_path}")
            res["warmup"] = {"cold": self.slim(cold),
                             "round_ms": round((max(r["t_end"] for r in round_recs)
                                                - min(r["t_start"] for r in round_recs)) * 1000.0, 1),
                             "round_ttft_ms": pct([r["ttft_ms"] for r in round_recs]),
                             "round": [self.slim(r) for r in round_recs]}
            res["rss_mib_after_warmup"] = (srv.status_kib("VmRSS") or 0) / 1024.0
            load0 = Path("/proc/loadavg").read_text().split()[:3]
            lo0 = listen_overflows()
            pf0 = srv.cpu_and_faults()
            t0 = time.perf_counter()
            recs = self.load(srv.base, clients, self.a.requests_per_client, self.a.max_tokens, llama)
            pf1 = srv.cpu_and_faults()
            lo1 = listen_overflows()
            # the server's page faults and CPU time during the load, and per generated token
            if pf0 is not None and pf1 is not None:
                during = {k: round(pf1[k] - pf0[k], 3) for k in pf0}
                n_tokens = sum(r.get("completion_tokens") or 0 for r in recs)
                if n_tokens:
                    during["minor_faults_per_token"] = round(during["minor_faults"] / n_tokens, 1)
                    during["cpu_ms_per_token"] = round(1000.0 * (during["cpu_user_s"] + during["cpu_sys_s"]) / n_tokens, 2)
                res["server_during_load"] = during
            res["listen_overflows_during_load"] = None if lo0 is None or lo1 is None else lo1 - lo0
            res.update(self.summarize(recs, llama))
            res["load_wall_s_incl_threads"] = round(time.perf_counter() - t0, 2)
            res["loadavg_before_after"] = [load0, Path("/proc/loadavg").read_text().split()[:3]]
            res["peak_rss_mib"] = srv.peak_rss_mib()
            res["requests"] = [self.slim(r) for r in recs]
        finally:
            srv.stop()
        s = res
        log(f"  {tag}: {s['aggregate_tok_s']:.1f} tok/s aggregate, TTFT p50 {s['ttft_ms']['p50']} p95 "
            f"{s['ttft_ms']['p95']} ms, latency p50 {s['latency_ms']['p50']} p95 {s['latency_ms']['p95']} ms, "
            f"peak RSS {s['peak_rss_mib']:.0f} MiB, {s['errors']} errors, {s['cache_hits']}/{s['n']} hits")
        return res

    def load(self, base: str, clients: int, per_client: int, max_tokens: int, llama: bool) -> list[dict]:
        recs: list[list[dict]] = [[] for _ in range(clients)]
        barrier = threading.Barrier(clients)

        def client(i: int) -> None:
            barrier.wait()
            # a few ms apart, so the burst of connects does not overflow a server's accept queue
            # (a dropped SYN costs 1 s); listen_overflows_during_load shows whether any did
            time.sleep(i * self.a.stagger_ms / 1000.0)
            for j in range(per_client):
                if self.a.burst and j > 0:
                    # every round arrives together: each client waits for the others' replies
                    barrier.wait(self.a.timeout)
                    time.sleep(i * self.a.stagger_ms / 1000.0)
                q = self.queries[(i * per_client + j) % len(self.queries)]
                if self.a.fresh_queries:
                    # a lead-in no earlier request had, right after the group prefix: no stored
                    # conversation covers the query, so every request is a group hit that
                    # prefills its whole query suffix (the case the TTFT targets are about)
                    with self.request_lock:
                        self.request_number += 1
                        q = f"Request {self.request_number}. {q}"
                r = stream_chat(base, self.body(q, max_tokens, llama), self.a.timeout)
                r["client"], r["index"], r["query"] = i, j, q
                recs[i].append(r)

        threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(self.a.timeout * per_client + 60)
        if any(t.is_alive() for t in threads):
            raise SystemExit("serve_concurrency: a client thread did not finish in time")
        return [r for rs in recs for r in rs]

    @staticmethod
    def slim(r: dict) -> dict:
        keep = {k: r.get(k) for k in ("client", "index", "ok", "error", "ttft_ms", "first_event_ms", "latency_ms",
                                      "completion_tokens", "prompt_tokens", "cached_tokens", "decode_tok_s",
                                      "finish_reason", "deltas") if r.get(k) is not None}
        for k in ("ttft_ms", "first_event_ms", "latency_ms", "decode_tok_s"):
            if k in keep:
                keep[k] = round(keep[k], 2)
        if "t_start" in r:
            keep["start_ms"] = round(r["t_start"] * 1000.0, 1)  # perf_counter: only differences mean anything
        t = r.get("timings")
        if t:
            keep["llama_timings"] = {k: t.get(k) for k in ("cache_n", "prompt_n", "prompt_ms", "predicted_n",
                                                            "predicted_ms") if k in t}
        c = r.get("contextcache")
        if c:
            keep["contextcache"] = {k: c.get(k) for k in ("tier", "cache_hit", "prompt_tokens", "group_reused_tokens",
                                                          "prefilled_tokens", "queue_ms", "batch") if k in c}
            tm = c.get("timings") or {}
            keep["contextcache"]["timings"] = {k: tm.get(k) for k in ("ttft_ms", "tokenize_ms", "lookup_ms",
                                                                      "conversation_link_ms", "link_ms", "prefill_ms",
                                                                      "decode_ms", "compile_ms") if k in tm}
        return keep

    def summarize(self, recs: list[dict], llama: bool) -> dict:
        ok = [r for r in recs if r["ok"]]
        wall = (max(r["t_end"] for r in recs) - min(r["t_start"] for r in recs)) if recs else 0.0
        toks = sum(r["completion_tokens"] or 0 for r in ok)
        s: dict = {"n": len(recs), "errors": len(recs) - len(ok),
                   "error_samples": [r.get("error") for r in recs if not r["ok"]][:5],
                   "wall_s": round(wall, 3), "completion_tokens": toks,
                   "aggregate_tok_s": round(toks / wall, 2) if wall > 0 else None,
                   "short_replies": sum(1 for r in ok if r["completion_tokens"] != self.a.max_tokens),
                   "ttft_ms": pct([r["ttft_ms"] for r in ok]),
                   "first_event_ms": pct([r["first_event_ms"] for r in ok]),
                   "latency_ms": pct([r["latency_ms"] for r in ok]),
                   "per_request_decode_tok_s": pct([r.get("decode_tok_s") for r in ok]),
                   "prompt_tokens": sorted({r["prompt_tokens"] for r in ok if r["prompt_tokens"] is not None})}
        # a cache hit: the reply reused the prefix (cached tokens within 64 of the prompt)
        def hit(r: dict) -> bool:
            if llama:
                t = r.get("timings") or {}
                cached = t.get("cache_n", r.get("cached_tokens"))
            else:
                cached = r.get("cached_tokens")
            return bool(cached and r.get("prompt_tokens") and cached >= r["prompt_tokens"] - 64)
        s["cache_hits"] = sum(1 for r in ok if hit(r))
        if llama:
            s["server_prompt_ms"] = pct([(r.get("timings") or {}).get("prompt_ms") for r in ok])
            s["server_prompt_n"] = pct([(r.get("timings") or {}).get("prompt_n") for r in ok])
            s["server_cache_n"] = pct([(r.get("timings") or {}).get("cache_n") for r in ok])
        else:
            cc = [r.get("contextcache") or {} for r in ok]
            s["server_ttft_ms"] = pct([(c.get("timings") or {}).get("ttft_ms") for c in cc])
            s["queue_ms_mean"] = pct([c.get("queue_ms") for c in cc])["mean"]
            s["tiers"] = {t: sum(1 for c in cc if c.get("tier") == t) for t in sorted({str(c.get("tier")) for c in cc})}
            b = [c.get("batch") or {} for c in cc]
            s["batch_means"] = {k: pct([x.get(k) for x in b])["mean"]
                                for k in ("running_at_start", "steps", "max_sequences", "mean_sequences", "max_rows",
                                          "step_wait_ms")}
        return s

    # ---- the sitting
    def sweep(self) -> None:
        order = []
        for s in self.sides:
            if s == "llama":
                order += [f"llama-fa-{fa}" for fa in self.a.llama_server_fa.split(",") if fa]
            else:
                order.append(s)
        self.out["servers_order"] = order
        for c in self.clients:
            for side in order:
                log(f"{side} at {c} client{'s' if c > 1 else ''}")
                self.results.setdefault(side, {})[str(c)] = self.one(side, c)
                self.out["results"] = self.results
                self.write()  # after every server, so an interrupted sitting keeps what it measured

    def write(self) -> None:
        Path(self.a.out).write_text(json.dumps(self.out, indent=1) + "\n")

    def targets_and_table(self) -> None:
        R = self.results

        def get(side, c):
            v = R.get(side, {}).get(str(c))
            if v and "same_as" in v:
                v = R.get("cc", {}).get(str(c))
            return v

        llama_sides = [s for s in R if s.startswith("llama")]
        rows = ["| clients | server | aggregate tok/s | TTFT p50 / p95 ms | latency p50 / p95 ms | peak RSS MiB | "
                "cache hits | mean seqs/step |", "|---:|---|---:|---:|---:|---:|---:|---:|"]
        for c in self.clients:
            for side in R:
                v = R[side].get(str(c))
                if not v:
                    continue
                if "same_as" in v:
                    rows.append(f"| {c} | {self.label(side, v)} | (same as --parallel {c}) | | | | | |")
                    continue
                bm = (v.get("batch_means") or {}).get("mean_sequences")
                rows.append(f"| {c} | {self.label(side, v)} | {v['aggregate_tok_s']:.1f} | "
                            f"{v['ttft_ms']['p50']:,.0f} / {v['ttft_ms']['p95']:,.0f} | "
                            f"{v['latency_ms']['p50']:,.0f} / {v['latency_ms']['p95']:,.0f} | "
                            f"{v['peak_rss_mib']:,.0f} | {v['cache_hits']}/{v['n']} | "
                            f"{'' if bm is None else f'{bm:.2f}'} |")
        self.out["table_md"] = "\n".join(rows)
        t: dict = {}
        c1, c8 = get("cc", 1), get("cc", 8)
        if c1 and c8:
            t["cc_aggregate_8_over_1"] = round(c8["aggregate_tok_s"] / c1["aggregate_tok_s"], 2)
            t["cc_ttft_p95_at_8_over_idle_p50"] = round(c8["ttft_ms"]["p95"] / c1["ttft_ms"]["p50"], 2)
        l8 = [get(s, 8) for s in llama_sides if get(s, 8)]
        if c8 and l8:
            best = max(l8, key=lambda v: v["aggregate_tok_s"])
            t["cc_aggregate_8_over_llama_best_8"] = round(c8["aggregate_tok_s"] / best["aggregate_tok_s"], 2)
        if t:
            t["goals"] = {"cc_aggregate_8_over_1": ">= 4", "cc_aggregate_8_over_llama_best_8": ">= 1.2",
                          "cc_ttft_p95_at_8_over_idle_p50": "<= 3"}
        self.out["targets"] = t

    @staticmethod
    def label(side: str, v: dict) -> str:
        if side == "cc":
            return f"ContextCache --parallel {v.get('parallel')}"
        if side == "cc-default":
            return f"ContextCache default (--parallel {v.get('parallel')})"
        return f"llama-server -np {v.get('parallel')} -fa {v.get('flash_attn')}"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repo", required=True)
    ap.add_argument("--cc-bin", required=True)
    ap.add_argument("--cc-commit", default=None)
    ap.add_argument("--llama-bin", default="")
    ap.add_argument("--llama-commit", default=None)
    ap.add_argument("--gguf-py", default="")
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--work", required=True)
    ap.add_argument("--model", default="builtin:qwen3-0.6b")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--clients", default="1,2,4,8,16")
    ap.add_argument("--requests-per-client", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--tools", type=int, default=20)
    ap.add_argument("--sides", default="cc,cc-default,llama", help="cc (--parallel = clients), cc-default, llama")
    ap.add_argument("--llama-server-fa", default="on,off", help="one llama-server per value")
    ap.add_argument("--llama-extra", default="", help="more llama-server arguments, space-separated")
    ap.add_argument("--cc-extra", default="", help="more contextcache-cli serve arguments, space-separated")
    ap.add_argument("--slot-ctx", type=int, default=0, help="llama-server context per slot (0: prompt + reply + 64)")
    ap.add_argument("--kv-dtype", default="", help="ContextCache --kv-dtype (empty: serve's default)")
    ap.add_argument("--cc-weights", default="", help="ContextCache --weights (empty: serve's default)")
    ap.add_argument("--timeout", type=float, default=900, help="seconds per request")
    ap.add_argument("--stagger-ms", type=float, default=2.0, help="client i starts i x this after the others")
    ap.add_argument("--burst", action="store_true",
                    help="rounds: every client's next request waits until all clients have their replies, so "
                         "each round's requests arrive together (with the stagger inside the round)")
    ap.add_argument("--fresh-queries", type=int, default=1,
                    help="1: each request's query gets a lead-in no earlier request had (every request a group hit "
                         "with its whole query to prefill); 0: the sample queries as they are (repeats can hit a "
                         "stored conversation and prefill one token)")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    b = Bench(a)
    t0 = time.time()
    b.setup()
    b.sweep()
    b.targets_and_table()
    b.out["machine"]["loadavg_end"] = Path("/proc/loadavg").read_text().split()[:3]
    b.out["wall_s"] = round(time.time() - t0, 1)
    b.write()
    print(b.out["table_md"])
    if b.out.get("targets"):
        print(json.dumps(b.out["targets"]))
    errors = sum(v.get("errors", 0) for side in b.results.values() for v in side.values())
    log(f"wrote {a.out} ({b.out['wall_s']} s){f'; {errors} failed requests' if errors else ''}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
