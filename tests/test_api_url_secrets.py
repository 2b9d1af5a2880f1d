"""The Messages API's address as users see it: credentials in ANTHROPIC_BASE_URL (a
gateway's `user:password@`, a `?key=` in its query) are the operator's, and no user of
the daemon gets them back in an error event, an error body or a job's last error."""

from __future__ import annotations

import socket
from pathlib import Path

import anyio
import httpx2
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream

from actors import AnthropicModel, ModelUnavailable
from tests._daemon import COMMAND, ROOT, child_env, reap, sse_events

pytestmark = pytest.mark.anyio

SECRET = "s3cret-gateway-password"
KEY = "q-api-key-in-query"


def closed_port() -> int:
    """A loopback port nothing listens on: a connection to it is refused at once."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def secret_url() -> str:
    return f"http://gateway:{SECRET}@127.0.0.1:{closed_port()}/anthropic?key={KEY}"


async def test_the_model_errors_name_the_api_without_its_credentials() -> None:
    model = AnthropicModel(api_key="k", base_url=secret_url(), max_retries=0, timeout=5)
    try:
        with pytest.raises(ModelUnavailable) as caught:
            await model.model_facts("claude-sonnet-4-6")
    finally:
        await model.aclose()
    message = str(caught.value)
    assert "127.0.0.1" in message  # still says where, for the operator
    assert SECRET not in message
    assert KEY not in message


@pytest.mark.slow
async def test_a_users_turn_error_does_not_carry_the_gateways_credentials(
    tmp_path: Path,
) -> None:
    (tmp_path / "frontmind.toml").write_text("[model]\nmax_retries = 0\n")
    command = [*COMMAND, "serve", "--port", "0", "--data-dir", str(tmp_path)]
    env = child_env(ANTHROPIC_API_KEY="not-a-real-key", ANTHROPIC_BASE_URL=secret_url())
    process = await anyio.open_process(command, cwd=ROOT, env=env)
    assert process.stdout is not None
    try:
        with anyio.fail_after(30):
            line = await BufferedByteReceiveStream(process.stdout).receive_until(b"\n", 1000)
        url = line.decode().strip()
        assert url.startswith("http://"), url
        async with (
            httpx2.AsyncClient(base_url=url, timeout=30) as client,
            client.stream("POST", "/v1/continuums/c1/turns", json={"message": "hello"}) as response,
        ):
            assert response.status_code == 200, await response.aread()
            events = [event async for event in sse_events(response)]
        errors = [data for name, data in events if name == "error"]
        assert errors, events
        assert errors[-1]["type"] == "model_unavailable", errors
        shown = repr(events)
        assert "127.0.0.1" in shown
        assert SECRET not in shown
        assert KEY not in shown
    finally:
        await reap(process)
