#!/usr/bin/env python3
"""A soak of `contextcache-cli serve` (issue 39, item 3): a bounded mixed load for a given duration,
the server's RSS, threads and descriptors sampled, every reply checked.

The server runs with small memory and disk budgets (--host-budget-bytes, --disk-budget-bytes), so
groups and conversation states are evicted and recompiled all along. --clients threads, each in a
closed loop until the duration is over, pick one of:
  chat        one turn over a tool set (bundled sets, seeded subsets, and edits of the 10-tool set:
              a tool removed, a description changed, a tool added), one of a few queries;
  convo       a three-message conversation (user, the assistant's earlier reply, user);
  stream_cut  a streamed request whose client hangs up after the first bytes (a cancel);
  drop        a request whose client closes the socket before the reply (a disconnect);
  malformed   a body that is not JSON, or a known field of the wrong type (must be 400);
  oversized   a body over --max-body-bytes (must be 413);
  info        GET /health, /status, /v1/models, /metrics (must be 200).
Every chat and convo reply must equal the CLI's answer to the same request (greedy: `query` or
`chat --messages`, computed beforehand into a separate cache directory): the same tool call (name
and arguments), or the same text. A 429 (queue full) is a clear 4xx and counted, not an error.

Every --sample-s seconds: VmRSS and Threads from /proc/PID/status, entries of /proc/PID/fd. After
the warm-up (--warmup-s) and at the end the load pauses and, once the server is idle, threads and
descriptors are read: the end's must not exceed the warm-up's (descriptors: + 2 at most, what a
health check in flight holds). RSS growth = (median of the last 10% of samples) / (median of the
first 10% after the warm-up) - 1, at most --max-rss-growth (5%) unless under --min-rss-growth-kib (16 MiB). At the end the group files must be
within the disk budget, give or take one group; the memory tier's bytes (/status) are recorded
against its budget (not yet a failure: see docs/testing.md#soak). Then the server is stopped
(SIGINT, exit 0 expected) and `cache verify` must find its directory consistent.

Prints one JSON object (also to --out); exit 1 when a check fails. Standard library only.

usage: soak.py --cli build/app/contextcache-cli --duration-s 1800 [--clients 4] [--out FILE.json]
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import socket
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness_common import Cli, Server, finish, git_commit, group_dir_state, http_json, log, machine_info, \
    tool_sets  # noqa: E402

NAME = "soak"
SYSTEM = "You are a helpful assistant with tools."
QUERIES = ["What is the weather in Paris?", "Send an email to bob about lunch", "Convert 20 USD to EUR",
           "Find flights from Oslo to Rome tomorrow"]
MAX_TOKENS = 32
OPS = {"chat": 8, "convo": 3, "stream_cut": 1, "drop": 1, "malformed": 1, "oversized": 1, "info": 1}


def edited_sets(src: Path, out_dir: Path) -> list[Path]:
    """Edits of the 10-tool set, the kinds a user makes: one removed, one described differently,
    one added from the 50."""
    base = json.loads((src / "resources/toolsets/tools_10.json").read_text())
    extra = json.loads((src / "resources/toolsets/tools_50.json").read_text())
    names = {t["function"]["name"] if "function" in t else t["name"] for t in base}
    added = next(t for t in extra if (t["function"]["name"] if "function" in t else t["name"]) not in names)
    changed = json.loads(json.dumps(base))
    fn = changed[3]["function"] if "function" in changed[3] else changed[3]
    fn["description"] = fn.get("description", "") + " (edited)"
    out = []
    for name, tools in (("edit_removed", base[1:]), ("edit_changed", changed), ("edit_added", base + [added])):
        p = out_dir / f"{name}.json"
        p.write_text(json.dumps(tools))
        out.append(p)
    return out


def expected_answer(out: dict) -> dict:
    call = out.get("tool_call")
    return {"call": [call["name"], call["arguments"]] if call else None, "text": out["text"]}


def reply_answer(resp: dict) -> dict:
    msg = resp["choices"][0]["message"]
    calls = msg.get("tool_calls") or []
    if calls:
        f = calls[0]["function"]
        return {"call": [f["name"], json.loads(f["arguments"])], "text": None}
    return {"call": None, "text": msg.get("content") or ""}


def same(got: dict, want: dict) -> bool:
    """The same generation. A call the server parsed must be the CLI's call; otherwise the server's
    content must be the CLI's text (the CLI's `tool_call` also reads a call cut short by max_tokens,
    which the server returns as content, so the text is what both have in full)."""
    if got["call"]:
        return got["call"] == want["call"]
    return got["text"] == want["text"]


def raw_request(port: int, body: bytes, path: str = "/v1/chat/completions", read_bytes: int = 0,
                timeout: float = 30) -> bytes:
    """Send a request over a plain socket, read at most read_bytes of the answer, hang up."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                  f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        got = b""
        while len(got) < read_bytes:
            chunk = s.recv(read_bytes - len(got))
            if not chunk:
                break
            got += chunk
        return got
    finally:
        s.close()


