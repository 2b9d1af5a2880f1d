"""Installing and embedding Frontmind as a user does: from a clone into a fresh virtual
environment, type-checked with `mypy --strict`, beside an application's own packages.

Each test runs real processes (pip, mypy, the interpreter) on real files.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import venv
from pathlib import Path
from typing import Any

import pytest

from tests._daemon import ROOT, child_env

pytestmark = pytest.mark.slow

APP = '''\
"""A small application embedding Frontmind, as its README shows."""

from typing import Annotated

import anyio
import msgspec

from frontmind import Frontmind, TextDelta, Turn, TurnCompleted, tool


@tool(timeout_s=5)
async def stock(
    sku: Annotated[str, msgspec.Meta(description="The item's SKU.")], *, turn: Turn
) -> dict[str, int]:
    """How many of an item are in stock."""
    return {"count": len(sku), "asked_at": int(turn.now)}


@tool
def shout(text: str) -> str:
    """Upper-case a text."""
    return text.upper()


async def main() -> None:
    loud: str = shout("hello")
    async with Frontmind.open("./data", offline=True, tools=[stock, shout]) as fm:
        async for event in fm.turn("ada", loud):
            if isinstance(event, TextDelta):
                print(event.text, end="")
            elif isinstance(event, TurnCompleted):
                print(event.usage.cache_read_input_tokens)


anyio.run(main)
'''

# The decorated function keeps its parameters and return type: misuse is caught.
MISUSE = '''\
from frontmind import tool


@tool(timeout_s=1)
def shout(text: str) -> str:
    """Upper-case a text."""
    return text.upper()


count: int = shout("hello")
shout(3)
'''


def _run(*command: str | Path, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """Run a command; an empty value in `env` removes that variable."""
    environment = {k: v for k, v in child_env(**env).items() if v}
    return subprocess.run(
        [str(part) for part in command],
        cwd=cwd,
        env=environment,
        capture_output=True,
        text=True,
        check=False,
    )


def test_an_app_embedding_frontmind_passes_mypy_strict(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text(APP)
    (tmp_path / "misuse.py").write_text(MISUSE)
    cache = f"--cache-dir={tmp_path / '.mypy_cache'}"
    clean = _run(sys.executable, "-m", "mypy", "--strict", cache, "app.py", cwd=tmp_path)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    caught = _run(sys.executable, "-m", "mypy", "--strict", cache, "misuse.py", cwd=tmp_path)
    assert caught.returncode == 1
    errors = [line for line in caught.stdout.splitlines() if ": error:" in line]
    assert len(errors) == 2, caught.stdout
    assert 'expression has type "str", variable has type "int"' in errors[0]
    assert 'incompatible type "int"; expected "str"' in errors[1]


@pytest.mark.parametrize("layer", ["storage", "runtime", "actors"])
def test_a_shadowing_package_fails_the_import_at_once_in_one_line(
    tmp_path: Path, layer: str
) -> None:
    (tmp_path / layer).mkdir()
    (tmp_path / layer / "__init__.py").write_text("ROWS = []\n")
    result = _run(sys.executable, "-c", "import frontmind", cwd=tmp_path)
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    mine = tmp_path.resolve() / layer / "__init__.py"
    theirs = ROOT / layer / "__init__.py"
    assert last == (
        f"ImportError: frontmind: the {layer!r} package Python finds ({mine}) is not "
        f"Frontmind's own ({theirs}): rename your {layer!r} package, or run from a "
        f"directory that does not hold it, so that the two do not share one name"
    )
    # Elsewhere the same interpreter imports it as usual.
    assert _run(sys.executable, "-c", "import frontmind", cwd=tmp_path / layer).returncode == 0


def test_python_m_frontmind_runs_from_the_clones_parent_directory(tmp_path: Path) -> None:
    # The clone's folder is named `frontmind`, as `git clone` names it.
    (tmp_path / "frontmind").symlink_to(ROOT, target_is_directory=True)
    result = _run(sys.executable, "-m", "frontmind", "--version", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("frontmind ")


def _clone(into: Path) -> Path:
    """The checkout's files as a fresh clone has them (tracked and new, not ignored)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    clone = into / "frontmind"
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():
            target = clone / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    return clone


def test_pip_install_from_a_clone_into_a_fresh_venv(tmp_path: Path) -> None:
    """The README's install commands, as written there, into a new environment."""
    readme = (ROOT / "README.md").read_text()
    assert "\npip install . " in readme
    assert "pip install '.[postgres,otel]'" in readme
    assert "pip install 'frontmind[" not in readme  # Frontmind is not on a package index
    clone = _clone(tmp_path)
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    # A user's fresh environment: no PYTHONPATH into a checkout (the test run's own may
    # have one), so that only the installed copy can be found.
    home = {
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "HOME": os.environ.get("HOME", str(tmp_path)),
        "PYTHONPATH": "",
    }

    installed = _run(python, "-m", "pip", "install", "--quiet", ".", cwd=clone, **home)
    assert installed.returncode == 0, installed.stderr
    # From a directory holding none of the clone, the installed package is what runs.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    version = _run(env_dir / "bin" / "frontmind", "--version", cwd=elsewhere, **home)
    assert version.returncode == 0, version.stderr
    probe = (
        "import importlib.util, pathlib, frontmind.server\n"
        "for name in ('frontmind', 'runtime', 'actors', 'storage'):\n"
        "    spec = importlib.util.find_spec(name)\n"
        "    folder = pathlib.Path(spec.origin).parent\n"
        "    assert 'site-packages' in str(folder), folder\n"
        "    assert (folder / 'py.typed').is_file(), name\n"
        "static = pathlib.Path(frontmind.server.__file__).parent / 'console' / 'static'\n"
        "assert (static / 'app.js').is_file()\n"
        "assert (static.parent.parent.parent / 'models.toml').is_file()\n"
        "print('ok')\n"
    )
    checked = _run(python, "-c", probe, cwd=elsewhere, **home)
    assert checked.stdout.strip() == "ok", checked.stderr
    # From the clone's parent too: the installed package wins over the clone's folder.
    from_parent = _run(python, "-m", "frontmind", "--version", cwd=tmp_path, **home)
    assert from_parent.returncode == 0, from_parent.stderr

    extras = _run(python, "-m", "pip", "install", "--quiet", ".[postgres,otel]", cwd=clone, **home)
    assert extras.returncode == 0, extras.stderr
    both = _run(
        python, "-c", "import asyncpg, opentelemetry.sdk.trace; print('ok')", cwd=elsewhere, **home
    )
    assert both.stdout.strip() == "ok", both.stderr


