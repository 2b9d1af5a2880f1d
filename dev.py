#!/usr/bin/env python3
"""Frontmind's entry points, needing nothing but python3.

    python3 dev.py demo     the offline demo conversation (the main job)
    python3 dev.py test     ruff (lint and format), mypy --strict and the test suite
    python3 dev.py test --quick
                            the same with the unit and component tests only (no
                            browser, PostgreSQL, SDK suite or slow process tests)
    python3 dev.py bench    every benchmark (see bench/README.md)

Each creates .venv and installs what it needs when missing or when pyproject.toml
changed, then runs.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
PYTHON = VENV / "bin" / "python"
EXTRAS = {
    "demo": "speed",
    "test": "dev,speed,postgres,vectors",
    "bench": "dev,speed,bench,postgres,vectors",
}
# `--quick` leaves out the suites that need more than this process: a browser, the
# PostgreSQL server, the SDK's own tests, child processes and whole conversations.
QUICK = "not slow and not postgres and not browser and not sdk_suite"
# The checkout itself goes on sys.path (a .pth file of our own) besides setuptools'
# editable import hook, which Python consults only after sys.path: then the clone's own
# folder never passes for a `frontmind` namespace package (`python -m frontmind` works
# from the clone's parent directory), and mypy finds the packages and their py.typed.
CHECKOUT_PTH = "frontmind-checkout.pth"


def run(*args: str | Path) -> None:
    code = subprocess.call([str(a) for a in args], cwd=ROOT)
    if code:
        raise SystemExit(code)


def ensure(extras: str) -> None:
    stamp = VENV / f".installed-{extras.replace(',', '-')}"
    pyproject = (ROOT / "pyproject.toml").read_bytes()
    digest = hashlib.sha256(pyproject + CHECKOUT_PTH.encode()).hexdigest()
    if stamp.exists() and stamp.read_text() == digest and PYTHON.exists():
        return
    if not PYTHON.exists():
        print("creating .venv …", flush=True)
        venv.create(VENV, with_pip=True)
    print(f"installing frontmind[{extras}] into .venv …", flush=True)
    run(PYTHON, "-m", "pip", "install", "--quiet", "--upgrade", "pip")
    run(PYTHON, "-m", "pip", "install", "--quiet", "-e", f".[{extras}]")
    purelib = subprocess.check_output(
        [str(PYTHON), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], text=True
    )
    (Path(purelib.strip()) / CHECKOUT_PTH).write_text(f"{ROOT}\n")
    stamp.write_text(digest)


def main() -> None:
    command = sys.argv[1] if len(sys.argv) > 1 else ""
    if command not in EXTRAS:
        raise SystemExit(__doc__)
    ensure(EXTRAS[command])
    if command == "demo":
        run(VENV / "bin" / "frontmind", "demo", *sys.argv[2:])
    elif command == "test":
        options = sys.argv[2:]
        # Spread over the cores (up to 4, pytest-xdist): each test process starts the
        # servers its tests use (PostgreSQL, Chromium) on ports of its own, and most tests
        # wait on child processes and sockets, so 2 processes take some 60% of one's time
        # on 2 cores. The tests that flood a daemon to measure its fairness share the group
        # "floods": one process runs them, one after another. A `-n` given after `test`
        # comes later, and wins (`-n 0`: one process; `-p no:xdist`: pytest alone).
        workers = str(max(1, min(4, os.cpu_count() or 1)))
        spread = ["-n", workers, "--dist", "loadgroup"]
        if "--quick" in options:
            options = ["-m", QUICK, *(o for o in options if o != "--quick")]
            print(
                "quick: unit and component tests only; left out: the console in Chromium, "
                "PostgreSQL, the SDK's own suite and the slow process tests "
                f"(python3 dev.py test runs them all); {workers} test processes",
                flush=True,
            )
        # Without the plugin (`-p no:xdist`) there is no `-n` to give.
        if "no:xdist" not in options:
            options = [*spread, *options]
        run(VENV / "bin" / "ruff", "check", ".")
        run(VENV / "bin" / "ruff", "format", "--check", ".")
        run(VENV / "bin" / "mypy")
        run(PYTHON, "-m", "pytest", *options)
    else:
        run(PYTHON, "-m", "bench.run_all")


if __name__ == "__main__":
    main()
