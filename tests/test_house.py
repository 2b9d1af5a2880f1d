"""The house rules: which package may import which, what each exports, what loads when.

These walk the source instead of trusting the eye: a new import arrow that points up, a
new export, or an HTTP server loaded by `import frontmind` fails here first.
"""

from __future__ import annotations

import ast
import importlib
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx2
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream

import actors
import frontmind
import frontmind.config
import frontmind.localapi
import runtime
import storage
from frontmind.localapi import _tokens as localapi_tokens
from tests._daemon import ROOT, child_env, run_cli
from tests.test_readme import example as readme_example

PACKAGES = ("frontmind", "actors", "runtime", "storage")


def _modules(package: str) -> Iterator[tuple[str, Path]]:
    base = ROOT / package.replace(".", "/")
    for path in sorted(base.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        yield ".".join(parts), path


def _imports(module: str, path: Path) -> Iterator[str]:
    """Every module `module` imports, anywhere in its body (lazy imports included)."""
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                keep = len(base) - node.level + (1 if is_package else 0)
                target = ".".join(base[:keep] + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            yield target


def _project(name: str) -> str | None:
    """The project layer `name` belongs to (frontmind.localapi is a layer of its own)."""
    if name == "frontmind.localapi" or name.startswith("frontmind.localapi."):
        return "frontmind.localapi"
    top = name.split(".")[0]
    return top if top in PACKAGES else None


# What each layer may import of the project. Arrows only point down.
ALLOWED = {
    "runtime": {"runtime"},
    "storage": {"storage"},
    "actors": {"actors", "runtime", "storage"},
    "frontmind.localapi": {"frontmind.localapi"},
    "frontmind": {"frontmind", "frontmind.localapi", "actors", "runtime", "storage"},
}


def test_imports_only_point_down() -> None:
    wrong = []
    for package in PACKAGES:
        for module, path in _modules(package):
            layer = _project(module)
            assert layer is not None
            for target in _imports(module, path):
                target_layer = _project(target)
                if target_layer is not None and target_layer not in ALLOWED[layer]:
                    wrong.append(f"{module} imports {target}")
    assert wrong == []


def test_a_layer_reaches_another_through_its_exports_alone() -> None:
    """A lower layer's private modules (`actors._ttl`) are its own: the layers above
    import what its `__init__` exports, so a change inside it stays inside it."""
    wrong = []
    for package in PACKAGES:
        for module, path in _modules(package):
            layer = _project(module)
            for target in _imports(module, path):
                target_layer = _project(target)
                if target_layer in (None, layer):
                    continue
                inside = target.removeprefix(target_layer).split(".")
                if any(part.startswith("_") for part in inside):
                    wrong.append(f"{module} imports {target}")
    assert wrong == []


def test_no_two_modules_import_each_other() -> None:
    """No import circle anywhere, imports for type checking included: a module that
    needs another's type takes a protocol of its own (runtime/_workers.py `Drainable`)."""
    modules = {module: path for package in PACKAGES for module, path in _modules(package)}
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        targets = set()
        for target in _imports(module, path):
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != module:
                targets.add(target)
        graph[module] = targets

    def reaches(start: str, goal: str) -> bool:
        seen, todo = set(), [start]
        while todo:
            current = todo.pop()
            if current == goal:
                return True
            if current not in seen:
                seen.add(current)
                todo.extend(graph[current])
        return False

    circles = sorted(
        f"{module} -> {target}"
        for module, targets in graph.items()
        for target in targets
        if reaches(target, module)
    )
    assert circles == []


def test_the_kernel_and_the_local_api_use_no_project_third_parties() -> None:
    """`runtime` is the actor kernel alone; the local API needs no storage or model client."""
    forbidden = {
        "runtime": {"starlette", "uvicorn", "anthropic", "aiosqlite", "httpx2"},
        "storage": {"starlette", "uvicorn", "anthropic"},
        "frontmind.localapi": {"anthropic", "aiosqlite"},
    }
    for package, names in forbidden.items():
        for module, path in _modules(package):
            for target in _imports(module, path):
                assert target.split(".")[0] not in names, f"{module} imports {target}"
    assert not (ROOT / "runtime" / "edges").exists()
    assert {p.name for p in (ROOT / "runtime").iterdir() if p.is_dir()} <= {"__pycache__"}


def test_the_import_walker_sees_relative_and_lazy_imports(tmp_path: Path) -> None:
    """The walker itself: a lazy upward import inside a function is found."""
    source = tmp_path / "mod.py"
    source.write_text("def f():\n    from ..frontmind import x\n    import actors._tools\n")
    found = set(_imports("storage.sub.mod", source))
    assert found == {"storage.frontmind", "actors._tools"}
    package = tmp_path / "__init__.py"
    package.write_text("from ._port import Storage\nfrom .. import actors\n")
    assert set(_imports("storage", package)) == {"storage._port", ""}


EXPORTS = {
    frontmind: {
        "Composed",
        "Continuum",
        "ContinuumModel",
        "Document",
        "Job",
        "McpServerStatus",
        "Memory",
        "MemoryHit",
        "Message",
        "ModelChoice",
        "ModelRequest",
        "Reminder",
        "RemoteTurn",
        "ToolsReload",
        "TurnRecord",
        "TurnUsage",
        "User",
        "UserForgotten",
        "BudgetExceeded",
        "ComposeTimeout",
        "InvalidModelSettings",
        "McpUnavailable",
        "ModelOverloaded",
        "ModelRefused",
        "ModelRejected",
        "ModelStreamError",
        "ModelUnavailable",
        "SettingsError",
        "ImportCollision",
        "MigrationMismatch",
        "UserExists",
        "Forbidden",
        "RequestTimeout",
        "UnsupportedMediaType",
        "UnknownContinuum",
        "SchemaTooNew",
        "Busy",
        "Client",
        "ClientError",
        "Config",
        "ConfigError",
        "ContinuumSummary",
        "DataDirLocked",
        "Frontmind",
        "FrontmindError",
        "InvalidInput",
        "MessageTooLarge",
        "ModelError",
        "NotFound",
        "Overloaded",
        "Page",
        "ShuttingDown",
        "StorageError",
        "StorageUnavailable",
        "SyncClient",
        "TextDelta",
        "ThinkingDelta",
        "Tool",
        "ToolFinished",
        "ToolStarted",
        "Trinket",
        "Turn",
        "TurnCompleted",
        "TurnError",
        "TurnEvent",
        "TurnStarted",
        "TurnStream",
        "__version__",
        "escape_field",
        "escape_text",
        "load_config",
        "tool",
    },
    frontmind.config: {
        "CONFIG_FILE",
        "CacheSettings",
        "ComposerSettings",
        "Config",
        "CustomTool",
        "CustomTrinket",
        "DocumentsConfig",
        "HistorySettings",
        "McpServer",
        "MemorySettings",
        "ModelPatch",
        "ModelSettings",
        "OfflineConfig",
        "RuntimeConfig",
        "ServerConfig",
        "StorageConfig",
        "ToolSettings",
        "TrinketSettings",
        "TurnSettings",
        "default_data_dir",
        "load_config",
    },
}


@pytest.mark.parametrize("module", list(EXPORTS), ids=lambda m: m.__name__)
def test_public_exports_are_exactly_the_documented_ones(module: object) -> None:
    exported = set(module.__all__)  # type: ignore[attr-defined]
    assert exported == EXPORTS[module]  # type: ignore[index]
    for name in exported:
        assert hasattr(module, name), name


@pytest.mark.parametrize(
    "module", [frontmind.localapi, runtime, actors, storage], ids=lambda m: m.__name__
)
def test_every_export_exists_and_nothing_private_is_exported(module: object) -> None:
    names = module.__all__  # type: ignore[attr-defined]
    assert len(set(names)) == len(names)
    for name in names:
        assert hasattr(module, name), name
        assert not name.startswith("_") or name == "__version__", name


def test_every_public_class_of_frontmind_says_what_it_is() -> None:
    """`help(frontmind.TurnError)` shows Frontmind's own docstring, not the one a class
    inherits (msgspec.Struct's, which documents msgspec's options)."""
    for name in frontmind.__all__:
        exported = getattr(frontmind, name)
        if isinstance(exported, type):
            assert (exported.__dict__.get("__doc__") or "").strip(), name


def test_the_readme_lists_the_public_api() -> None:
    readme = (ROOT / "README.md").read_text()
    for name in [*EXPORTS[frontmind], *frontmind.localapi.__all__]:
        assert f"`{name}`" in readme, name


def _loaded_by(statement: str) -> set[str]:
    """The top-level packages and project modules a fresh interpreter holds after it."""
    code = f"import sys\n{statement}\nprint(' '.join(sorted(sys.modules)))\n"
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=child_env(), capture_output=True, check=True
    )
    return set(result.stdout.decode().split())


def test_import_frontmind_loads_no_http_server() -> None:
    loaded = _loaded_by("import frontmind")
    assert "frontmind" in loaded
    tops = {m.split(".")[0] for m in loaded}
    assert not tops & {"uvicorn", "starlette", "anthropic", "actors", "storage"}, tops
    assert not {m for m in loaded if m.startswith(("frontmind.server", "frontmind.cli"))}
    assert "frontmind.localapi" not in loaded
    # Names still arrive on first use, from the modules behind the face.
    used = _loaded_by("from frontmind import Frontmind, TurnCompleted")
    assert {"actors", "storage", "frontmind._frontmind"} <= used
    assert not {m.split(".")[0] for m in used} & {"uvicorn", "starlette"}


def test_a_client_of_the_daemon_loads_no_database_driver() -> None:
    # The client reads the records' and events' types from `actors` and `storage`; the
    # storage adapters (their drivers, numpy for the vector cache: 0.3 s) load only
    # when a store is opened.
    loaded = _loaded_by("from frontmind import Client, SyncClient")
    tops = {m.split(".")[0] for m in loaded}
    assert not tops & {"anthropic", "numpy", "aiosqlite", "asyncpg", "uvicorn"}, tops
    assert not {"storage._sqlite", "storage._postgres"} & loaded
    from storage import PostgresStorage, SQLiteStorage  # and arrive on first use

    assert SQLiteStorage.__module__ == "storage._sqlite"
    assert PostgresStorage.__module__ == "storage._postgres"


def test_the_local_api_loads_nothing_else_of_the_project() -> None:
    """`frontmind.localapi` stands alone by every path, `frontmind/__init__` included."""
    loaded = _loaded_by("import frontmind.localapi")
    assert "frontmind.localapi" in loaded
    tops = {m.split(".")[0] for m in loaded}
    assert not tops & {"actors", "storage", "runtime", "anthropic", "aiosqlite"}, tops
    project = {m for m in loaded if m.startswith("frontmind.")}
    assert all(m.startswith("frontmind.localapi") for m in project), project
    # The `frontmind local-api` command too, its one-line error for a mistake included.
    command = (
        "from frontmind.cli import main\n"
        "try:\n    main(['local-api', '--host', 'nosuchhost.invalid'])\n"
        "except SystemExit as exc:\n    assert exc.code == 2, exc.code"
    )
    loaded = _loaded_by(command)
    assert "frontmind.localapi" in loaded
    tops = {m.split(".")[0] for m in loaded}
    assert not tops & {"actors", "storage", "runtime", "anthropic", "aiosqlite"}, tops


def test_each_room_is_served_to_its_audience() -> None:
    """The library face at the top, the daemon in `server`, the commands in `cli`."""
    import frontmind.cli
    import frontmind.server

    assert set(frontmind.server.__all__) == {"build_app", "serve"}
    assert set(frontmind.cli.__all__) == {"main"}
    rooms = {p.name for p in (ROOT / "frontmind").iterdir() if p.is_dir()} - {"__pycache__"}
    assert rooms == {"server", "cli", "localapi"}
    # The daemon's server and its console live in the server room, not in the local API.
    assert not (ROOT / "frontmind" / "localapi" / "_asgi.py").exists()
    assert (ROOT / "frontmind" / "server" / "console" / "static" / "app.js").exists()


def test_the_command_room_names_every_command() -> None:
    """`frontmind.cli`'s docstring lists the commands its parser has, all of them."""
    import argparse

    import frontmind.cli
    from frontmind.cli._main import build_parser

    (commands,) = (
        action.choices
        for action in build_parser()._actions
        if isinstance(action, argparse._SubParsersAction)
    )
    first = (frontmind.cli.__doc__ or "").split("\n\n")[0]
    named = set(re.findall(r"[a-z][a-z-]*", first.partition(":")[2]))
    assert set(commands) <= named, set(commands) - named


def test_every_option_of_every_command_says_what_it_does() -> None:
    """`frontmind local-api --help` listed `--host HOST` and `--port PORT` bare: not
    what they bind, nor that the port is a free one unless given."""
    import argparse

    from frontmind.cli._main import build_parser

    bare: list[str] = []

    def walk(parser: argparse.ArgumentParser, path: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, f"{path} {name}")
            elif action.help is None:
                bare.append(f"{path} {'/'.join(action.option_strings) or action.dest}")

    walk(build_parser(), "frontmind")
    assert bare == []


def test_the_local_api_estimates_tokens_near_frontmind() -> None:
    """Frontmind budgets with 4 bytes a token; the local API counts with the formula
    calibrated on the live API (bench/README.md, "Token counts"). On prose they stay
    within a third of each other, so budgets and the cache guard keep their meaning."""
    prose = (
        "The quick brown fox jumps over the lazy dog. We decided to ship the launch on "
        "Tuesday after the keynote; remind me to call Ana about the budget tomorrow. "
    ) * 8
    product = actors.estimate_tokens(prose)
    local = localapi_tokens.estimate_text_tokens(prose)
    assert abs(product - local) / local <= 0.35, (product, local)


def test_internals_stay_importable_from_private_modules() -> None:
    assert importlib.import_module("frontmind._frontmind").NoModel is not None
    assert importlib.import_module("frontmind.server._daemon").build_app is not None
    assert importlib.import_module("frontmind._exceptions").HTTP_STATUS


@pytest.mark.slow
@pytest.mark.anyio
async def test_version_and_module_entry_point() -> None:
    code, out, err = await run_cli("--version")
    assert code == 0, err
    assert out.strip() == f"frontmind {frontmind.__version__}"
    assert frontmind.__version__[0].isdigit()


@pytest.mark.slow
@pytest.mark.anyio
@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("inspect", "--continuum", "not ok!"), "continuum id 'not ok!' is malformed"),
        (("inspect", "--data-dir", "{file}"), "{file}"),
        (("inspect", "--config", "{bad_config}"), "composer"),
        (("serve", "--offline", "--port", "{busy_port}"), "already in use"),
        (("serve", "--offline", "--port", "99999"), "--port: must be 0 (any free port) to 65535"),
        (("local-api", "--host", "nosuchhost.invalid"), "cannot be resolved"),
        (("chat", "--offline", "--continuum", "bad id"), "continuum id 'bad id' is malformed"),
    ],
)
async def test_common_mistakes_print_one_line(
    tmp_path: Path, args: tuple[str, ...], expected: str
) -> None:
    a_file = tmp_path / "not-a-dir"
    a_file.write_text("x")
    bad_config = tmp_path / "bad.toml"
    bad_config.write_text("[composer]\ndeadline_ms = -5\n")
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    busy_port = listener.extra(anyio.abc.SocketAttribute.local_port)
    values = {"file": str(a_file), "bad_config": str(bad_config), "busy_port": str(busy_port)}
    try:
        argv = [a.format(**values) for a in args]
        if "--data-dir" not in argv and argv[0] != "local-api":
            argv += ["--data-dir", str(tmp_path / "data")]
        code, out, err = await run_cli(*argv)
    finally:
        await listener.aclose()
    assert code == 2, (out, err)
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("frontmind: error: ")
    assert expected.format(**values) in lines[0]


