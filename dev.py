#!/usr/bin/env python3
"""Frontmind's entry points, needing nothing but python3.

    python3 dev.py demo     the offline demo conversation (the main job)
    python3 dev.py test     ruff, mypy --strict and the test suite
    python3 dev.py bench    every benchmark (see bench/README.md)

Each creates .venv and installs what it needs when missing or when pyproject.toml
changed, then runs.
"""

from __future__ import annotations

import hashlib
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


def run(*args: str | Path) -> None:
    code = subprocess.call([str(a) for a in args], cwd=ROOT)
    if code:
        raise SystemExit(code)


def ensure(extras: str) -> None:
    stamp = VENV / f".installed-{extras.replace(',', '-')}"
    digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    if stamp.exists() and stamp.read_text() == digest and PYTHON.exists():
        return
    if not PYTHON.exists():
        print("creating .venv …", flush=True)
        venv.create(VENV, with_pip=True)
    print(f"installing frontmind[{extras}] into .venv …", flush=True)
    run(PYTHON, "-m", "pip", "install", "--quiet", "--upgrade", "pip")
    run(PYTHON, "-m", "pip", "install", "--quiet", "-e", f".[{extras}]")
    stamp.write_text(digest)


def main() -> None:
    command = sys.argv[1] if len(sys.argv) > 1 else ""
    if command not in EXTRAS:
        raise SystemExit(__doc__)
    ensure(EXTRAS[command])
    if command == "demo":
        run(VENV / "bin" / "frontmind", "demo", *sys.argv[2:])
    elif command == "test":
        run(VENV / "bin" / "ruff", "check", ".")
        run(VENV / "bin" / "mypy")
        run(PYTHON, "-m", "pytest", *sys.argv[2:])
    else:
        run(PYTHON, "-m", "bench.run_all")


if __name__ == "__main__":
    main()
