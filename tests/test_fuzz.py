"""The fuzz corpus (tests/fuzz_cases.py) against one real daemon: no 5xx, no
plain-text error body, no error that sends back more than an excerpt of what it
refused, whatever the request."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx2
import pytest

from frontmind import Config, Frontmind
from frontmind._frontmind import NoModel
from frontmind.server._daemon import build_app
from frontmind.server._routes import ENDPOINTS
from tests._daemon import daemon
from tests._postgres import PostgresServer
from tests._raw import address
from tests.fuzz_cases import PAGED, Case, RouteInfo, corpus

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


def app_routes(app: Any) -> list[RouteInfo]:
    """The routes of the app build_app makes, through its middleware layers, each with
    the query parameters the endpoint table gives it."""
    while not hasattr(app, "routes"):
        app = app.app
    query = {
        (e.path, e.method): frozenset(p.name for p in e.params if p.where == "query")
        for e in ENDPOINTS
    }
    return [
        RouteInfo(
            route.path,
            frozenset(route.methods),
            frozenset().union(*(query.get((route.path, m), frozenset()) for m in route.methods)),
        )
        for route in app.routes
        if getattr(route, "methods", None)
    ]


# An error body quotes at most an excerpt of a rejected input: the message is capped at
# 1,000 characters (frontmind/_exceptions.py), a few times that once JSON-escaped.
MAX_ERROR_BODY = 8192


def problem(case: Case, status: int, content_type: str, body: bytes) -> str | None:
    if status >= 500:
        return f"{status}"
    if case.expect is not None and status != case.expect:
        return f"{status}, expected {case.expect}: {body[:200]!r}"
    if status >= 400 and len(body) > MAX_ERROR_BODY:
        return f"{status} with a {len(body)}-byte error body: {body[:80]!r}"
    if status >= 400:
        if not content_type.startswith("application/json"):
            return f"{status} with content-type {content_type!r}"
        try:
            error = json.loads(body)["error"]
        except (ValueError, KeyError, TypeError):
            return f"{status} with a body that is not a JSON error: {body[:80]!r}"
        if not (isinstance(error.get("type"), str) and isinstance(error.get("message"), str)):
            return f"{status} with a malformed error: {error!r}"
        # The corpus's long inputs are runs of one character: an excerpt of one is
        # 30 of them (storage.excerpt; a path 90, a label up to its 64), an echo the run.
        if re.search(r"(.)\1{99}", error["message"]):
            return f"{status} echoes a long input: {error['message'][:120]!r}"
        if " cursor:" in case.name and "cursor" not in error["message"]:
            return f"{status} does not name the cursor: {error['message'][:120]!r}"
    return None


@pytest.mark.parametrize("store", ["sqlite", "postgres"])
async def test_fuzz_corpus_gets_no_5xx_and_only_json_errors(
    tmp_path: Path, store: str, request: pytest.FixtureRequest
) -> None:
    # On both stores: PostgreSQL refuses what SQLite takes (a NUL in text), and an
    # input that reaches it unchecked is a 503 there alone.
    env = {}
    if store == "postgres":
        server: PostgresServer = request.getfixturevalue("pg_server")
        env["FRONTMIND_DATABASE_URL"] = server.new_database()
    async with Frontmind.open(tmp_path / "routes", Config(), model=NoModel()) as fm:
        routes = app_routes(build_app(fm))
    assert {"/v1/reminders", "/v1/continuums/{continuum_id}/turns"} <= {r.path for r in routes}
    data = tmp_path / "data"
    data.mkdir()
    # The corpus's oversize bodies are just over 1 MiB.
    (data / "frontmind.toml").write_text("[server]\nmax_body_bytes = 1048576\n")
    async with daemon(data, **env) as d, d.client() as client:
        turn = await client.post(f"/v1/continuums/{PAGED}/turns", json={"message": "hi"})
        assert turn.status_code == 200
        assert b"event: turn.completed" in turn.content, turn.content
        host, port = address(d.url)
        cases = corpus(routes, host, port)
        # Every route is fuzzed (at least its wrong methods, odd paths, queries and foreign
        # origins), and the corpus does not shrink unnoticed.
        assert len(cases) >= 1800, len(cases)
        for route in routes:
            assert sum(f" {route.path}" in c.name for c in cases) >= 20, route.path
        assert {r.path for r in routes if "cursor" in r.query} >= {
            "/v1/reminders",
            "/v1/memories",
            "/v1/continuums/{continuum_id}/messages",
            "/v1/jobs",
        }
        failures = []
        for case in cases:
            try:
                response = await client.request(
                    case.method, case.path, content=case.body, headers=case.headers
                )
            except httpx2.TransportError as exc:
                failures.append(f"{case.name}: no answer ({exc!r})")
                continue
            found = problem(
                case,
                response.status_code,
                response.headers.get("content-type", ""),
                response.content,
            )
            if found:
                failures.append(f"{case.name}: {found}")
        assert failures == [], f"{len(failures)} of {len(cases)}:\n" + "\n".join(failures[:60])
        assert (await client.get("/healthz")).status_code == 200
        assert await d.stop() == 0
        assert b"Traceback" not in await d.read_stderr()
