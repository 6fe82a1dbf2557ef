"""What scripts/crash-consistency.py and scripts/soak.py share: the CLI and `serve` as child
processes (127.0.0.1, free ports, each stopped by its own pid), HTTP to them, the cache directory's
state as seen from outside (visible group files, temp files, the index through `cache ls`), tool
sets cut from the bundled ones, and the machine's description for the JSON record.

Standard library only. Every process is started with a fixed model (builtin:qwen3-test unless
given), one thread, F32 KV and the stored weights, so the CLI and every server share one set of
group keys (`serve` would otherwise pick BF16 KV and perhaps bf16dot weights: other numerics,
other keys, no sharing).
"""
from __future__ import annotations

import json
import os
import platform
import random
import shutil
import subprocess
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

# The numerics every process of a run uses (see the module doc).
COMMON_FLAGS = ["--threads", "1", "--kv-dtype", "f32", "--weights", "stored"]


def log(name: str, msg: str) -> None:
    print(f"[{name} {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def machine_info() -> dict:
    info = {"cpu": None, "cores": os.cpu_count(), "memory_gib": None, "kernel": platform.release(),
            "loadavg_start": Path("/proc/loadavg").read_text().split()[:3]}
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            info["cpu"] = line.split(":", 1)[1].strip()
            break
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            info["memory_gib"] = round(int(line.split()[1]) / 1024 / 1024, 1)
    return info


def git_commit(src: Path) -> str:
    try:
        out = subprocess.run(["git", "-C", str(src), "rev-parse", "--short", "HEAD"], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(src), "status", "--porcelain", "--untracked-files=no"],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, timeout=10).stdout.strip()
        return out + ("-dirty" if dirty else "") if out else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


class Cli:
    """contextcache-cli with the run's model, cache directory and numerics."""

    def __init__(self, path: Path, model: str, cache_dir: Path):
        self.path, self.model, self.cache_dir = Path(path), model, Path(cache_dir)

    def argv(self, args: list[str], extra_global: list[str] | None = None) -> list[str]:
        return [str(self.path), "--model", self.model, "--cache-dir", str(self.cache_dir), *COMMON_FLAGS,
                *(extra_global or []), "--json", *args]

    def run(self, args: list[str], timeout: float = 300) -> tuple[int, dict | None, str]:
        """-> (exit code, the JSON object of the last stdout line or None, stderr)."""
        p = subprocess.run(self.argv(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           timeout=timeout)
        obj = None
        lines = [ln for ln in p.stdout.splitlines() if ln.strip()]
        if lines:
            try:
                obj = json.loads(lines[-1])
            except json.JSONDecodeError:
                obj = None
        return p.returncode, obj, p.stderr


def tool_sets(src: Path, out_dir: Path, seed: int) -> list[Path]:
    """Tool files: the bundled 5/10/20/50-tool sets, plus seeded subsets of the 50, some nested in
    each other (one tool set is then a prefix of another in canonical order often enough for the
    longest-prefix reuse to run), written to out_dir."""
    rng = random.Random(seed)
    bundled = [src / "resources" / "toolsets" / f"tools_{n}.json" for n in (5, 10, 20, 50)]
    pool = json.loads((src / "resources" / "toolsets" / "tools_50.json").read_text())
    out_dir.mkdir(parents=True, exist_ok=True)
    sets = list(bundled)
    base = rng.sample(pool, 12)
    for i, subset in enumerate([base[:6], base[:9], base, rng.sample(pool, 8), rng.sample(pool, 15)]):
        p = out_dir / f"subset_{i}.json"
        p.write_text(json.dumps(subset))
        sets.append(p)
    return sets


def group_dir_state(cache_dir: Path) -> dict:
    """Visible group files (the names a reader looks up), temp files left by writers, quarantined files."""
    groups = Path(cache_dir) / "groups"
    visible, temps, quarantined = [], [], []
    if groups.is_dir():
        for f in groups.iterdir():
            if f.name == "quarantine" and f.is_dir():
                quarantined = sorted(q.name for q in f.iterdir())
            elif f.name.startswith(".") and ".tmp-" in f.name:
                temps.append(f.name)
            elif f.suffix == ".kv" and f.is_file():
                visible.append(f.stem)
    return {"visible": sorted(visible), "temps": sorted(temps), "quarantined": quarantined}


def http_json(url: str, body: dict | bytes | None = None, timeout: float = 60, headers: dict | None = None,
              method: str | None = None) -> tuple[int, dict | str | None]:
    """-> (status, the parsed JSON body, or its text when it is not JSON). Raises OSError on a
    connection failure (refused, reset, timed out)."""
    data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method or ("POST" if data is not None else "GET"),
                                 headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            raw = r.read()
            status = r.status
    except urllib.error.HTTPError as e:
        raw = e.read()
        status = e.code
    try:
        return status, json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return status, raw.decode("utf-8", "replace")


class Server:
    """`contextcache-cli serve --port 0` as a child: the port from the first stdout line."""

    def __init__(self, cli: Cli, serve_args: list[str] | None = None, extra_global: list[str] | None = None,
                 stderr_path: Path | None = None):
        self.stderr_file = open(stderr_path, "wb") if stderr_path else subprocess.DEVNULL
        self.proc = subprocess.Popen(cli.argv(["serve", "--port", "0", *(serve_args or [])], extra_global),
                                     stdout=subprocess.PIPE, stderr=self.stderr_file)
        self.pid = self.proc.pid
        self.port: int | None = None
        self._ready = threading.Event()
        threading.Thread(target=self._read_port, daemon=True).start()

    def _read_port(self) -> None:
        try:
            line = self.proc.stdout.readline()
            self.port = json.loads(line).get("port") if line.strip() else None
        except (ValueError, OSError):
            self.port = None
        self._ready.set()
        # keep draining stdout so the server never blocks on a full pipe
        try:
            for _ in self.proc.stdout:
                pass
        except (ValueError, OSError):
            pass

    def wait_ready(self, timeout: float) -> bool:
        return self._ready.wait(timeout) and self.port is not None

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def kill(self, sig: int) -> None:
        try:
            os.kill(self.pid, sig)
        except ProcessLookupError:
            pass

    def wait(self, timeout: float) -> int | None:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def close(self) -> None:
        if self.proc.poll() is None:
            self.kill(9)
            self.proc.wait(30)
        if self.stderr_file is not subprocess.DEVNULL:
            self.stderr_file.close()


def chat_body(tools: list, system: str, user: str, max_tokens: int) -> dict:
    """A greedy chat completion equal to `query --tools T --system S --query Q --ignore-eos`."""
    return {"model": "m", "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
            "tools": tools, "max_tokens": max_tokens, "ignore_eos": True}


def reply_text(resp: dict) -> str:
    """The assistant's reply as the CLI's `text` has it: content, or the raw tool call."""
    msg = resp["choices"][0]["message"]
    return msg.get("content") or ""


def finish(record: dict, out: Path | None, work: Path, keep_work: bool, ok: bool) -> None:
    """A run's end: its JSON record on stdout (and in `out`), and its scratch folder removed when
    the run passed and the caller did not name the folder."""
    text = json.dumps(record, indent=1)
    print(text)
    if out:
        out.write_text(text + "\n")
    if ok and not keep_work:
        shutil.rmtree(work, ignore_errors=True)