@pytest.mark.slow
@pytest.mark.anyio
async def test_a_non_editable_install_works_from_another_directory(tmp_path: Path) -> None:
    """Build the wheel, install it (not editable) into a fresh target, run it elsewhere."""
    wheels, site, elsewhere = tmp_path / "wheels", tmp_path / "site", tmp_path / "elsewhere"
    elsewhere.mkdir()
    # Built from a copy of the tree: setuptools keeps a build/ directory beside the source,
    # which would litter the checkout and could carry stale modules into the wheel.
    source = tmp_path / "source"
    shutil.copytree(
        ROOT,
        source,
        ignore=shutil.ignore_patterns(
            ".git", ".venv", "build", "dist", "*.egg-info", "*_cache", "__pycache__", "artifacts"
        ),
    )
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--quiet"]
    await anyio.run_process(
        [*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(wheels), str(source)],
        cwd=tmp_path,
    )
    (wheel,) = wheels.glob("frontmind-*.whl")
    await anyio.run_process([*pip, "install", "--no-deps", "--target", str(site), str(wheel)])
    env = child_env(PYTHONPATH=str(site))

    where = await anyio.run_process(
        [sys.executable, "-c", "import frontmind, actors; print(frontmind.__file__)"],
        cwd=elsewhere,
        env=env,
    )
    assert where.stdout.decode().startswith(str(site))
    version = await anyio.run_process(
        [sys.executable, "-m", "frontmind", "--version"], cwd=elsewhere, env=env
    )
    assert version.stdout.decode().startswith("frontmind ")

    (elsewhere / "example.py").write_text(readme_example("## Library"))
    ran = await anyio.run_process([sys.executable, "example.py"], cwd=elsewhere, env=env)
    assert "cache read" in ran.stdout.decode()

    command = [
        str(site / "bin" / "frontmind"),
        "serve",
        "--offline",
        "--port",
        "0",
        "--data-dir",
        str(elsewhere / "data"),
    ]
    process = await anyio.open_process(command, cwd=elsewhere, env=env)
    try:
        assert process.stdout is not None
        with anyio.fail_after(30):
            line = await BufferedByteReceiveStream(process.stdout).receive_until(b"\n", 1000)
        url = line.decode().strip()
        assert url.startswith("http://127.0.0.1:")
        # The console's files came with the wheel (package data), deep links included.
        async with httpx2.AsyncClient(base_url=url, timeout=30) as http:
            page = await http.get("/ui/continuums/ada")
            assert page.status_code == 200
            assert 'src="../app.js"' in page.text  # named from /ui/continuums/
            for name in ("app.js", "api.js", "context.js", "turns.js", "console.css"):
                assert (await http.get(f"/ui/{name}")).status_code == 200, name
        process.send_signal(signal.SIGTERM)
        with anyio.fail_after(30):
            assert await process.wait() == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
        await process.aclose()
