"""Shared helpers for the benchmark scripts: timing summaries, results files, the loop."""

from __future__ import annotations

import json
import platform
import statistics
import sys
from collections.abc import Callable, Coroutine, Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import anyio

RESULTS = Path(__file__).resolve().parent / "results"


def summary(samples_s: Sequence[float]) -> dict[str, float]:
    """Median, p90, p99 and mean of durations given in seconds, reported in µs."""
    ordered = sorted(samples_s)

    def pick(q: float) -> float:
        return ordered[min(int(q * len(ordered)), len(ordered) - 1)] * 1e6

    return {
        "median_us": statistics.median(ordered) * 1e6,
        "p90_us": pick(0.90),
        "p99_us": pick(0.99),
        "mean_us": statistics.fmean(ordered) * 1e6,
        "n": len(ordered),
    }


def loop_name() -> str:
    try:
        import uvloop  # noqa: F401

        return "uvloop"
    except ImportError:
        return "asyncio"


def run(main: Callable[[], Coroutine[Any, Any, None]]) -> None:
    options = {"use_uvloop": True} if loop_name() == "uvloop" else {}
    anyio.run(main, backend="asyncio", backend_options=options)


def write_results(name: str, results: dict[str, Any]) -> Path:
    RESULTS.mkdir(exist_ok=True)
    results = {
        "benchmark": name,
        "python": sys.version.split()[0],
        "machine": platform.machine(),
        "loop": loop_name(),
        **results,
    }
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(results, indent=2) + "\n")
    print(f"results written to {path.relative_to(RESULTS.parent.parent)}")
    return path


def loaded(fm: Any, continuum: str) -> AbstractAsyncContextManager[object]:
    """Hold the continuum's lane loaded, as a conversation in progress does.

    `Frontmind.compose` on a continuum with no lane builds one and stops it again
    (previews leave no actors behind): that is not what a turn's composition costs.
    """
    lane: AbstractAsyncContextManager[object] = fm._runtime._using(fm.user_name, continuum)
    return lane