class Load:
    def __init__(self, args, port: int, sets: list[Path], tools_json: list, expected: dict, convos: list):
        self.args, self.port, self.sets, self.tools_json = args, port, sets, tools_json
        self.expected, self.convos = expected, convos
        self.base = f"http://127.0.0.1:{port}"
        self.lock = threading.Lock()
        self.counts: dict[str, dict[str, int]] = {}
        self.errors: list[str] = []
        self.pause = threading.Event()   # set: clients stop at their next request and wait
        self.stop = threading.Event()
        self.idle = threading.Semaphore(0)

    def count(self, op: str, outcome: str) -> None:
        with self.lock:
            self.counts.setdefault(op, {})
            self.counts[op][outcome] = self.counts[op].get(outcome, 0) + 1

    def error(self, msg: str) -> None:
        with self.lock:
            self.errors.append(msg)
        log(NAME, "ERROR " + msg)

    def check_chat(self, op: str, status: int, resp, want: dict, what: str) -> None:
        if status == 429:
            self.count(op, "429")
        elif status != 200:
            self.count(op, f"unexpected_{status}")
            self.error(f"{op} {what}: status {status}: {str(resp)[:300]}")
        elif not same(reply_answer(resp), want):
            self.count(op, "wrong")
            self.error(f"{op} {what}: reply {reply_answer(resp)} != CLI's {want}")
        else:
            self.count(op, "ok")

    def one(self, rng: random.Random) -> None:
        op = rng.choices(list(OPS), list(OPS.values()))[0]
        try:
            if op == "chat":
                ti, qi = rng.randrange(len(self.sets)), rng.randrange(len(QUERIES))
                body = {"model": "m", "messages": [{"role": "system", "content": SYSTEM},
                                                   {"role": "user", "content": QUERIES[qi]}],
                        "tools": self.tools_json[ti], "max_tokens": MAX_TOKENS}
                status, resp = http_json(self.base + "/v1/chat/completions", body, timeout=120)
                self.check_chat(op, status, resp, self.expected[(ti, qi)], f"{self.sets[ti].name}/{qi}")
            elif op == "convo":
                ci = rng.randrange(len(self.convos))
                ti, messages, want = self.convos[ci]
                body = {"model": "m", "messages": messages, "tools": self.tools_json[ti], "max_tokens": MAX_TOKENS}
                status, resp = http_json(self.base + "/v1/chat/completions", body, timeout=120)
                self.check_chat(op, status, resp, want, f"convo {ci}")
            elif op in ("stream_cut", "drop"):
                ti = rng.randrange(len(self.sets))
                body = {"model": "m", "messages": [{"role": "system", "content": SYSTEM},
                                                   {"role": "user", "content": rng.choice(QUERIES)}],
                        "tools": self.tools_json[ti], "max_tokens": 200, "ignore_eos": True,
                        "stream": op == "stream_cut"}
                raw_request(self.port, json.dumps(body).encode(), read_bytes=64 if op == "stream_cut" else 0)
                self.count(op, "sent")
            elif op == "malformed":
                body = rng.choice([b"{not json", b'{"model": "m", "messages": 5}',
                                   b'{"model": "m", "messages": [{"role": "user", "content": "x"}], "max_tokens": "9"}',
                                   b'[]', b'{"model": "m", "messages": [{"role": "wizard", "content": "x"}]}'])
                status, resp = http_json(self.base + "/v1/chat/completions", body, timeout=60)
                if status == 400 and isinstance(resp, dict) and "error" in resp:
                    self.count(op, "400")
                else:
                    self.count(op, f"unexpected_{status}")
                    self.error(f"malformed {body[:40]!r}: status {status}: {str(resp)[:200]}")
            elif op == "oversized":
                pad = "x" * (self.args.max_body_bytes + 1024)
                body = json.dumps({"model": "m", "messages": [{"role": "user", "content": pad}]}).encode()
                try:
                    status, resp = http_json(self.base + "/v1/chat/completions", body, timeout=60)
                except OSError:
                    status, resp = -1, "connection closed before an answer"
                if status == 413:
                    self.count(op, "413")
                else:
                    self.count(op, f"unexpected_{status}")
                    self.error(f"oversized: status {status}: {str(resp)[:200]}")
            else:
                path = rng.choice(["/health", "/status", "/v1/models", "/metrics"])
                status, resp = http_json(self.base + path, timeout=60)
                self.count(op, "200" if status == 200 else f"unexpected_{status}")
                if status != 200:
                    self.error(f"GET {path}: status {status}")
        except OSError as e:
            self.count(op, "connection_error")
            self.error(f"{op}: {type(e).__name__}: {e}")

    def client(self, seed: int) -> None:
        rng = random.Random(seed)
        while not self.stop.is_set():
            if self.pause.is_set():
                self.idle.release()
                while self.pause.is_set() and not self.stop.is_set():
                    time.sleep(0.05)
                continue
            self.one(rng)


