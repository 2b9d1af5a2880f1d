"""The `anthropic` SDK's own message tests, run against the local Messages API.

At test time the source distribution of the installed SDK version is downloaded from
PyPI with `pip download` into a temporary directory (kept there between runs; nothing of
it enters this repository), its
`tests/api_resources/test_messages.py` and `tests/api_resources/beta/test_messages.py`
(with the conftest and helpers they import) are extracted, and pytest runs them in a
child process against a `LocalMessagesAPI` (their conftest reads `TEST_API_BASE_URL`).

All of them must pass except `EXPECTED_FAILURES`: tests whose requests the real API
would refuse as well. The list is checked both ways, so it cannot go stale.
"""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

import anthropic
import anyio
import pytest

from frontmind.localapi import LocalMessagesAPI
from frontmind.localapi._models import RETIRED

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.sdk_suite]

SUITES = ("tests/api_resources/test_messages.py", "tests/api_resources/beta/test_messages.py")
SUPPORT = (
    "pyproject.toml",  # their pytest settings: asyncio mode, pythonpath, warnings as errors
    "tests/__init__.py",
    "tests/conftest.py",
    "tests/utils.py",
    "tests/_alias_httpx.py",
    "tests/api_resources/__init__.py",
    "tests/api_resources/beta/__init__.py",
)

# test module :: class :: function (every parametrization of it) -> why the API refuses it
EXPECTED_FAILURES = {
    "tests.api_resources.beta.test_messages::TestMessages::"
    "test_method_create_with_all_params_overload_1": (
        "sends `thread` together with cache_control, thinking, context_management and "
        "fallbacks, none of which Threads support: thread_unsupported_request"
    ),
    "tests.api_resources.beta.test_messages::TestMessages::"
    "test_method_create_with_all_params_overload_2": "as overload_1 (streaming)",
    "tests.api_resources.beta.test_messages::TestAsyncMessages::"
    "test_method_create_with_all_params_overload_1": "as the sync test",
    "tests.api_resources.beta.test_messages::TestAsyncMessages::"
    "test_method_create_with_all_params_overload_2": "as the sync test",
    "tests.api_resources.test_messages::TestMessages::test_deprecated_model_warning": (
        "loops over the SDK's deprecated models, among them claude-mythos-preview, whose "
        "end of life (2026-06-30) has passed: the API answers 404 not_found_error (the "
        "model data's [retired] list; test_a_retired_model_is_the_api_s_404 below)"
    ),
    "tests.api_resources.test_messages::TestAsyncMessages::test_deprecated_model_warning": (
        "as the sync test"
    ),
    "tests.api_resources.test_messages::TestMessages::"
    "test_method_create_with_all_params_overload_1": (
        'its tool\'s input_schema has `"properties": {"location": "bar"}`, which is no '
        "JSON Schema 2020-12 (a property's schema is an object or a boolean): 'tools.0.custom."
        "input_schema: JSON schema is invalid' (test_localapi_doc_rules.py, "
        "test_a_tool_schema_that_is_not_valid_json_schema_is_refused)"
    ),
    "tests.api_resources.test_messages::TestMessages::"
    "test_method_create_with_all_params_overload_2": "as overload_1 (streaming)",
    "tests.api_resources.test_messages::TestMessages::test_method_count_tokens_with_all_params": (
        "its tools as create_with_all_params's"
    ),
    "tests.api_resources.test_messages::TestAsyncMessages::"
    "test_method_create_with_all_params_overload_1": "as the sync test",
    "tests.api_resources.test_messages::TestAsyncMessages::"
    "test_method_create_with_all_params_overload_2": "as the sync test",
    "tests.api_resources.test_messages::TestAsyncMessages::"
    "test_method_count_tokens_with_all_params": "as the sync test",
    "tests.api_resources.beta.test_messages::TestMessages::"
    "test_method_count_tokens_with_all_params": (
        "sends thinking.block_binding and context_management with the beta header 'string' "
        "alone: block_binding needs thinking-binding-controls-2026-08-01 ('block_binding: "
        "Extra inputs are not permitted', preserved thinking) and context editing needs "
        "context-management-2025-06-27"
    ),
    "tests.api_resources.beta.test_messages::TestAsyncMessages::"
    "test_method_count_tokens_with_all_params": "as the sync test",
}


# Kept between runs outside the repository: pip takes some 20 s to fetch an sdist (it
# builds its metadata), and the archive of one version never changes.
_CACHE = Path(tempfile.gettempdir()) / "frontmind-anthropic-sdist"


