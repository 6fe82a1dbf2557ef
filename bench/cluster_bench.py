#!/usr/bin/env python3
"""Cluster benchmark (docs/deploy.md): scripts/cluster.sh's Redis + 3 replicas + HAProxy on loopback.

Sends the same seeded sequence of POST /query requests over N tool sets through HAProxy twice, each
time on a fresh cluster (empty Redis, empty replica caches):
  affinity  every request carries X-ContextCache-Group (HAProxy hashes it: consistent hashing)
  random    no header (HAProxy falls back to round robin)
and records, per run: where each request's group came from (memory / disk / remote / miss), the
hit rate, the share of local hits (memory + disk), TTFT per tier (the engine's ttft_ms, which
includes linking or compiling the group), the remote tier's load rate, and compiles per tool set
(a `miss` is a compile; after one per tool set every further one is a duplicate).
Then, in the affinity run, the three replicas are restarted (SIGTERM, then `cluster.sh up` again:
Redis and HAProxy keep running, each replica keeps its cache directory) and each tool set is asked
once more: the disk tier's hits, with their TTFT (`after_restart` in the JSON).

usage: bench/cluster_bench.py --cli build/app/contextcache-cli [--model builtin:qwen3-demo]
       [--tool-sets 10] [--requests 120] [--out bench/results_cluster_cpu.json]
Only loopback; the clusters are started and stopped by this script (scripts/cluster.sh).
"""
import argparse
import json
import os
import platform
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def consecutive_ports(n):
    for _ in range(50):
        base = free_port()
        try:
            socks = []
            for p in range(base, base + n):
                s = socket.socket()
                s.bind(("127.0.0.1", p))
                socks.append(s)
            for s in socks:
                s.close()
            return base
        except OSError:
            for s in socks:
                s.close()
    raise RuntimeError("no free consecutive ports")


def tool_sets(n, size):
    tools = json.load(open(os.path.join(ROOT, "resources", "toolsets", "tools_20.json")))
    out = []
    for i in range(n):  # overlapping windows of the 20 tools: n distinct sets
        out.append([tools[(i * 2 + k) % len(tools)] for k in range(size)])
    return out


def post(url, body, header_key, timeout=600):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    if header_key:
        req.add_header("X-ContextCache-Group", header_key)
    t0 = time.perf_counter()
    with urllib.request.urlopen(req, timeout=timeout) as r:
        data = json.load(r)
        group = r.headers.get("X-ContextCache-Group")
    return data, group, (time.perf_counter() - t0) * 1000


def ask(lb, sets, keys, s, with_header, i):
    body = {"tools": sets[s], "query": "What's the weather in Paris?", "max_new_tokens": 1, "ignore_eos": True}
    data, group, latency_ms = post(lb, body, keys[s] if with_header else None)
    t = data["timings"]
    return {"i": i, "tool_set": s, "tier": data["tier"], "ttft_ms": t["ttft_ms"], "link_ms": t["link_ms"],
            "disk_load_ms": t.get("disk_load_ms", 0), "remote_load_ms": t.get("remote_load_ms", 0),
            "remote_load_gb_s": t.get("remote_load_gb_s", 0), "compile_ms": t["compile_ms"], "latency_ms": latency_ms,
            "group_ok": group == keys[s]}


def restart_replicas(cluster, env):
    """SIGTERM to the three replicas (their pid files), then `cluster.sh up`, which starts only what
    is not running: the replicas, on their cache directories."""
    for i in (1, 2, 3):
        pid_file = os.path.join(env["CC_CLUSTER_DIR"], "replica%d.pid" % i)
        pid = int(open(pid_file).read())
        os.kill(pid, 15)
        for _ in range(200):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.05)
        else:
            raise RuntimeError("replica %d (pid %d) did not stop" % (i, pid))
    subprocess.run(["bash", cluster, "up"], env=env, check=True, timeout=900, stdout=subprocess.DEVNULL)
    # HAProxy marked them down while they were stopped; it sends to a replica again after two
    # passed health checks (deploy/haproxy.cfg: inter 1s rise 2). Its stats CSV says when.
    stats = "http://127.0.0.1:%s/;csv" % env["CC_STATS_PORT"]
    for _ in range(300):
        with urllib.request.urlopen(stats, timeout=10) as r:
            lines = r.read().decode().splitlines()
        header = lines[0].lstrip("# ").split(",")
        servers = [dict(zip(header, l.split(","))) for l in lines[1:] if l and not l.split(",")[1] in ("FRONTEND", "BACKEND")]
        if servers and all(x["status"] == "UP" for x in servers):
            return
        time.sleep(0.1)
    raise RuntimeError("HAProxy did not see the restarted replicas up")


def tier_summary(rows):
    tiers = {}
    for r in rows:
        tiers.setdefault(r["tier"], []).append(r)
    return {"by_tier": {k: len(v) for k, v in sorted(tiers.items())},
            "ttft_ms_median_by_tier": {k: statistics.median(r["ttft_ms"] for r in v) for k, v in sorted(tiers.items())}}


