"""The request leaves as the bytes of one encoding of the request structs."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from frontmind.localapi import LocalMessagesAPI
from tests._harness import completed, frontmind, run_turn

pytestmark = pytest.mark.anyio


async def test_the_body_sent_is_the_request_encoded_once(tmp_path: Path) -> None:
    async with LocalMessagesAPI() as api, frontmind(api, tmp_path) as fm:
        completed(await run_turn(fm, "c1", "first"))
        request = await fm.context("c1", "second")
        completed(await run_turn(fm, "c1", "second"))
    body = api.state.requests[-1].body
    assert body == msgspec.json.encode(request)[:-1] + b',"stream":true}'
    assert msgspec.json.decode(body)["stream"] is True