def _sdist(version: str, scratch: Path) -> Path:
    cached = _CACHE / f"anthropic-{version}.tar.gz"
    if not cached.exists():
        _CACHE.mkdir(parents=True, exist_ok=True)
        downloaded = _download_sdist(version, scratch)
        partial = cached.with_suffix(f".{os.getpid()}.part")
        shutil.copyfile(downloaded, partial)
        partial.replace(cached)
    return cached


def _download_sdist(version: str, into: Path) -> Path:
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-binary",
        ":all:",
        "--no-deps",
        "--disable-pip-version-check",
        "--quiet",
        f"anthropic=={version}",
        "-d",
        str(into),
    ]
    # Twice at most: a registry that stalls once (it did, under a busy machine's load,
    # past two minutes) should not fail the suite.
    for attempt in (1, 2):
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
        except subprocess.TimeoutExpired:
            if attempt == 2:
                raise
            continue
        if done.returncode == 0 or attempt == 2:
            break
    assert done.returncode == 0, f"pip download failed:\n{done.stdout}\n{done.stderr}"
    (archive,) = into.glob("anthropic-*.tar.gz")
    return archive


def _extract(archive: Path, into: Path) -> Path:
    wanted = set(SUITES) | set(SUPPORT)
    with tarfile.open(archive) as tar:
        members = []
        for member in tar.getmembers():
            _, _, inner = member.name.partition("/")
            if inner in wanted and member.isfile():
                member.name = inner
                members.append(member)
        assert {m.name for m in members} == wanted, "the sdist's test layout changed"
        tar.extractall(into, members=members, filter="data")
    return into


def _outcomes(report: Path) -> dict[str, str]:
    """test id (module::class::function[param]) -> passed | failed | skipped."""
    outcomes: dict[str, str] = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        module, _, cls = case.get("classname", "").rpartition(".")
        name = f"{module}::{cls}::{case.get('name')}"
        if case.find("failure") is not None or case.find("error") is not None:
            outcomes[name] = "failed"
        elif case.find("skipped") is not None:
            outcomes[name] = "skipped"
        else:
            outcomes[name] = "passed"
    return outcomes


async def test_the_sdk_message_tests_pass_against_the_local_api(tmp_path: Path) -> None:
    version = importlib.metadata.version("anthropic")
    archive = await anyio.to_thread.run_sync(_sdist, version, tmp_path / "dist")
    root = _extract(archive, tmp_path / "sdk")
    report = tmp_path / "report.xml"
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    async with LocalMessagesAPI() as api:
        env["TEST_API_BASE_URL"] = api.base_url
        with anyio.fail_after(180):
            done = await anyio.run_process(
                [
                    sys.executable,
                    "-m",
                    "pytest",
                    "-q",
                    "-p",
                    "tests._alias_httpx",
                    "-p",
                    "no:cacheprovider",
                    "-o",
                    "addopts=",  # theirs asks for pytest-xdist
                    f"--junitxml={report}",
                    *SUITES,
                ],
                cwd=root,
                env=env,
                check=False,
            )
    outcomes = _outcomes(report)
    log = done.stdout.decode(errors="replace")[-4000:]
    assert len(outcomes) >= 100, log
    failing = {name for name, outcome in outcomes.items() if outcome == "failed"}
    unexpected = {name for name in failing if name.split("[")[0] not in EXPECTED_FAILURES}
    assert unexpected == set(), log
    stale = set(EXPECTED_FAILURES) - {name.split("[")[0] for name in failing}
    assert stale == set(), f"these now pass: take them off the list: {sorted(stale)}"
    # 90 pass with anthropic 2.17: most of them, however long the list above grows.
    assert sum(outcome == "passed" for outcome in outcomes.values()) >= 80


@pytest.mark.filterwarnings("ignore:The model .* is deprecated:DeprecationWarning")
async def test_a_retired_model_is_the_api_s_404() -> None:
    """Why `test_deprecated_model_warning` is expected to fail: the SDK still warns about
    claude-mythos-preview, but its end of life has passed, and the local API answers its
    name (and every other retired name of the model data) as the live API does: 404
    not_found_error. The SDK's test cannot expect that (it is the SDK's own file)."""
    assert RETIRED["claude-mythos-preview"] == "2026-06-30"
    async with LocalMessagesAPI() as api:
        client = anthropic.AsyncAnthropic(api_key="test-key", base_url=api.base_url, max_retries=0)
        async with client:
            for name in RETIRED:
                with pytest.raises(anthropic.NotFoundError) as info:
                    await client.messages.create(
                        model=name, max_tokens=16, messages=[{"role": "user", "content": "hi"}]
                    )
                assert info.value.status_code == 404
                assert info.value.body["error"]["type"] == "not_found_error"  # type: ignore[index]
