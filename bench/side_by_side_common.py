"""What bench/side_by_side.py and bench/serve_concurrency.py share: running commands, the servers they
start (127.0.0.1, free ports, stopped by their pid), HTTP to them, the machine's description, the
llama.cpp version check and the same-weights export (contextcache-cli export, then
tools/export_gguf.py with llama.cpp's gguf-py, then llama-quantize).

Standard library only (tools/export_gguf.py, run as a child process, needs numpy).
"""
from __future__ import annotations

import json
import os
import platform
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

LOG = sys.stderr
NAME = "bench"  # the calling script's name, in log lines and error messages (set_name)


def set_name(name: str) -> None:
    global NAME
    NAME = name


def log(msg: str) -> None:
    print(f"[{NAME} {time.strftime('%H:%M:%S')}] {msg}", file=LOG, flush=True)


def figure(runs: list[float], unit: str, **extra) -> dict:
    d = {"median": statistics.median(runs) if runs else None, "unit": unit, "runs": runs}
    d.update(extra)
    return d


def run(cmd: list[str], *, cwd: Path | None = None, env: dict | None = None, rss: bool = False,
        timeout: float = 1800) -> tuple[str, float | None]:
    """Run a command, return (stdout, peak RSS in MiB or None). Fails loudly."""
    rss_file = None
    if rss:
        rss_file = Path(f"/tmp/{NAME}_rss_{os.getpid()}.txt")
        cmd = ["/usr/bin/time", "-o", str(rss_file), "-f", "%M"] + cmd
    p = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=timeout)
    if p.returncode != 0:
        sys.stderr.write(p.stderr[-4000:])
        raise SystemExit(f"{NAME}: command failed ({p.returncode}): {' '.join(cmd[:8])} ...")
    peak = None
    if rss_file is not None:
        peak = int(rss_file.read_text().strip().splitlines()[-1]) / 1024.0
        rss_file.unlink()
    return p.stdout, peak


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(method: str, url: str, body=None, timeout: float = 900) -> tuple[dict, float]:
    """-> (JSON reply, client wall time in ms). Only 127.0.0.1 is ever addressed."""
    assert url.startswith("http://127.0.0.1:"), url
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json"} if data else {})
    t0 = time.perf_counter()
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            raw = r.read()
    except urllib.error.HTTPError as e:
        raise SystemExit(f"{NAME}: {method} {url} -> {e.code}: {e.read()[:2000]!r}")
    ms = (time.perf_counter() - t0) * 1000.0
    return (json.loads(raw) if raw else {}), ms


class Server:
    """A server process of ours (started here, stopped here by its pid).

    port None: the server picks its own port and prints it as a JSON line ({"port": N, ...}) on
    stdout (`contextcache-cli serve --port 0 --json`); that line is kept as `self.announced`."""

    def __init__(self, name: str, cmd: list[str], port: int | None, health: str, log_path: Path,
                 startup_timeout_s: float = 300):
        self.name, self.port, self.cmd = name, port, cmd
        self.announced: dict | None = None
        self.log_path = log_path
        self.log = open(log_path, "w")
        log(f"start {name}: {' '.join(cmd)}")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        t0 = time.perf_counter()
        deadline = time.time() + startup_timeout_s
        while True:
            if self.proc.poll() is not None:
                raise SystemExit(f"{NAME}: {name} exited ({self.proc.returncode}); see {log_path}")
            if self.port is None:
                self.port = self._announced_port()
            if self.port is not None:
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{health}", timeout=5) as r:
                        if r.status == 200:
                            break
                except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                    pass
            if time.time() > deadline:
                self.stop()
                raise SystemExit(f"{NAME}: {name} not healthy after {startup_timeout_s:.0f} s; see {log_path}")
            time.sleep(0.25)
        self.base = f"http://127.0.0.1:{self.port}"
        self.startup_ms = (time.perf_counter() - t0) * 1000.0

    def _announced_port(self) -> int | None:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return None
        for line in text.splitlines():
            line = line.strip()
            if line.startswith("{") and '"port"' in line:
                try:
                    j = json.loads(line)
                except ValueError:
                    continue
                if isinstance(j.get("port"), int) and j["port"] > 0:
                    self.announced = j
                    return j["port"]
        return None

    def status_kib(self, field: str) -> int | None:
        """A field of /proc/PID/status in KiB (VmHWM: peak RSS so far, VmRSS: now)."""
        try:
            for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
                if line.startswith(field + ":"):
                    return int(line.split()[1])
        except OSError:
            return None
        return None

    def cpu_and_faults(self) -> dict | None:
        """The process's page faults and CPU seconds so far (/proc/PID/stat: minflt, majflt, utime,
        stime), to difference across a load: faults are what fresh memory costs, and unlike wall
        time they do not move with the VM's noise."""
        try:
            fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            return None
        tick = os.sysconf("SC_CLK_TCK")
        # after the command's ")": field 3 (state) is fields[0], so field N is fields[N - 3]
        return {"minor_faults": int(fields[7]), "major_faults": int(fields[9]),
                "cpu_user_s": int(fields[11]) / tick, "cpu_sys_s": int(fields[12]) / tick}

    def peak_rss_mib(self) -> float | None:
        kib = self.status_kib("VmHWM")
        return None if kib is None else kib / 1024.0

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def machine_info() -> dict:
    info = {"cpu": None, "cores": os.cpu_count(), "memory_gib": None, "kernel": platform.release(),
            "loadavg_start": Path("/proc/loadavg").read_text().split()[:3]}
    try:
        out = subprocess.run(["lscpu"], stdout=subprocess.PIPE, text=True).stdout
        for line in out.splitlines():
            k, _, v = line.partition(":")
            if k.strip() == "Model name":
                info["cpu"] = v.strip()
            if k.strip() == "Flags":
                flags = set(v.split())
                info["avx512"] = sorted(f for f in flags if f.startswith("avx512"))
    except FileNotFoundError:
        pass
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            info["memory_gib"] = round(int(line.split()[1]) / 1024 / 1024, 1)
    return info


