#!/usr/bin/env python3
"""Crash consistency of one cache directory shared by many processes (issue 39, item 4).

Rounds of concurrent actors on ONE cache directory, each killed with SIGKILL at a random moment:
  compile  `contextcache-cli compile` of a tool set (some tool sets shared, some nested subsets);
  query    `contextcache-cli query --mode compare` (links from disk or compiles; when it ends
           unkilled its cached answer must be `identical` to its own full prefill);
  serve    `contextcache-cli serve` with a client sending chat completions over several tool sets
           (sometimes with a small --disk-budget-bytes, so its persist evicts other groups);
  gc       `contextcache-cli cache gc --max-bytes N` (removes files under the others' feet);
  verify   `contextcache-cli cache verify` (must never find a bad file while the others run).
A kill comes either at a uniformly random time within the actor's life, or as soon as the actor's
own temp group file (`.KEY.kv.tmp-PID-*`) appears in groups/ plus 0-20 ms, i.e. while it writes.
Every few rounds, with nothing running, index.sqlite is deleted, so the next round's processes
rebuild it while they are being killed.

After every round, with nothing running (the checks are themselves fresh processes):
  - every visible groups/KEY.kv verifies: `cache verify` reports no problem (a partial or damaged
    visible file would be one) and nothing was ever quarantined;
  - the index agrees with the files once verify has run (`cache ls` == the visible files), and the
    drift the kills left before it (files the index misses, entries without a file: read from
    index.sqlite directly, since opening a store reconciles) is counted;
  - no temp file of a killed writer is left once verify has run (they take disk the budget does not
    count; `cache verify` and every gc remove those whose writer's flock is free);
  - every actor that ended by itself exited 0 (queries `identical`, serve replies 200).
At the end: index.sqlite is deleted and rebuilt by a fresh process (it must list exactly the
visible files), `cache verify` is clean, a fresh `query --mode compare` per (tool set, system)
answers `identical` to a full prefill, and linked from disk where the file exists, and a fresh
server answers every (tool set, system) with the same reply and group key as that CLI query.

Inconsistencies are listed in the JSON and make the exit status 1. Standard library only.

usage: crash-consistency.py --cli build/app/contextcache-cli [--kills 100] [--concurrency 4]
       [--seed 1] [--work-dir DIR] [--out FILE.json] [--max-seconds S]
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness_common import Cli, Server, chat_body, finish, git_commit, group_dir_state, http_json, log, machine_info, \
    reply_text, tool_sets  # noqa: E402

NAME = "crash-consistency"
SYSTEMS = ["You are a helpful assistant.", "S1"]
KINDS = {"compile": 3, "query": 3, "serve": 2, "gc": 1, "verify": 1}


class Actor:
    def __init__(self, kind: str, argv: list[str] | None, combo_desc: str):
        self.kind, self.argv, self.combo = kind, argv, combo_desc
        self.proc: subprocess.Popen | None = None
        self.server: Server | None = None
        self.killed = False
        self.kill_mode = ""
        self.kill_at_s = 0.0
        self.exit_code: int | None = None
        self.stdout = ""
        self.stderr = ""
        self.replies: list[dict] = []  # serve: each finished request
        self.client_thread: threading.Thread | None = None

    @property
    def pid(self) -> int:
        return self.server.pid if self.server else self.proc.pid

    def alive(self) -> bool:
        return (self.server.proc if self.server else self.proc).poll() is None


def serve_client(actor: Actor, combos: list, tools_json: list, rng: random.Random, stop: threading.Event) -> None:
    """Sequential chat completions over random (tool set, system) pairs until the server dies."""
    if not actor.server.wait_ready(60):
        return
    while not stop.is_set():
        ti, si = rng.choice(combos)
        body = chat_body(tools_json[ti], SYSTEMS[si], f"q{rng.randrange(1000)}", 3)
        try:
            status, resp = http_json(actor.server.base + "/v1/chat/completions", body, timeout=60)
        except OSError:
            return  # killed under us: expected
        actor.replies.append({"status": status, "combo": [ti, si],
                              "error": None if status == 200 else str(resp)[:300]})


def start_actor(kind: str, cli: Cli, sets: list[Path], combos: list, tools_json: list, rng: random.Random,
                work: Path, stop: threading.Event) -> Actor:
    ti, si = rng.choice(combos)
    tools, system = str(sets[ti]), SYSTEMS[si]
    budget = ["--disk-budget-bytes", str(rng.choice([4, 8, 16]) << 20)] if rng.random() < 0.3 else []
    if kind == "compile":
        a = Actor(kind, cli.argv(["compile", "--tools", tools, "--system", system], budget), f"{ti}/{si}")
    elif kind == "query":
        a = Actor(kind, cli.argv(["query", "--tools", tools, "--system", system, "--query", f"q{rng.randrange(100)}",
                                  "--mode", "compare", "--max-new-tokens", "2", "--ignore-eos"], budget), f"{ti}/{si}")
    elif kind == "gc":
        a = Actor(kind, cli.argv(["cache", "gc", "--max-bytes", str(rng.choice([0, 4, 16, 64]) << 20)]), "")
    elif kind == "verify":
        a = Actor(kind, cli.argv(["cache", "verify"]), "")
    else:
        a = Actor(kind, None, "")
        a.server = Server(cli, ["--max-queue", "8"], budget, stderr_path=work / f"serve_{time.time_ns()}.log")
        a.client_thread = threading.Thread(target=serve_client,
                                           args=(a, combos, tools_json, random.Random(rng.random()), stop), daemon=True)
        a.client_thread.start()
        return a
    a.proc = subprocess.Popen(a.argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return a


def temp_file_of(groups: Path, pid: int) -> bool:
    try:
        return any(f".tmp-{pid}-" in n for n in os.listdir(groups))
    except OSError:
        return False


def run_round(args, cli: Cli, sets, combos, tools_json, rng: random.Random, work: Path, stats: dict) -> list[Actor]:
    stop = threading.Event()
    actors = []
    kinds, weights = zip(*KINDS.items())
    for _ in range(args.concurrency):
        kind = rng.choices(kinds, weights)[0]
        a = start_actor(kind, cli, sets, combos, tools_json, rng, work, stop)
        # serve lives longer (model load, then several requests); the CLI commands about a second
        a.kill_mode = "on-write" if rng.random() < 0.35 else "random"
        a.kill_at_s = rng.uniform(0.05, 2.5 if kind == "serve" else 0.9)
        actors.append(a)
    t0 = time.monotonic()
    groups = cli.cache_dir / "groups"
    pending = list(actors)
    while pending:
        now = time.monotonic() - t0
        for a in list(pending):
            if not a.alive() and a.kind != "serve":
                pending.remove(a)
                continue
            fire = False
            if a.kill_mode == "on-write":
                if temp_file_of(groups, a.pid):
                    time.sleep(rng.uniform(0, 0.02))
                    fire = True
                elif now > 3.0:  # it never wrote (a hit, or a gc): kill it at a random moment instead
                    fire = True
            elif now >= a.kill_at_s:
                fire = True
            if fire:
                if a.alive():
                    os.kill(a.pid, signal.SIGKILL)
                    a.killed = True
                pending.remove(a)
        time.sleep(0.002)
    stop.set()
    for a in actors:
        if a.server:
            a.server.wait(30)
            a.exit_code = a.server.proc.returncode
            a.client_thread.join(90)
            a.server.close()
        else:
            a.stdout, a.stderr = a.proc.communicate(timeout=300)
            a.exit_code = a.proc.returncode
    return actors


def check_actor(a: Actor, problems: list[str]) -> None:
    """An actor that was not killed must have done its job."""
    where = f"{a.kind} {a.combo}"
    if a.kind == "serve":
        for r in a.replies:
            if r["status"] != 200:
                problems.append(f"{where}: reply {r['status']}: {r['error']}")
        return
    if a.killed:
        return
    if a.exit_code != 0:
        problems.append(f"{where}: exit {a.exit_code}: {a.stderr.strip()[-400:]} {a.stdout.strip()[-400:]}")
        return
    if "moved to" in a.stderr or "quarantine" in a.stderr:
        problems.append(f"{where}: saw a damaged file: {a.stderr.strip()[-400:]}")
    if a.kind == "query":
        out = json.loads(a.stdout.strip().splitlines()[-1])
        if out.get("identical") is not True:
            problems.append(f"{where}: cached answer differs from the full prefill: {a.stdout.strip()[-400:]}")


def index_keys(cli: Cli, problems: list[str], when: str) -> set[str] | None:
    rc, out, err = cli.run(["cache", "ls"])
    if rc != 0 or out is None:
        problems.append(f"{when}: cache ls failed ({rc}): {err.strip()[-400:]}")
        return None
    return {g["group_key"] for g in out["groups"]}


def index_rows_as_left(cache_dir: Path) -> set[str] | None:
    """The keys in index.sqlite as the killed processes left it, read directly (read-only): any
    contextcache-cli process would reconcile the index with the files when it opens the store."""
    db = cache_dir / "index.sqlite"
    if not db.exists():
        return None  # dropped this round and not recreated: the next opener rebuilds it
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
        try:
            return {r[0] for r in con.execute("SELECT group_key FROM groups")}
        finally:
            con.close()
    except sqlite3.Error:
        return None


def check_directory(cli: Cli, problems: list[str], drift: dict, when: str) -> None:
    state = group_dir_state(cli.cache_dir)
    if state["quarantined"]:
        problems.append(f"{when}: files were quarantined: {state['quarantined']}")
    before = index_rows_as_left(cli.cache_dir)
    if before is not None:
        files = set(state["visible"])
        drift["files_not_indexed"] += len(files - before)
        drift["entries_without_file"] += len(before - files)
    drift["temps_before_verify"] += len(state["temps"])
    rc, out, err = cli.run(["cache", "verify"])
    if rc != 0 or out is None or out.get("ok") is not True:
        problems.append(f"{when}: cache verify not clean ({rc}): {json.dumps(out)[:600] if out else err[-400:]}")
    if out is not None:
        drift["temps_removed_by_verify"] += out.get("temp_files_removed", 0)
    after = index_keys(cli, problems, when)
    state = group_dir_state(cli.cache_dir)
    if state["temps"]:
        problems.append(f"{when}: temp files of dead writers left after verify: {state['temps']}")
    files = set(state["visible"])
    if after is not None and after != files:
        problems.append(f"{when}: after verify the index lists {sorted(after ^ files)} differently from the files")


def final_checks(cli: Cli, sets, combos, tools_json, work: Path, problems: list[str]) -> dict:
    res = {}
    # The index rebuilt from the files alone, by a fresh process.
    for suffix in ("", "-wal", "-shm"):
        (cli.cache_dir / f"index.sqlite{suffix}").unlink(missing_ok=True)
    rebuilt = index_keys(cli, problems, "final rebuild")
    state = group_dir_state(cli.cache_dir)
    res["groups_at_end"] = len(state["visible"])
    res["temp_files_left"] = len(state["temps"])
    if rebuilt is not None and rebuilt != set(state["visible"]):
        problems.append(f"final: the rebuilt index lists {sorted(rebuilt ^ set(state['visible']))} differently")
    rc, out, err = cli.run(["cache", "verify"])
    if rc != 0 or not out or out.get("ok") is not True:
        problems.append(f"final: cache verify not clean ({rc}): {json.dumps(out)[:600] if out else err[-400:]}")
    # Every (tool set, system) from a fresh process: cached == full prefill, from disk where stored.
    answers, n_disk = {}, 0
    for ti, si in combos:
        stored = set(group_dir_state(cli.cache_dir)["visible"])
        rc, out, err = cli.run(["query", "--tools", str(sets[ti]), "--system", SYSTEMS[si], "--query", "final",
                                "--mode", "compare", "--max-new-tokens", "4", "--ignore-eos"])
        if rc != 0 or out is None:
            problems.append(f"final query {ti}/{si}: exit {rc}: {err.strip()[-400:]}")
            continue
        if out.get("identical") is not True:
            problems.append(f"final query {ti}/{si}: cached != full prefill (first difference "
                            f"{out.get('first_difference')})")
        key = out["group_key"]
        if key in stored:
            n_disk += 1
            if out["compile"]["tier"] != "disk":
                problems.append(f"final query {ti}/{si}: group {key[:12]} is stored but tier {out['compile']['tier']}")
        answers[(ti, si)] = out
    res["final_queries"] = len(answers)
    res["final_queries_from_disk"] = n_disk
    # A fresh server: the same reply and group key for each.
    srv = Server(cli, ["--max-queue", "8"], stderr_path=work / "final_serve.log")
    n_served = 0
    try:
        if not srv.wait_ready(120):
            problems.append("final: the server did not start")
        else:
            for (ti, si), q in answers.items():
                status, resp = http_json(srv.base + "/v1/chat/completions",
                                         chat_body(tools_json[ti], SYSTEMS[si], "final", 4), timeout=120)
                if status != 200:
                    problems.append(f"final serve {ti}/{si}: {status} {str(resp)[:300]}")
                    continue
                n_served += 1
                if resp["contextcache"]["group_key"] != q["group_key"]:
                    problems.append(f"final serve {ti}/{si}: group key differs from the CLI's")
                if resp["choices"][0]["message"].get("tool_calls") or q.get("tool_call"):
                    calls = resp["choices"][0]["message"].get("tool_calls") or []
                    got = calls[0]["function"]["name"] if calls else None
                    want = q["tool_call"]["name"] if q.get("tool_call") else None
                    if got != want:
                        problems.append(f"final serve {ti}/{si}: tool call {got} != CLI's {want}")
                elif reply_text(resp) != q["text"]:
                    problems.append(f"final serve {ti}/{si}: reply {reply_text(resp)!r} != CLI's {q['text']!r}")
    finally:
        srv.kill(signal.SIGTERM)
        if srv.wait(30) is None:
            srv.close()
        srv.close()
    res["final_served"] = n_served
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cli", required=True, type=Path)
    ap.add_argument("--src", type=Path, default=Path(__file__).resolve().parent.parent)
    ap.add_argument("--model", default="builtin:qwen3-test")
    ap.add_argument("--kills", type=int, default=100, help="stop after this many SIGKILLs (default 100)")
    ap.add_argument("--concurrency", type=int, default=4, help="actors per round (default 4)")
    ap.add_argument("--index-drop-every", type=int, default=5, help="delete index.sqlite every N rounds (default 5)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--max-seconds", type=float, default=3600, help="give up (exit 1) after this long")
    ap.add_argument("--work-dir", type=Path, help="default: a temp dir, removed when the run is clean")
    ap.add_argument("--out", type=Path, help="write the JSON record here too")
    args = ap.parse_args()

    t_start = time.monotonic()
    commit = git_commit(args.src)  # at the start: the tree may change while a long run goes on
    rng = random.Random(args.seed)
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="cc-crash-"))
    work.mkdir(parents=True, exist_ok=True)
    cache = work / "cache"
    shutil.rmtree(cache, ignore_errors=True)
    cli = Cli(args.cli, args.model, cache)
    sets = tool_sets(args.src, work / "toolsets", args.seed)
    tools_json = [json.loads(p.read_text()) for p in sets]
    combos = [(ti, si) for ti in range(len(sets)) for si in range(len(SYSTEMS)) if si == 0 or ti % 2 == 0]
    log(NAME, f"{len(sets)} tool sets, {len(combos)} (tool set, system) pairs, work dir {work}")

    problems: list[str] = []
    drift = {"files_not_indexed": 0, "entries_without_file": 0, "temps_before_verify": 0, "temps_removed_by_verify": 0}
    stats = {"rounds": 0, "kills": 0, "kills_on_write": 0, "index_drops": 0, "actors": {}, "killed": {},
             "finished": {}, "serve_replies": 0}
    while stats["kills"] < args.kills:
        if time.monotonic() - t_start > args.max_seconds:
            problems.append(f"gave up after {args.max_seconds} s with {stats['kills']} kills")
            break
        stats["rounds"] += 1
        if args.index_drop_every and stats["rounds"] % args.index_drop_every == 0:
            for suffix in ("", "-wal", "-shm"):
                (cache / f"index.sqlite{suffix}").unlink(missing_ok=True)
            stats["index_drops"] += 1
        actors = run_round(args, cli, sets, combos, tools_json, rng, work, stats)
        for a in actors:
            stats["actors"][a.kind] = stats["actors"].get(a.kind, 0) + 1
            if a.killed:
                stats["kills"] += 1
                stats["killed"][a.kind] = stats["killed"].get(a.kind, 0) + 1
                if a.kill_mode == "on-write":
                    stats["kills_on_write"] += 1
            else:
                stats["finished"][a.kind] = stats["finished"].get(a.kind, 0) + 1
            stats["serve_replies"] += sum(r["status"] == 200 for r in a.replies)
            check_actor(a, problems)
        check_directory(cli, problems, drift, f"round {stats['rounds']}")
        if stats["rounds"] % 5 == 0:
            log(NAME, f"round {stats['rounds']}: {stats['kills']} kills, {len(problems)} inconsistencies")

    final = final_checks(cli, sets, combos, tools_json, work, problems)
    record = {
        "benchmark": "crash_consistency",
        "commit": commit,
        "machine": machine_info(),
        "date_unix": int(time.time()),
        "model": args.model,
        "seed": args.seed,
        "concurrency": args.concurrency,
        "tool_sets": len(sets),
        "pairs": len(combos),
        **stats,
        "between_rounds": drift,
        "final": final,
        "inconsistencies": len(problems),
        "problems": problems[:50],
        "wall_s": round(time.monotonic() - t_start, 1),
    }
    finish(record, args.out, work, keep_work=bool(args.work_dir), ok=not problems)
    log(NAME, f"{stats['kills']} kills in {stats['rounds']} rounds, {len(problems)} inconsistencies, "
              f"{record['wall_s']} s")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
