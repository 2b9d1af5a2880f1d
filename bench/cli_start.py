"""How long the `frontmind` command takes to start, beside `python -c pass`.

Each command runs as a user runs it (the console script beside this interpreter, else
`python -m frontmind`), in a fresh process, the series taking turns round by round; the
wall time and the CPU time (user + system, of the child alone) of each run. For scale,
`python -c "import anthropic"`: what every command paid before they loaded only what
they use. Goal (issue 27): `frontmind --version` ≤ 0.3 s wall on a quiet machine.

    .venv/bin/python -m bench.cli_start [--rounds 10]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench._common import write_results


def _frontmind() -> list[str]:
    script = Path(sys.executable).parent / "frontmind"
    return [str(script)] if script.exists() else [sys.executable, "-m", "frontmind"]


def _timed(command: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall, CPU) seconds of one run of `command`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(command, env=env, check=True, capture_output=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=10)
    rounds = parser.parse_args().rounds
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "FRONTMIND_"))}
    fm = _frontmind()
    with tempfile.TemporaryDirectory(prefix="frontmind-cli-") as data:
        series = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "frontmind --version": [*fm, "--version"],
            "frontmind --help": [*fm, "--help"],
            "frontmind users add": [*fm, "users", "add", "NAME", "--data-dir", data],
            "frontmind stats": [*fm, "stats", "--data-dir", data],
            'python -c "import anthropic"': [sys.executable, "-c", "import anthropic"],
        }
        load_before = os.getloadavg()
        samples: dict[str, list[tuple[float, float]]] = {name: [] for name in series}
        for round_ in range(rounds):
            for name, command in series.items():
                argv = [a.replace("NAME", f"u{round_}") for a in command]
                samples[name].append(_timed(argv, env))
        load_after = os.getloadavg()
    results: dict[str, dict[str, float]] = {}
    print(f"{rounds} rounds; load average {load_before[0]:.2f} before, {load_after[0]:.2f} after")
    print(f"{'command':32} {'wall median':>12} {'min':>8} {'max':>8} {'CPU median':>11}")
    for name, runs in samples.items():
        walls, cpus = [w for w, _ in runs], [c for _, c in runs]
        results[name] = {
            "wall_median_s": statistics.median(walls),
            "wall_min_s": min(walls),
            "wall_max_s": max(walls),
            "cpu_median_s": statistics.median(cpus),
        }
        print(
            f"{name:32} {statistics.median(walls) * 1e3:10.0f} ms {min(walls) * 1e3:6.0f} ms"
            f" {max(walls) * 1e3:6.0f} ms {statistics.median(cpus) * 1e3:9.0f} ms"
        )
    write_results(
        "cli_start",
        {"rounds": rounds, "loadavg_before": load_before, "loadavg_after": load_after, **results},
    )


if __name__ == "__main__":
    main()
