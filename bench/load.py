"""Load: the daemon over HTTP at 50, 200, 500 and 1,000 continuums, all running turns at
once; then the memory a loaded continuum costs at 100 turns of history.

The real daemon runs as a child process, talking to the local Messages API in a second
child process (with a configured time to first token), so neither the simulated model's
work nor this script's client is counted as the daemon's: the CPU of all three is
reported, and a machine they saturate is flagged (the daemon is then waiting for a core,
not for itself). For each level: turns per second, latency percentiles (whole turn from
the request, its wait for a slot in the turn queue, i.e. until its `turn.started` event,
first token, compose), sections left out or served stale (goal ≤ 0.1%), by section,
errors (goal: none; turns refused at the door with 503 `overloaded`, busy refusals and
full mailboxes counted apart: a refused turn is no error), the daemon's CPU
per turn, how long its event loop took to answer a ping while loaded (a thread of this
script asks /healthz every 50 ms: what any composition waits for on top of its own
work), and its marginal memory per continuum (RssAnon: heap, not the database's
memory-mapped pages).

Memory at 100 turns: continuums given 100 turns of history (short chat: 14 words asked,
40 answered) straight through storage, then loaded by one turn each; the daemon's
RssAnon growth per continuum (goal ≤ 100 KiB), with the text's own share beside it.
`--memory-only` runs just this (about half a minute); `--memtrace` runs the daemon under
bench/_memtrace.py (tracemalloc) and prints the growth per continuum by file and line
(its RSS figure then includes tracemalloc's own bookkeeping: read the traced one).

`--cpu-share F` runs the daemon on a fraction F of one core (continued for F × 20 ms of
every 20 ms, stopped for the rest, as a scheduler shares a busy machine): what a loaded
machine does to the sections, reproducibly. The `--busy-levels` (200) run again that way
on `--busy-share` (a quarter) of a core. A level that outlasts `--level-timeout` starts
no more turns and reports what finished. `--probe` runs the daemon under
bench/_probe.py and prints where compositions waited (the reader connections' queues,
the statements, the event loop's lag, the trinkets' mailboxes, garbage collections).

Each conversation holds one connection at a time (the client's pool is sized to the
level) and the daemon's `server.max_connections` is set above the level, so every turn
reaches the daemon's own queue; the soft limit on open files is raised to the hard one.
`--max-active` and `--max-wait-s` set `[turns] max_active` and `max_wait_s` (default:
the daemon's own).

    .venv/bin/python -m bench.load [--levels 50,200,500,1000] [--turns 4] [--ttft-ms 100]
        [--cpu-share 1.0] [--busy-levels 200] [--busy-share 0.25]
        [--memory-continuums 150] [--history-turns 100] [--level-timeout 120] [--probe]
        [--memory-only] [--memtrace] [--max-active N] [--max-wait-s S]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import resource
import signal
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream

from bench._common import run, summary, write_results
from bench._model_server import model_server
from bench._store import sentence
from storage import DEFAULT_USER, Message, SQLiteStorage, TextBlock, TurnRecord, TurnWrite, moment

ROOT = Path(__file__).resolve().parent.parent
LEFT_OUT = ("timeout", "failed")
GROUP = 4  # continuums loaded at once by the memory measure
# A kept-alive connection is dropped by the client well before the daemon's own
# `server.keep_alive_s` (5 s) closes it: a request sent on a connection the daemon is
# closing at that moment fails with a ReadError (what the 1,000 level used to end with).
KEEPALIVE_S = 2.0


def raise_file_limit() -> None:
    """A thousand conversations hold a thousand sockets on each side at once: the soft
    limit on open files goes up to the hard one (the daemon and model server inherit it),
    where a default of 1,024 would fail the level with connection errors."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 1 << 16 if hard == resource.RLIM_INFINITY else hard
    if soft != resource.RLIM_INFINITY and soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def rss_anon_kib(pid: int) -> int:
    """The process's anonymous resident memory: its heap, without file-backed pages (the
    readers map the database; those pages are the OS page cache, not the daemon's)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1])
    raise RuntimeError("no RssAnon in /proc")


class Throttle:
    """Runs a process on `share` of a core: continued for share × 20 ms, stopped for the
    rest (its every thread, as a scheduler's time slices on a busy machine would)."""

    PERIOD = 0.02

    def __init__(self, pid: int, share: float) -> None:
        self._pid, self._share = pid, share
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Throttle:
        if self._share < 1.0:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._share < 1.0:
            self._stop.set()
            self._thread.join()
            os.kill(self._pid, signal.SIGCONT)

    def _run(self) -> None:
        on, off = self.PERIOD * self._share, self.PERIOD * (1 - self._share)
        while not self._stop.is_set():
            os.kill(self._pid, signal.SIGCONT)
            time.sleep(on)
            os.kill(self._pid, signal.SIGSTOP)
            time.sleep(off)


class Pinger:
    """Asks the daemon's /healthz every 50 ms from a thread of its own (blocking socket):
    the answer's latency is the daemon's event loop lag plus a trivial request, measured
    without this script's own (busy) event loop in the way."""

    def __init__(self, base_url: str) -> None:
        host, port = base_url.removeprefix("http://").rstrip("/").rsplit(":", 1)
        self._address = (host, int(port))
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Pinger:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        conn = http.client.HTTPConnection(*self._address, timeout=60)
        try:
            while not self._stop.wait(0.05):
                started = time.perf_counter()
                conn.request("GET", "/healthz")
                conn.getresponse().read()
                self.samples.append(time.perf_counter() - started)
        finally:
            conn.close()


@asynccontextmanager
async def daemon(
    url: str,
    data: Path,
    probe: Path | None = None,
    memtrace: Path | None = None,
    config: str = "",
    server: str = "",
) -> AsyncIterator[tuple[Process, str]]:
    """The daemon on `data`, talking to the model server at `url`; yields it and its URL.
    `config`: lines of its `[turns]` table, `server`: of its `[server]` table.
    With `probe`, it runs under bench/_probe.py, which writes its timings there at exit;
    with `memtrace`, under bench/_memtrace.py (tracemalloc, see `memtrace_snapshot`)."""
    text = f"[turns]\nmax_queued = 4\n{config}" + (f"[server]\n{server}" if server else "")
    (data / "frontmind.toml").write_text(text)
    module = "frontmind" if probe is None else "bench._probe"
    if memtrace is not None:
        module = "bench._memtrace"
    command = [sys.executable, "-m", module, "serve", "--port", "0", "--data-dir", str(data)]
    env = {**os.environ, "ANTHROPIC_BASE_URL": url, "ANTHROPIC_API_KEY": "bench"}
    if probe is not None:
        env["FRONTMIND_PROBE_OUT"] = str(probe)
    if memtrace is not None:
        env["FRONTMIND_MEMTRACE_OUT"] = str(memtrace)
    process = await anyio.open_process(command, cwd=ROOT, env=env)
    assert process.stdout is not None
    async with process:
        try:
            # Under tracemalloc every import is traced: on a busy machine, a minute or more.
            with anyio.fail_after(30 if memtrace is None else 180):
                line = await BufferedByteReceiveStream(process.stdout).receive_until(b"\n", 200)
            yield process, line.decode()
        finally:
            os.kill(process.pid, signal.SIGCONT)  # never leave it stopped by a throttle
            process.terminate()
            await process.wait()


async def one_turn(
    client: httpx2.AsyncClient, continuum: str, text: str
) -> tuple[float, dict[str, Any]]:
    """One turn over SSE: its time, and its last event ({name: data}) or {"error": ...}."""
    done = await timed_turn(client, continuum, text)
    seconds = done.pop("seconds", 0.0)
    done.pop("first_s", None)
    done.pop("queued_s", None)
    return seconds, done


async def timed_turn(client: httpx2.AsyncClient, continuum: str, text: str) -> dict[str, Any]:
    """One turn over SSE: its whole time, its wait for a slot (until `turn.started`), time
    to first text, and how it ended; a refusal as {"error": ..., "status": ...}."""
    started = time.perf_counter()
    first: float | None = None
    admitted: float | None = None
    done: dict[str, Any] = {}
    async with client.stream(
        "POST", f"/v1/continuums/{continuum}/turns", json={"message": text}
    ) as response:
        if response.status_code != 200:
            body = (await response.aread()).decode(errors="replace")[:200]
            return {"error": f"HTTP {response.status_code}: {body}", "status": response.status_code}
        name = ""
        async for line in response.aiter_lines():
            if line.startswith("event: "):
                name = line[7:]
                if name == "turn.started" and admitted is None:
                    admitted = time.perf_counter() - started
                elif name == "text.delta" and first is None:
                    first = time.perf_counter() - started
            elif line.startswith("data: ") and name in ("turn.completed", "error"):
                done = {name: json.loads(line[6:])}
    done["seconds"] = time.perf_counter() - started
    done["first_s"] = first
    done["queued_s"] = admitted
    return done


async def level(
    url: str,
    model_pid: int,
    continuums: int,
    turns: int,
    share: float,
    limit: float,
    probe: bool = False,
    config: str = "",
) -> dict[str, Any]:
    """One fresh daemon, `continuums` conversations of `turns` turns each, all at once
    (`config`: lines of the daemon's `[turns]` table)."""
    waits: dict[str, Any] | None = None
    with tempfile.TemporaryDirectory() as tmp:
        probe_file = Path(tmp) / "probe.json" if probe else None
        # Every conversation's connection reaches the daemon (its cap above the level, the
        # pinger and the record reads beside them), so the queue is the daemon's own.
        server = f"max_connections = {continuums + 100}\n"
        async with daemon(url, Path(tmp), probe_file, config=config, server=server) as (
            process,
            base_url,
        ):
            # One connection per conversation: a turn at a time each.
            limits = httpx2.Limits(
                max_connections=continuums + 8,
                max_keepalive_connections=continuums + 8,
                keepalive_expiry=KEEPALIVE_S,
            )
            async with httpx2.AsyncClient(base_url=base_url, timeout=300, limits=limits) as client:
                await one_turn(client, "warmup", "hello")
                rss_before = rss_anon_kib(process.pid)
                cpu_before = cpu_seconds(process.pid), cpu_seconds(model_pid), time.process_time()
                totals: list[float] = []
                firsts: list[float] = []
                composes: list[float] = []
                queued: list[float] = []
                errors: list[str] = []
                refused: list[str] = []  # 503 overloaded: refused at the door, no error
                stop_at = time.monotonic() + limit

                async def conversation(index: int) -> None:
                    for turn in range(turns):
                        if time.monotonic() > stop_at:
                            return
                        done = await timed_turn(
                            client, f"load-{index}", f"message {turn} from user {index}"
                        )
                        if "turn.completed" in done:
                            totals.append(done["seconds"])
                            if done["first_s"] is not None:
                                firsts.append(done["first_s"])
                            if done["queued_s"] is not None:
                                queued.append(done["queued_s"])
                            composes.append(done["turn.completed"]["timings_ms"]["compose"] / 1000)
                        elif done.get("status") == 503 and "overloaded" in done["error"]:
                            refused.append(done["error"][:300])
                        else:
                            errors.append(json.dumps(done.get("error", done))[:300])

                started = time.perf_counter()
                with Throttle(process.pid, share), Pinger(base_url) as pinger:
                    async with anyio.create_task_group() as tg:
                        for index in range(continuums):
                            tg.start_soon(conversation, index)
                wall = time.perf_counter() - started
                cpu_after = cpu_seconds(process.pid), cpu_seconds(model_pid), time.process_time()
                rss_after = rss_anon_kib(process.pid)
                sections: dict[str, dict[str, int]] = {}
                first_turns = 0  # sections left out of a continuum's first turn
                for index in range(continuums):
                    answer = await client.get(f"/v1/continuums/load-{index}/turns")
                    if answer.status_code == 404:
                        continue  # every turn of it refused at the door: nothing stored
                    records = answer.json()
                    ordered = records["turns"]  # a page is in time order
                    for number, record in enumerate(ordered):
                        for section in record["sections"]:
                            if number == 0 and section["status"] in LEFT_OUT:
                                first_turns += 1
                            counts = sections.setdefault(section["status"], {})
                            counts[section["name"]] = counts.get(section["name"], 0) + 1
        if probe_file is not None and probe_file.exists():
            waits = json.loads(probe_file.read_text())
    count = len(totals)
    by_status = {status: sum(names.values()) for status, names in sections.items()}
    left_out = sum(by_status.get(status, 0) for status in LEFT_OUT)
    stale = by_status.get("stale", 0)
    all_sections = max(sum(by_status.values()), 1)
    daemon_cpu, model_cpu, client_cpu = (
        after - before for after, before in zip(cpu_after, cpu_before, strict=True)
    )
    cores = os.cpu_count() or 1
    busy = (daemon_cpu + model_cpu + client_cpu) / wall  # cores in use by the three
    total, first, compose = summary(totals or [0]), summary(firsts or [0]), summary(composes or [0])
    wait = summary(queued or [0])
    ping = summary(pinger.samples or [0])
    load_1m = os.getloadavg()[0]
    result = {
        "continuums": continuums,
        "turns_per_continuum": turns,
        "turns_completed": count,
        "stopped_early": count + len(errors) + len(refused) < continuums * turns,
        "errors": len(errors),
        "refused_at_the_door": len(refused),
        "refusal_samples": refused[:3],
        "busy_refusals": sum("HTTP 429" in e for e in errors),
        "mailbox_full": sum("mailbox full" in e for e in errors)
        + sum(1 for e in errors if "MailboxFull" in e),
        "error_samples": errors[:5],
        "wall_s": wall,
        "turns_per_s": count / wall,
        "total": total,
        "queue_wait": wait,
        "first_token": first,
        "compose": compose,
        "loop_ping": ping,
        "section_statuses": by_status,
        "left_out_by_section": {
            status: names for status, names in sections.items() if status in (*LEFT_OUT, "stale")
        },
        "sections_left_out": left_out,
        "sections_left_out_of_first_turns": first_turns,
        "sections_stale": stale,
        "sections_total": all_sections,
        "sections_left_out_share": left_out / all_sections,
        "sections_left_out_or_stale_share": (left_out + stale) / all_sections,
        "daemon_cpu_ms_per_turn": daemon_cpu * 1000 / max(count, 1),
        "daemon_cores": daemon_cpu / wall,
        "model_server_cores": model_cpu / wall,
        "client_cores": client_cpu / wall,
        "machine_saturated": busy > 0.9 * cores,
        "rss_anon_kib_before": rss_before,
        "rss_anon_kib_after": rss_after,
        "rss_anon_kib_per_continuum": (rss_after - rss_before) / continuums,
        "waits_ms": waits,
        "load_average_1m": load_1m,
    }
    ms = 1000
    print(
        f"{continuums:>4} continuums × {turns}: {count} turns in {wall:5.1f} s = "
        f"{count / wall:6.1f} turns/s; errors {len(errors)} (busy {result['busy_refusals']}, "
        f"mailbox full {result['mailbox_full']}); refused at the door {len(refused)}; "
        f"load average {load_1m:.1f}"
        + ("; STOPPED at the level's time limit" if result["stopped_early"] else "")
    )
    print(
        f"      total p50 {total['median_us'] / ms:7.1f} p90 {total['p90_us'] / ms:7.1f} "
        f"p99 {total['p99_us'] / ms:7.1f} ms; queue wait p50 {wait['median_us'] / ms:.1f} "
        f"p99 {wait['p99_us'] / ms:.1f} ms; first token p50 {first['median_us'] / ms:.1f} ms; "
        f"compose p50 {compose['median_us'] / ms:.2f} p99 {compose['p99_us'] / ms:.2f} ms; "
        f"loop ping p50 {ping['median_us'] / ms:.1f} p99 {ping['p99_us'] / ms:.1f} ms"
    )
    print(
        f"      sections left out {left_out}, stale {stale} of {all_sections} "
        f"({result['sections_left_out_share']:.2%} left out, goal ≤ 0.1%; "
        f"{first_turns} of those in first turns)"
        + (f" {result['left_out_by_section']}" if left_out + stale else "")
    )
    print(
        f"      daemon CPU {result['daemon_cpu_ms_per_turn']:.1f} ms/turn; cores used: daemon "
        f"{result['daemon_cores']:.2f}, model server {result['model_server_cores']:.2f}, "
        f"client {result['client_cores']:.2f} of {cores}"
        + (" (machine saturated)" if result["machine_saturated"] else "")
        + f"; {result['rss_anon_kib_per_continuum']:.0f} KiB per continuum"
    )
    if waits:
        parts = [
            f"{name} {w['median']:.1f}/{w['p99']:.1f}" + (" ms" if name != "sql_depth" else "")
            for name, w in waits.items()
            if w.get("n")
        ]
        print("      waits p50/p99: " + ", ".join(parts))
    return result


async def fill(path: Path, continuums: int, turns: int) -> int:
    """`turns` turns of short chat in each continuum, ending just now; returns the bytes
    of message text per continuum."""
    rng = random.Random(5)
    text = 0
    now = time.time() - turns * 10
    async with await SQLiteStorage.open(path) as storage:
        for c in range(continuums):
            for i in range(turns):
                asked = Message("user", (TextBlock(sentence(rng, 14)),))
                answered = Message("assistant", (TextBlock(sentence(rng, 40)),))
                text += len(asked.text().encode()) + len(answered.text().encode())
                at = now + i * 10
                record = TurnRecord(
                    f"turn_{c:08x}{i:024x}",
                    f"mem-{c}",
                    "completed",
                    moment(at),
                    moment(at + 2),
                    "bench",
                    "",
                )
                await storage.commit_turn(DEFAULT_USER, TurnWrite(record, (asked, answered)))
    return text // continuums


async def memtrace_snapshot(trace: Path) -> None:
    """Have the daemon under bench/_memtrace.py take a snapshot; wait until it has."""

    def snapshot() -> None:
        go = Path(f"{trace}.go")
        go.touch()
        while go.exists():  # the daemon's thread removes it when done
            time.sleep(0.05)

    await anyio.to_thread.run_sync(snapshot)


async def memory(url: str, continuums: int, history: int, memtrace: bool = False) -> dict[str, Any]:
    """The daemon's heap growth per continuum loaded with `history` turns of history.
    With `memtrace`, the daemon runs under tracemalloc and the growth is also printed by
    file and line (the RSS figure then includes tracemalloc's own bookkeeping)."""
    traced: dict[str, Any] | None = None
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp)
        trace = data / "memtrace.json" if memtrace else None
        warm = 20  # loaded first, so caches and pools have grown before the measure
        text = await fill(data / "frontmind.db", continuums + warm, history)
        async with daemon(url, data, memtrace=trace) as (process, base_url):
            limits = httpx2.Limits(max_connections=100, keepalive_expiry=KEEPALIVE_S)
            async with httpx2.AsyncClient(base_url=base_url, timeout=300, limits=limits) as client:

                async def load(first: int, count: int) -> None:
                    # A few at a time: what stays is the loaded continuums, not the
                    # high-water mark of many turns' passing allocations at once.
                    for group in range(first, first + count, GROUP):
                        async with anyio.create_task_group() as tg:
                            for c in range(group, min(group + GROUP, first + count)):
                                tg.start_soon(one_turn, client, f"mem-{c}", "hello again")

                await load(continuums, warm)
                before = rss_anon_kib(process.pid)
                if trace is not None:
                    await memtrace_snapshot(trace)
                await load(0, continuums)
                after = rss_anon_kib(process.pid)
                if trace is not None:
                    await memtrace_snapshot(trace)
                    traced = json.loads(trace.read_text())
    per = (after - before) / continuums
    if traced is not None:
        print(f"tracemalloc: {traced['total_kib'] / continuums:.1f} KiB per continuum; by line:")
        for row in traced["top"]:
            if abs(row["kib"]) / continuums >= 0.05:
                print(
                    f"  {row['kib'] / continuums:7.2f} KiB {row['count'] / continuums:7.1f} "
                    f"blocks  {row['where']}"
                )
    print(
        f"memory: {continuums} continuums with {history} turns of history: "
        f"{per:.0f} KiB per loaded continuum (goal ≤ 100 KiB), of which message text "
        f"{text / 1024:.0f} KiB"
    )
    return {
        "continuums": continuums,
        "history_turns": history,
        "rss_anon_kib_per_continuum": per,
        "text_kib_per_continuum": text / 1024,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--levels", default="50,200,500,1000")
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--ttft-ms", type=float, default=100.0)
    parser.add_argument("--cpu-share", type=float, default=1.0)
    parser.add_argument(
        "--busy-levels", default="200", help="levels run again on a quarter of a core"
    )
    parser.add_argument("--busy-share", type=float, default=0.25)
    parser.add_argument("--level-timeout", type=float, default=300.0)
    parser.add_argument("--max-active", type=int, help="[turns] max_active (default: its own)")
    parser.add_argument("--max-wait-s", type=float, help="[turns] max_wait_s (default: its own)")
    parser.add_argument("--memory-continuums", type=int, default=150)
    parser.add_argument("--history-turns", type=int, default=100)
    parser.add_argument("--probe", action="store_true", help="time the waits (bench/_probe.py)")
    parser.add_argument(
        "--memory-only", action="store_true", help="only the memory at --history-turns"
    )
    parser.add_argument(
        "--memtrace", action="store_true", help="the memory by file and line (tracemalloc)"
    )
    args = parser.parse_args()
    if args.memory_only:
        args.levels = args.busy_levels = ""
    if not (0 < args.cpu_share <= 1 and 0 < args.busy_share <= 1):
        parser.error("--cpu-share and --busy-share must be in (0, 1]")

    raise_file_limit()
    config = "".join(
        f"{key} = {value}\n"
        for key, value in (("max_active", args.max_active), ("max_wait_s", args.max_wait_s))
        if value is not None
    )

    async def body() -> None:
        levels = [int(n) for n in args.levels.split(",") if n]
        print(
            f"{args.turns} turns per continuum, time to first token {args.ttft_ms:.0f} ms, "
            f"daemon CPU share {args.cpu_share:g}"
        )
        busy_levels = [int(n) for n in args.busy_levels.split(",") if n]
        results = []
        busy = []
        mem: dict[str, Any] | None = None
        async with model_server(args.ttft_ms, 400) as (url, model):
            for continuums in levels:
                results.append(
                    await level(
                        url,
                        model.pid,
                        continuums,
                        args.turns,
                        args.cpu_share,
                        args.level_timeout,
                        args.probe,
                        config,
                    )
                )
            if busy_levels:
                print(f"a busy machine: the daemon on {args.busy_share:g} of a core")
            for continuums in busy_levels:
                busy.append(
                    await level(
                        url,
                        model.pid,
                        continuums,
                        args.turns,
                        args.busy_share,
                        args.level_timeout,
                        args.probe,
                        config,
                    )
                )
            if args.memory_continuums:
                mem = await memory(url, args.memory_continuums, args.history_turns, args.memtrace)
        write_results(
            "load",
            {
                "ttft_ms": args.ttft_ms,
                "turns_per_continuum": args.turns,
                "cpu_share": args.cpu_share,
                "turns_config": config,
                "levels": results,
                "busy_share": args.busy_share,
                "busy_levels": busy,
                "memory": mem,
            },
        )
        failed = sum(r["errors"] for r in (*results, *busy))
        if failed:
            raise SystemExit(f"{failed} turns failed")

    run(body)


if __name__ == "__main__":
    main()