def test_a_run_names_the_suites_it_skipped_and_ci_fails_them_instead(tmp_path: Path) -> None:
    missing = str(tmp_path / "no-chromium")
    select = ("-m", "pytest", "tests/test_console.py", "-k", "phone", "-p", "no:cacheprovider")
    skipped = _run(sys.executable, *select, cwd=ROOT, FRONTMIND_TEST_CHROMIUM=missing, CI="")
    assert skipped.returncode == 0, skipped.stdout
    summary = skipped.stdout.split("skipped suites")[1]
    assert (
        f"tests/test_console.py: 1 skipped: {missing} is missing (apt-get install chromium)"
        in summary
    )
    failed = _run(sys.executable, *select, cwd=ROOT, FRONTMIND_TEST_CHROMIUM=missing, CI="true")
    assert failed.returncode == 1
    assert "the console tests need Chromium and Playwright in CI" in failed.stdout


# An extra named on the package (`frontmind[postgres]`) installs from a package index,
# which Frontmind is not on; from a clone it is `'.[postgres]'`.
_INDEX_EXTRA = re.compile(rb"frontmind\[[A-Za-z0-9_,\s-]+\]")


def test_no_shipped_file_installs_an_extra_from_a_package_index() -> None:
    named = [
        f"{path.relative_to(ROOT)}: {match.group().decode()}"
        for package in ("frontmind", "actors", "storage", "runtime")
        for path in sorted((ROOT / package).rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts
        for match in _INDEX_EXTRA.finditer(path.read_bytes())
    ]
    assert named == []
    # The messages that name an extra say how to install it from the clone.
    sources = [(ROOT / p).read_text() for p in ("storage/_postgres.py", "storage/_sqlite.py")]
    assert "pip install '.[postgres]'" in sources[0]
    assert "pip install '.[vectors]'" in sources[1]


_PROBE = """\
import inspect, json, os

import pytest


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session):
    items = [
        {
            "id": item.nodeid,
            "markers": sorted({mark.name for mark in item.iter_markers()}),
            "fixtures": sorted(getattr(item, "fixturenames", ())),
            "params": [str(v) for v in item.callspec.params.values()]
            if hasattr(item, "callspec") else [],
            "chromium": "async_playwright" in inspect.getsource(item.module),
        }
        for item in session.items
    ]
    with open(os.environ["PROBE_OUT"], "w") as out:
        json.dump(items, out)
"""

_EXCLUDED = {"slow", "postgres", "browser", "sdk_suite"}


def _collected(tmp_path: Path, name: str, *selection: str) -> list[dict[str, Any]]:
    """The tests `pytest` selects, each with its markers as they stand after every
    collection hook ran (a marker added after `-m` has filtered would show here)."""
    (tmp_path / "quick_probe.py").write_text(_PROBE)
    out = tmp_path / f"{name}.json"
    command = ("-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider")
    result = _run(
        sys.executable,
        *command,
        "-p",
        "quick_probe",
        *selection,
        cwd=ROOT,
        PYTHONPATH=f"{tmp_path}{os.pathsep}{ROOT}",
        PROBE_OUT=str(out),
    )
    assert result.returncode == 0, result.stdout + result.stderr
    items: list[dict[str, Any]] = json.loads(out.read_text())
    return items


def test_the_quick_selection_leaves_out_every_slow_or_external_suite(tmp_path: Path) -> None:
    """`python3 dev.py test --quick` passes dev.py's QUICK to `pytest -m`: it selects
    exactly the tests marked none of slow, postgres, browser and sdk_suite, and none that
    needs PostgreSQL or Chromium by what it uses rather than by its marks."""
    spec = importlib.util.spec_from_file_location("dev", ROOT / "dev.py")
    assert spec is not None
    assert spec.loader is not None
    dev = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(dev)
    everything = _collected(tmp_path, "all")
    quick = _collected(tmp_path, "quick", "-m", dev.QUICK)
    assert quick, "the quick selection is empty"
    unmarked = {t["id"] for t in everything if not _EXCLUDED & set(t["markers"])}
    assert {t["id"] for t in quick} == unmarked
    for test in quick:
        assert not _EXCLUDED & set(test["markers"]), test
        assert not {"pg_server", "pgvector_server"} & set(test["fixtures"]), test
        assert "postgres" not in test["params"], test
        assert not test["chromium"], test  # its module drives Chromium through Playwright
    # The suites it leaves out are all there in the full run.
    marks = {mark for t in everything for mark in t["markers"]}
    assert marks >= _EXCLUDED
