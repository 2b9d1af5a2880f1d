"""Run every benchmark with its defaults, one after another (`make bench`)."""

from __future__ import annotations

import subprocess
import sys
import time

SCRIPTS = (
    "kernel",
    "compose",
    "deadline",
    "turn_overhead",
    "cache_efficiency",
    "load",
    "postgres",
    "summary_cost",
    "cli_start",
)


def main() -> None:
    failed = []
    for name in SCRIPTS:
        print(f"\n=== bench.{name} ===", flush=True)
        started = time.perf_counter()
        code = subprocess.call([sys.executable, "-m", f"bench.{name}"])
        print(f"(bench.{name}: {time.perf_counter() - started:.0f} s, exit {code})", flush=True)
        if code:
            failed.append(name)
    if failed:
        raise SystemExit(f"failed: {', '.join(failed)}")


if __name__ == "__main__":
    main()
