"""The README's library example runs as written (offline); its hosted embedder is
complete as written; its model settings calls are accepted."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

import anyio
import pytest

from tests._daemon import ROOT, child_env

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


def example(heading: str) -> str:
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index(heading) :]
    match = re.search(r"```python\n(.*?)```", section, flags=re.S)
    assert match is not None, f"no python example under {heading}"
    return match.group(1)


async def test_library_example_runs(tmp_path: Path) -> None:
    script = tmp_path / "example.py"
    script.write_text(example("## Library"))
    result = await anyio.run_process(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=child_env(PYTHONPATH=str(ROOT)),
        check=False,
    )
    out, err = result.stdout.decode(), result.stderr.decode()
    assert result.returncode == 0, err
    assert "[add_reminder]" in out
    assert "cache read" in out
    assert "call Bob" in out
    assert "messages in the next request" in out
    assert (tmp_path / "frontmind-data" / "frontmind.db").exists()


VOYAGE_CHECK = """
import json

import anyio
import httpx2

from actors._recall import Embedder, _dimensions
from my_embedders import VoyageEmbedder


def answer(request: httpx2.Request) -> httpx2.Response:
    # Voyage AI's documented shape: POST /v1/embeddings {"input", "model"}, rows
    # {"embedding", "index"} in "data" (here out of order, as nothing promises it).
    assert request.method == "POST" and request.url.path == "/v1/embeddings", request.url
    assert request.headers["authorization"] == "Bearer test-key"
    body = json.loads(request.content)
    assert body["model"] == "voyage-3.5"
    rows = [{"object": "embedding", "embedding": [float(i + 1)] * 1024, "index": i}
            for i in range(len(body["input"]))]
    return httpx2.Response(200, json={"object": "list", "data": rows[::-1], "model": "m"})


class Answered(VoyageEmbedder):
    # The README's class, its requests answered here instead of by the service.
    def __init__(self) -> None:
        super().__init__()
        made = self._client
        self._client = httpx2.AsyncClient(
            base_url=made.base_url, headers=made.headers, transport=httpx2.MockTransport(answer)
        )


async def main() -> None:
    embedder = Answered()
    assert isinstance(embedder, Embedder)
    assert await _dimensions("my_embedders:VoyageEmbedder", embedder) == 1024
    vectors = await embedder.embed(["one", "two", "three"])
    assert [v[0] for v in vectors] == [1.0, 2.0, 3.0], [v[0] for v in vectors]
    print("answered")


anyio.run(main)
"""


def _imported(code: str) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            names |= {alias.name.partition(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.partition(".")[0])
    return names


async def test_the_hosted_embedder_example_needs_nothing_more_and_speaks_the_api(
    tmp_path: Path,
) -> None:
    """The README's hosted embedder imports only the standard library and what
    Frontmind itself depends on (a copied class must load as it is), and asks and
    reads the embeddings API as that API documents it."""
    code = example("A hosted embeddings API")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    required = {re.split(r"[^A-Za-z0-9_.-]", d, maxsplit=1)[0].lower().replace("_", "-")
                for d in project["dependencies"]}  # fmt: skip
    provided = {
        module
        for module, dists in packages_distributions().items()
        if any(d.lower().replace("_", "-") in required for d in dists)
    }
    missing = _imported(code) - set(sys.stdlib_module_names) - provided
    assert not missing, f"the example imports what Frontmind does not install: {missing}"
    (tmp_path / "my_embedders.py").write_text(code)
    (tmp_path / "check.py").write_text(VOYAGE_CHECK)
    result = await anyio.run_process(
        [sys.executable, str(tmp_path / "check.py")],
        cwd=tmp_path,
        env=child_env(PYTHONPATH=f"{tmp_path}:{ROOT}", VOYAGE_API_KEY="test-key"),
        check=False,
    )
    assert result.returncode == 0, result.stderr.decode()
    assert result.stdout.decode().strip() == "answered"


async def test_each_model_settings_call_it_shows_is_accepted(tmp_path: Path) -> None:
    """Every `fm.set_model_settings(...)` the README shows, in a block or inline, is
    accepted under the default config: a call sets all of the continuum's own settings,
    so one that leans on another call's setting is refused."""
    from frontmind import Frontmind

    readme = (ROOT / "README.md").read_text()
    calls = re.findall(r"fm\.set_model_settings\((.*?)\)", readme, flags=re.S)
    assert len(calls) >= 2, calls
    async with Frontmind.open(tmp_path, offline=True) as fm:
        for args in calls:
            await eval(f"fm.set_model_settings({args})", {"fm": fm})