def proc_sample(pid: int) -> dict:
    st = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        k, _, v = line.partition(":")
        if k in ("VmRSS", "RssAnon", "RssFile", "Threads"):
            st[k] = int(v.split()[0])
    # RssFile is mostly mapped group files (a disk link maps the file): it swings as groups are
    # evicted and linked again; RssAnon is the heap, where a leak would show.
    return {"rss_kib": st["VmRSS"], "rss_anon_kib": st.get("RssAnon"), "rss_file_kib": st.get("RssFile"),
            "threads": st["Threads"], "fds": len(os.listdir(f"/proc/{pid}/fd"))}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cli", required=True, type=Path)
    ap.add_argument("--src", type=Path, default=Path(__file__).resolve().parent.parent)
    ap.add_argument("--model", default="builtin:toolcaller")
    ap.add_argument("--duration-s", type=float, default=1800)
    ap.add_argument("--warmup-s", type=float, help="default: a fifth of the duration")
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--sample-s", type=float, default=5)
    ap.add_argument("--max-rss-growth", type=float, default=0.05)
    ap.add_argument("--min-rss-growth-kib", type=int, default=16384,
                    help="growth below this many KiB never fails (allocator arenas warming up are a fixed "
                         "amount: with the 7 MB toolcaller the base is ~240 MB, so 9 MB was already 5%%)")
    ap.add_argument("--no-rss-check", action="store_true",
                    help="record RSS but do not judge it: for a sanitized server, whose RSS is the "
                         "sanitizer's (ASan keeps freed memory in a quarantine of up to 256 MB; leaks "
                         "are LeakSanitizer's to report)")
    ap.add_argument("--host-budget-bytes", type=int, default=6 << 20)
    ap.add_argument("--disk-budget-bytes", type=int, default=12 << 20)
    ap.add_argument("--max-body-bytes", type=int, default=256 << 10)
    ap.add_argument("--tool-sets", type=int, help="use only the first N tool sets (default all 12)")
    ap.add_argument("--queries", type=int, default=len(QUERIES), help=f"queries per tool set (default {len(QUERIES)})")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--work-dir", type=Path)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    warmup = args.warmup_s if args.warmup_s is not None else args.duration_s / 5

    t_start = time.monotonic()
    commit = git_commit(args.src)  # at the start: the tree may change while a long run goes on
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="cc-soak-"))
    work.mkdir(parents=True, exist_ok=True)
    for d in ("cache", "expected_cache"):
        shutil.rmtree(work / d, ignore_errors=True)
    sets = tool_sets(args.src, work / "toolsets", args.seed) + edited_sets(args.src, work / "toolsets")
    if args.tool_sets:  # keep an edited set among them
        sets = sets[:max(1, args.tool_sets - 1)] + sets[-1:]
    del QUERIES[max(1, args.queries):]
    tools_json = [json.loads(p.read_text()) for p in sets]

    # The CLI's answers, into a cache directory of their own.
    ref = Cli(args.cli, args.model, work / "expected_cache")
    expected = {}
    for ti, p in enumerate(sets):
        for qi, q in enumerate(QUERIES):
            rc, out, err = ref.run(["query", "--tools", str(p), "--system", SYSTEM, "--query", q,
                                    "--max-new-tokens", str(MAX_TOKENS)])
            if rc != 0 or out is None:
                raise SystemExit(f"{NAME}: the reference query failed: {err[-400:]}")
            expected[(ti, qi)] = expected_answer(out)
    convos = []
    for ci in range(min(4, len(sets))):
        ti = [0, 1, 2, len(sets) - 1][ci] if len(sets) >= 4 else ci
        first = expected[(ti, ci % len(QUERIES))]
        earlier = first["text"] if first["text"] is not None else json.dumps({"name": first["call"][0]})
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUERIES[ci % len(QUERIES)]},
                    {"role": "assistant", "content": "I can help with that."},
                    {"role": "user", "content": QUERIES[(ci + 1) % len(QUERIES)] + " " + str(len(earlier))}]
        mfile = work / f"convo_{ci}.json"
        mfile.write_text(json.dumps(messages))
        rc, out, err = ref.run(["chat", "--messages", str(mfile), "--tools", str(sets[ti]),
                                "--max-new-tokens", str(MAX_TOKENS)])
        if rc != 0 or out is None:
            raise SystemExit(f"{NAME}: the reference chat failed: {err[-400:]}")
        convos.append((ti, messages, expected_answer(out)))
    log(NAME, f"{len(expected)} + {len(convos)} reference answers in {time.monotonic() - t_start:.0f} s")

    cli = Cli(args.cli, args.model, work / "cache")
    srv = Server(cli, ["--max-queue", "8", "--max-body-bytes", str(args.max_body_bytes), "--request-timeout-s", "120"],
                 ["--host-budget-bytes", str(args.host_budget_bytes), "--disk-budget-bytes", str(args.disk_budget_bytes)],
                 stderr_path=work / "server.log")
    if not srv.wait_ready(120):
        raise SystemExit(f"{NAME}: the server did not start; see {work / 'server.log'}")
    load = Load(args, srv.port, sets, tools_json, expected, convos)
    samples: list[dict] = []
    checkpoints: dict[str, dict] = {}

    def idle_checkpoint(name: str) -> None:
        load.pause.set()
        for _ in range(args.clients):
            load.idle.acquire(timeout=300)
        time.sleep(3)  # the server finishes cancelled work and closes the sockets
        checkpoints[name] = {"t_s": round(time.monotonic() - t_load, 1), **proc_sample(srv.pid)}
        load.pause.clear()

    threads = [threading.Thread(target=load.client, args=(args.seed * 1000 + i,), daemon=True)
               for i in range(args.clients)]
    t_load = time.monotonic()
    for t in threads:
        t.start()
    next_sample = 0.0
    warm_done = False
    while True:
        now = time.monotonic() - t_load
        if now >= args.duration_s:
            break
        if srv.proc.poll() is not None:
            load.error(f"the server exited ({srv.proc.returncode})")
            break
        if not warm_done and now >= warmup:
            idle_checkpoint("after_warmup")
            warm_done = True
        if now >= next_sample:
            samples.append({"t_s": round(now, 1), "after_warmup": warm_done, **proc_sample(srv.pid)})
            next_sample = now + args.sample_s
        time.sleep(0.2)
    alive = srv.proc.poll() is None
    budgets = {}
    if alive:
        idle_checkpoint("end")
        # The budgets hold at idle: a tier may exceed its budget by one group at most (the one a
        # request holds is kept), and the disk's gc runs at each persist.
        status, st = http_json(srv.base + "/status", timeout=60)
        sizes = [f.stat().st_size for f in (work / "cache" / "groups").glob("*.kv")]
        largest = max(sizes, default=0)
        if status == 200 and isinstance(st, dict) and "cache" in st:
            budgets = {"memory_bytes": st["cache"]["memory"]["bytes"], "disk_bytes_indexed": st["cache"]["disk"]["bytes"],
                       "disk_bytes_files": sum(sizes), "group_files": len(sizes), "largest_group_file_bytes": largest}
            # Recorded, not a failure: the memory tier skips the groups requests hold when it evicts
            # (at an insert or a hit), so groups held at the last one may stay over the budget at idle.
            budgets["memory_over_budget"] = budgets["memory_bytes"] > args.host_budget_bytes + largest
            if budgets["disk_bytes_files"] > args.disk_budget_bytes + largest:
                load.error(f"group files {budgets['disk_bytes_files']} bytes over the disk budget {args.disk_budget_bytes}")
        else:
            load.error(f"GET /status at the end: {status}")
    load.stop.set()
    for t in threads:
        t.join(180)

    failures = list(load.errors[:50])
    after = [s for s in samples if s["after_warmup"]]
    rss = {}
    if len(after) >= 10:
        k = max(1, len(after) // 10)
        base = statistics.median(s["rss_kib"] for s in after[:k])
        final = statistics.median(s["rss_kib"] for s in after[-k:])
        rss = {"baseline_kib": base, "final_kib": final, "growth": round(final / base - 1, 4), "window_samples": k,
               "max_kib": max(s["rss_kib"] for s in samples), "warmup_s": warmup}
        if all(s.get("rss_anon_kib") for s in after):
            a0 = statistics.median(s["rss_anon_kib"] for s in after[:k])
            a1 = statistics.median(s["rss_anon_kib"] for s in after[-k:])
            rss["anon_growth"] = round(a1 / a0 - 1, 4)  # reported beside the limit on VmRSS
        if args.no_rss_check:
            rss["check"] = "off (--no-rss-check)"
        elif rss["growth"] > args.max_rss_growth and final - base > args.min_rss_growth_kib:
            failures.append(f"RSS grew {rss['growth']:.1%} after the warm-up (limit {args.max_rss_growth:.0%})")
    else:
        failures.append(f"too few samples after the warm-up ({len(after)}) to judge RSS")
    if "after_warmup" in checkpoints and "end" in checkpoints:
        a, b = checkpoints["after_warmup"], checkpoints["end"]
        if b["threads"] > a["threads"]:
            failures.append(f"threads grew at idle: {a['threads']} -> {b['threads']}")
        if b["fds"] > a["fds"] + 2:
            failures.append(f"descriptors grew at idle: {a['fds']} -> {b['fds']}")
    else:
        failures.append("no idle checkpoint at the warm-up and the end")

    # Stop the server as a user would, then the directory must verify.
    exit_code = None
    if alive:
        srv.kill(signal.SIGINT)
        exit_code = srv.wait(60)
        if exit_code != 0:
            failures.append(f"the server did not stop cleanly on SIGINT (exit {exit_code})")
    srv.close()
    rc, out, err = cli.run(["cache", "verify"])
    verify = out or {"error": err[-400:]}
    if rc != 0 or not out or out.get("ok") is not True:
        failures.append(f"cache verify not clean ({rc}): {json.dumps(verify)[:400]}")
    state = group_dir_state(work / "cache")

    n_replies = sum(n for op in ("chat", "convo") for n in load.counts.get(op, {}).values())
    record = {
        "benchmark": "soak",
        "commit": commit,
        "machine": machine_info(),
        "date_unix": int(time.time()),
        "model": args.model,
        "duration_s": args.duration_s,
        "warmup_s": warmup,
        "clients": args.clients,
        "server": {"host_budget_bytes": args.host_budget_bytes, "disk_budget_bytes": args.disk_budget_bytes,
                   "max_body_bytes": args.max_body_bytes, "max_queue": 8, "exit_code_on_sigint": exit_code},
        "tool_sets": len(sets),
        "requests": {op: dict(sorted(c.items())) for op, c in sorted(load.counts.items())},
        "checked_replies": n_replies,
        "wrong_replies": sum(c.get("wrong", 0) for c in load.counts.values()),
        "rss": rss,
        "idle_checkpoints": checkpoints,
        "budgets_at_end": budgets,
        "cache_verify": verify,
        "groups_at_end": len(state["visible"]),
        "failures": failures,
        "ok": not failures,
        "samples": samples,
        "wall_s": round(time.monotonic() - t_start, 1),
    }
    finish(record, args.out, work, keep_work=bool(args.work_dir), ok=not failures)
    log(NAME, f"{n_replies} checked replies, {record['wrong_replies']} wrong, RSS growth {rss.get('growth')}, "
              f"{len(failures)} failures, {record['wall_s']} s")
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