def llama_version(llama_bin: Path, expected_commit: str | None) -> dict:
    """`llama-server --version`, checked against expected_commit (a prefix either way)."""
    out = subprocess.run([str(Path(llama_bin) / "llama-server"), "--version"], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True).stdout
    # "version: 10587 (3f545bec)" (older builds) or "version: 0.2.0-dev (build 10587, commit 3f545becc)"
    m = re.search(r"version: (\d+) \(([0-9a-f]+)\)", out) or re.search(r"\(build \d+, commit ([0-9a-f]+)\)", out)
    llama_commit = m.group(m.lastindex) if m else None
    if expected_commit and llama_commit and not (
            llama_commit.startswith(expected_commit[:len(llama_commit)])
            or expected_commit.startswith(llama_commit)):
        raise SystemExit(f"{NAME}: llama-server reports commit {llama_commit}, not {expected_commit}")
    return {"commit": expected_commit or llama_commit, "reported": out.strip().splitlines()[-2:], "bin": str(llama_bin)}


def export_weights(*, cli: str, model: str, work: Path, repo: Path, python: str, gguf_py: str,
                   llama_bin: Path | None = None, threads: str = "2", quantize: bool = True,
                   gguf: bool = True) -> dict:
    """The same weights on both sides: `contextcache-cli --model SPEC export` -> WORK/hf (ContextCache
    loads that directory), tools/export_gguf.py -> WORK/model-bf16.gguf (same bf16 bits), and with
    quantize llama-quantize -> WORK/model-q8_0.gguf. Files already in WORK are reused. gguf=False
    (a sitting without llama.cpp): the safetensors directory only.

    -> {"hf": Path, "gguf_bf16": Path, "gguf_q8": Path | None, "info": the JSON's "weights" object}"""
    hf = work / "hf"
    if not (hf / "model.safetensors").exists():
        log(f"export {model} -> {hf}")
        if hf.exists():
            shutil.rmtree(hf)
        run([cli, "--model", model, "export", "--out", str(hf)])
    gguf_bf16 = work / "model-bf16.gguf"
    gguf_q8 = work / "model-q8_0.gguf"
    env = dict(os.environ, PYTHONPATH=gguf_py)
    if gguf and not gguf_bf16.exists():
        log("export_gguf.py -> bf16 GGUF")
        run([python, str(Path(repo) / "tools" / "export_gguf.py"), str(hf), str(gguf_bf16),
             "--outtype", "bf16", "--name", model], env=env)
    if quantize and not gguf_q8.exists():
        log("llama-quantize -> q8_0 GGUF")
        run([str(Path(llama_bin) / "llama-quantize"), str(gguf_bf16), str(gguf_q8), "q8_0", threads])
    cfg = json.loads((hf / "config.json").read_text())
    st = hf / "model.safetensors"
    info = {
        "model": model, "checkpoint_dtype": cfg.get("torch_dtype"),
        "safetensors_bytes": st.stat().st_size,
    }
    if gguf:
        info["gguf_bf16_bytes"] = gguf_bf16.stat().st_size
    if quantize:
        info["gguf_q8_0_bytes"] = gguf_q8.stat().st_size
    info["contextcache_loads"] = str(hf)
    return {"hf": hf, "gguf_bf16": gguf_bf16 if gguf else None, "gguf_q8": gguf_q8 if quantize else None, "info": info}
