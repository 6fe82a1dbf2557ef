#!/usr/bin/env python3
"""Resident memory of `contextcache-cli serve` through its phases (issue 36: peak RSS against
llama-server's): after the model loads, after the first request (the 20-tool group compiled), after
cache hits, after a second tool set's compile, and back on the first. Prints one JSON object with
VmRSS / VmHWM / RssAnon / RssFile (MiB) and the thread count after each phase, the binary's
commit, whether it links the CUDA libraries and whether they are mapped in the running server
(the CUDA backend is a plugin opened only where the NVIDIA driver is installed), and the machine.

  bench/serve_rss.py --cli build/app/contextcache-cli --model DIR [--threads 2] [--preload LIBS] [--out FILE]

--preload puts LIBS (space-separated) in the server's LD_PRELOAD: with the CUDA libraries
(libcudart.so.13 libcublas.so.13 libcublasLt.so.13) it runs the same binary as a program that links
them, which is what every build with nvcc was before the plugin: an A/B on one binary.

The model is a directory `contextcache-cli --model builtin:qwen3-0.6b export --out DIR` wrote (the
weights bench/serve_concurrency.sh serves). Greedy, 32 tokens per reply, ignore_eos. The server
listens on 127.0.0.1 on a free port and is stopped by its pid. Memory figures do not depend on
what else the machine runs; the seconds printed beside them do."""
import argparse, http.client, json, os, platform, subprocess, sys, tempfile, time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def status(pid: int) -> dict:
    out = {}
    for line in open(f"/proc/{pid}/status"):
        k, v = line.split(":", 1)
        if k in ("VmRSS", "VmHWM", "RssAnon", "RssFile"):
            out[k + "_mib"] = round(int(v.split()[0]) / 1024, 1)
        elif k == "Threads":
            out["threads"] = int(v)
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--preload", default="", help="LD_PRELOAD for the server (space-separated libraries)")
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    cache = tempfile.mkdtemp(prefix="serve-rss-")
    srv = subprocess.Popen([a.cli, "--model", a.model, "--threads", str(a.threads), "--cache-dir", cache, "--json",
                            "serve", "--port", "0"], stdout=subprocess.PIPE,
                           env=dict(os.environ, LD_PRELOAD=a.preload) if a.preload else None,
                           stderr=open(Path(cache) / "server.log", "w"), text=True)
    try:
        started = json.loads(srv.stdout.readline())
        port = started["port"]
        system = (REPO / "resources" / "system_prompt.txt").read_text()
        queries = json.loads((REPO / "resources" / "toolsets" / "sample_queries.json").read_text())

        def ask(n_tools: int, i: int) -> None:
            tools = json.loads((REPO / "resources" / "toolsets" / f"tools_{n_tools}.json").read_text())
            qs = queries[f"tools_{n_tools}.json"]
            body = {"model": "x", "messages": [{"role": "system", "content": system},
                                               {"role": "user", "content": qs[i % len(qs)]}],
                    "tools": tools, "max_tokens": 32, "temperature": 0.0, "ignore_eos": True}
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=900)
            c.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
            r = c.getresponse()
            r.read()
            if r.status != 200:
                raise SystemExit(f"serve_rss: HTTP {r.status}")

        phases = [{"phase": "model loaded", **status(srv.pid)}]
        maps = Path(f"/proc/{srv.pid}/maps").read_text()
        mapped = sorted({Path(line.split()[-1]).name for line in maps.splitlines()
                         if any(k in line for k in ("libcudart", "libcublas", "libcontextcache-cuda"))})
        for name, n_tools, count in (("compile tools_20", 20, 1), ("4 hits tools_20", 20, 4),
                                     ("compile tools_10", 10, 1), ("3 hits tools_10", 10, 3),
                                     ("2 hits tools_20", 20, 2)):
            t0 = time.time()
            for i in range(count):
                ask(n_tools, i)
            phases.append({"phase": name, "seconds": round(time.time() - t0, 2), **status(srv.pid)})
        ldd = subprocess.run(["ldd", a.cli], capture_output=True, text=True).stdout
        commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True).stdout.strip()
        out = {"benchmark": "serve_rss", "cli": a.cli, "repo_head": commit, "model": a.model,
               "weights": started.get("weights"), "numerics": started.get("numerics"), "threads": a.threads,
               "links_cuda": "libcudart" in ldd, "preload": a.preload, "cuda_libraries_mapped": mapped,
               "machine": {"cpu": platform.processor() or platform.machine(),
                                                              "kernel": platform.release()},
               "phases": phases, "peak_rss_mib": max(p["VmHWM_mib"] for p in phases)}
        text = json.dumps(out, indent=1)
        print(text)
        if a.out:
            Path(a.out).write_text(text + "\n")
    finally:
        srv.terminate()
        srv.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