def group_keys(args, lb, sets, workdir):
    """Each tool set's group key as a client computes it (docs/deploy.md): `contextcache-cli key`
    with the replicas' KV width and weights, which GET /status reports."""
    with urllib.request.urlopen(lb.replace("/query", "/status"), timeout=30) as r:
        status = json.load(r)
    keys = []
    for i, s in enumerate(sets):
        path = os.path.join(workdir, "set%d.json" % i)
        json.dump(s, open(path, "w"))
        out = subprocess.run([args.cli, "--model", args.model, "--kv-dtype", status["kv_dtype"], "--weights", status["weights"],
                              "--json", "key", "--tools", path], check=True, capture_output=True, text=True).stdout
        keys.append(json.loads(out)["group_key"])
    return keys


def run(args, label, with_header, sets, order, workdir):
    env = dict(os.environ)
    env.update({
        "CC_CLI": args.cli, "CC_MODEL": args.model, "CC_CLUSTER_DIR": os.path.join(workdir, label),
        "CC_THREADS": str(args.threads), "CC_LB_PORT": str(free_port()), "CC_STATS_PORT": str(free_port()),
        "CC_REDIS_PORT": str(free_port()), "CC_REPLICA_PORT": str(consecutive_ports(3)),
    })
    cluster = os.path.join(ROOT, "scripts", "cluster.sh")
    subprocess.run(["bash", cluster, "up"], env=env, check=True, timeout=900, stdout=subprocess.DEVNULL)
    lb = "http://127.0.0.1:%s/query" % env["CC_LB_PORT"]
    rows, after_restart = [], []
    try:
        keys = group_keys(args, lb, sets, workdir)
        for i, s in enumerate(order):
            rows.append(ask(lb, sets, keys, s, with_header, i))
        if with_header:
            restart_replicas(cluster, env)
            for s in range(len(sets)):
                after_restart.append(ask(lb, sets, keys, s, with_header, len(rows) + s))
    finally:
        subprocess.run(["bash", cluster, "down"], env=env, timeout=120, stdout=subprocess.DEVNULL)
    tiers = {}
    for r in rows:
        tiers.setdefault(r["tier"], []).append(r)
    compiles = {}
    for r in rows:
        if r["tier"] == "miss":
            compiles[r["tool_set"]] = compiles.get(r["tool_set"], 0) + 1
    n = len(rows)
    warm = rows[len(sets) * 2:]  # steady state: after the first 2 rounds' worth of requests
    summary = {
        "requests": n,
        "hit_rate": sum(r["tier"] != "miss" for r in rows) / n,
        "local_hit_rate": sum(r["tier"] in ("memory", "disk") for r in rows) / n,
        "steady_state_local_hit_rate": (sum(r["tier"] in ("memory", "disk") for r in warm) / len(warm)) if warm else None,
        "by_tier": {k: len(v) for k, v in sorted(tiers.items())},
        "ttft_ms_median_by_tier": {k: statistics.median(r["ttft_ms"] for r in v) for k, v in sorted(tiers.items())},
        "remote_load_gb_s_median": statistics.median([r["remote_load_gb_s"] for r in tiers.get("remote", [])]) if tiers.get("remote") else None,
        "compiles": sum(compiles.values()),
        "compiles_per_tool_set": {str(k): v for k, v in sorted(compiles.items())},
        "duplicate_compiles": sum(v - 1 for v in compiles.values()),
        "group_header_ok": all(r["group_ok"] for r in rows),
    }
    out = {"summary": summary, "requests": rows}
    if after_restart:
        out["after_restart"] = {"what": "the 3 replicas restarted on their cache directories (Redis and HAProxy kept), "
                                        "each tool set asked once, with the header",
                                "summary": tier_summary(after_restart), "requests": after_restart}
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", default=os.path.join(ROOT, "build", "app", "contextcache-cli"))
    ap.add_argument("--model", default="builtin:qwen3-demo")
    ap.add_argument("--tool-sets", type=int, default=10)
    ap.add_argument("--tools-per-set", type=int, default=5)
    ap.add_argument("--requests", type=int, default=120)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results_cluster_cpu.json"))
    args = ap.parse_args()

    sets = tool_sets(args.tool_sets, args.tools_per_set)
    with tempfile.TemporaryDirectory() as tmp:
        rng = random.Random(args.seed)
        order = [rng.randrange(len(sets)) for _ in range(args.requests)]
        results = {}
        for label, with_header in (("affinity", True), ("random", False)):
            results[label] = run(args, label, with_header, sets, order, tmp)
            print(label, json.dumps(results[label]["summary"]), file=sys.stderr)
            if "after_restart" in results[label]:
                print(label, "after restart", json.dumps(results[label]["after_restart"]["summary"]), file=sys.stderr)

    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    cpu = ""
    try:
        cpu = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    doc = {"benchmark": "cluster", "commit": commit, "machine": {"cpu": cpu, "cores": os.cpu_count(), "system": platform.platform()},
           "model": args.model, "replicas": 3, "tool_sets": args.tool_sets, "tools_per_set": args.tools_per_set,
           "requests": args.requests, "seed": args.seed, "threads_per_replica": args.threads,
           "date_unix": int(time.time()), "runs": results}
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1)
    print(args.out)


if __name__ == "__main__":
    main()
