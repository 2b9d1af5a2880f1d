"""The daemon with timing probes (`bench.load --probe`): where a composition's time goes.

Runs `frontmind` exactly as `python -m frontmind` does, after wrapping three places in
timers; nothing else changes. What it measures, in ms, written as JSON at exit to the
file FRONTMIND_PROBE_OUT names:

- `sql_queue`: a read or write waiting for its connection's thread (aiosqlite runs each
  connection on one thread, one statement at a time), and `sql_depth`, the statements
  already queued on that connection when one is submitted;
- `sql_run`: the statement itself, on its thread;
- `sql_resume`: from the statement's end until the awaiting task runs again (the event
  loop's lag, as a storage read sees it);
- `trinket_hop`: from the composer's scatter until the trinket starts on it (mailbox and
  loop), and `trinket_render`: the render itself, reads included;
- `loop_lag`: a callback queued from a thread every 10 ms, until it runs;
- `gc_young`, `gc_full`: garbage collections (generations 0–1, and 2), each one's time;
- `lag_allowance`: what the composer added to each gather's deadline for the loop's lag.

Bench-only: the timers are wrappers put around the library's functions, never shipped.
"""

from __future__ import annotations

import asyncio
import atexit
import gc
import json
import os
import statistics
import threading
import time
from collections.abc import Callable
from typing import Any

import aiosqlite.core

from actors import _composer, _trinket
from actors._messages import TurnStart

samples: dict[str, list[float]] = {
    name: []
    for name in (
        "sql_queue",
        "sql_depth",
        "sql_run",
        "sql_resume",
        "trinket_hop",
        "trinket_render",
        "loop_lag",
        "gc_young",
        "gc_full",
        "lag_allowance",
    )
}
_scattered: dict[str, float] = {}  # turn id -> when its composer scattered (time.time)


def _summary(values: list[float]) -> dict[str, float]:
    if not values:
        return {"n": 0}
    ordered = sorted(values)
    return {
        "n": len(ordered),
        "median": statistics.median(ordered),
        "p90": ordered[int(0.9 * (len(ordered) - 1))],
        "p99": ordered[int(0.99 * (len(ordered) - 1))],
        "max": ordered[-1],
        "mean": statistics.fmean(ordered),
    }


def _dump() -> None:
    path = os.environ.get("FRONTMIND_PROBE_OUT")
    if path:
        with open(path, "w") as out:
            json.dump({name: _summary(values) for name, values in samples.items()}, out)


_execute = aiosqlite.core.Connection._execute


async def _timed_execute(
    self: aiosqlite.core.Connection, fn: Callable[..., Any], *args: Any, **kwargs: Any
) -> Any:  # the library's own method, timed
    marks: list[float] = []

    def timed() -> Any:
        marks.append(time.perf_counter())
        try:
            return fn(*args, **kwargs)
        finally:
            marks.append(time.perf_counter())

    samples["sql_depth"].append(self._tx.qsize())
    submitted = time.perf_counter()
    try:
        return await _execute(self, timed)  # type: ignore[no-untyped-call]
    finally:
        if len(marks) == 2:
            resumed = time.perf_counter()
            samples["sql_queue"].append((marks[0] - submitted) * 1000)
            samples["sql_run"].append((marks[1] - marks[0]) * 1000)
            samples["sql_resume"].append((resumed - marks[1]) * 1000)


_handle = _trinket.TrinketActor.handle
_sampler: list[threading.Thread] = []


def _sample_lag(loop: asyncio.AbstractEventLoop) -> None:
    def ran(queued: float) -> None:
        samples["loop_lag"].append((time.perf_counter() - queued) * 1000)

    while not loop.is_closed():
        try:
            loop.call_soon_threadsafe(ran, time.perf_counter())
        except RuntimeError:
            return
        time.sleep(0.01)


async def _timed_handle(self: _trinket.TrinketActor, message: Any) -> Any:
    if not _sampler:
        thread = threading.Thread(
            target=_sample_lag, args=(asyncio.get_running_loop(),), daemon=True
        )
        _sampler.append(thread)
        thread.start()
    if not isinstance(message, TurnStart):
        return await _handle(self, message)
    started = time.time()
    scattered = _scattered.get(message.turn.turn_id)
    if scattered is not None:
        samples["trinket_hop"].append((started - scattered) * 1000)
    try:
        return await _handle(self, message)
    finally:
        samples["trinket_render"].append((time.time() - started) * 1000)


_scatter = _composer.scatter_gather  # type: ignore[attr-defined]
_allowance = _composer.ComposerActor._lag_allowance


async def _timed_scatter(refs: Any, message: Any, **kwargs: Any) -> Any:
    _scattered[message.turn.turn_id] = time.time()
    try:
        return await _scatter(refs, message, **kwargs)
    finally:
        del _scattered[message.turn.turn_id]


def _timed_allowance(self: _composer.ComposerActor, lag: float) -> float:
    extra = _allowance(self, lag)
    samples["lag_allowance"].append(extra * 1000)
    return extra


_gc_started: list[float] = []


def _on_gc(phase: str, info: dict[str, int]) -> None:
    if phase == "start":
        _gc_started[:] = [time.perf_counter()]
    elif _gc_started:
        name = "gc_full" if info["generation"] == 2 else "gc_young"
        samples[name].append((time.perf_counter() - _gc_started[0]) * 1000)


def main() -> None:
    gc.callbacks.append(_on_gc)
    aiosqlite.core.Connection._execute = _timed_execute  # type: ignore[method-assign]
    _trinket.TrinketActor.handle = _timed_handle  # type: ignore[method-assign]
    _composer.scatter_gather = _timed_scatter  # type: ignore[attr-defined]
    _composer.ComposerActor._lag_allowance = _timed_allowance  # type: ignore[method-assign]
    atexit.register(_dump)
    from frontmind.cli._main import main as frontmind_main

    frontmind_main()


if __name__ == "__main__":
    main()
