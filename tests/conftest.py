"""Shared fixtures. aiosqlite needs asyncio, so anyio's plugin is pinned to it."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    return "asyncio"
