"""The README's library example runs as written (offline)."""

from __future__ import annotations

import re
import sys
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
