"""The daemon under tracemalloc (`bench.load --memtrace`): where a loaded continuum's
memory goes.

Runs `frontmind` exactly as `python -m frontmind` does, with tracemalloc started first.
Each time the file FRONTMIND_MEMTRACE_OUT + ".go" appears (removed once done), a thread
takes a snapshot (a signal would interrupt the server mid-request); from the second on,
the growth since the first is written, grouped by file and line, to the file
FRONTMIND_MEMTRACE_OUT names (JSON: the top lines, each with its KiB and allocations).
Bench-only, never shipped.
"""

from __future__ import annotations

import json
import os
import threading
import time
import tracemalloc
from pathlib import Path

_first: list[tracemalloc.Snapshot] = []


def _snapshot() -> None:
    snapshot = tracemalloc.take_snapshot().filter_traces(
        [tracemalloc.Filter(False, tracemalloc.__file__)]
    )
    if not _first:
        _first.append(snapshot)
        return
    stats = snapshot.compare_to(_first[0], "lineno")
    rows = [
        {
            "where": f"{s.traceback[0].filename}:{s.traceback[0].lineno}",
            "kib": s.size_diff / 1024,
            "count": s.count_diff,
        }
        for s in stats[:60]
    ]
    total = sum(s.size_diff for s in stats) / 1024
    with open(os.environ["FRONTMIND_MEMTRACE_OUT"], "w") as out:
        json.dump({"total_kib": total, "top": rows}, out)


def _watch() -> None:
    go = Path(os.environ["FRONTMIND_MEMTRACE_OUT"] + ".go")
    while True:
        if go.exists():
            _snapshot()
            go.unlink()
        time.sleep(0.05)


def main() -> None:
    tracemalloc.start(1)
    threading.Thread(target=_watch, daemon=True).start()
    from frontmind.cli._main import main as frontmind_main

    frontmind_main()


if __name__ == "__main__":
    main()
