"""Users over HTTP, against the real daemon as a child process: two users' tokens drive
every route, and nothing one of them gets back holds the other's data."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from frontmind._users import token_digest
from storage import PostgresStorage
from tests._daemon import daemon, run_cli, turn
from tests._postgres import PostgresServer

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

ADMIN = "admin-token-for-tests"
WORDS = {"alice": "zebra", "bob": "walrus", "default": "otter"}


def auth(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


async def ok(response: httpx2.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json()


async def search_done(client: httpx2.AsyncClient) -> str:
    """The context window once the user's background search has finished."""
    with anyio.fail_after(30):
        while True:
            response = await client.get("/v1/continuums/main/context", params={"message": "hm"})
            text = json.dumps(await ok(response))
            if "still running" not in text:
                return text


async def test_two_users_see_only_their_own_data_on_every_route(tmp_path: Path) -> None:
    # One user added with the CLI before the daemon starts, one through the daemon.
    code, out, err = await run_cli("users", "add", "alice", "--data-dir", str(tmp_path))
    assert code == 0, err
    tokens = {"alice": out.strip(), "default": ADMIN}
    assert "shown only now" in err
    async with daemon(tmp_path, "--token", ADMIN) as d:
        async with d.client(headers=auth(ADMIN)) as admin:
            created = await ok(await admin.post("/v1/users", json={"name": "bob"}), 201)
            assert set(created) == {"name", "token"}
            assert created["name"] == "bob"
            tokens["bob"] = created["token"]
            again = await admin.post("/v1/users", json={"name": "bob"})
            assert again.status_code == 409
            assert again.json()["error"]["type"] == "conflict"
            listed = await ok(await admin.get("/v1/users"))
            assert [u["name"] for u in listed["users"]] == ["alice", "bob"]
            assert tokens["bob"] not in json.dumps(listed)
        reminder_ids: dict[str, int] = {}
        seen: dict[str, list[str]] = {name: [] for name in tokens}
        for name, token in tokens.items():
            word = WORDS[name]
            async with d.client(headers=auth(token)) as c:
                await ok(
                    await c.post(
                        "/v1/documents", json={"label": "profile", "content": f"profile {word}"}
                    ),
                    201,
                )
                reminder = await ok(
                    await c.post("/v1/reminders", json={"text": f"quarterly call {word}"}), 201
                )
                reminder_ids[name] = reminder["id"]
                await ok(
                    await c.post("/v1/memories", json={"text": f"quarterly memory {word}"}), 201
                )
                # Each user's "main" has its own model settings.
                own = {"max_tokens": {"alice": 1111, "bob": 2222, "default": 3333}[name]}
                await ok(await c.put("/v1/continuums/main/settings", json=own))
                for text in (f"my quarterly word is {word}", "search for quarterly"):
                    events = await turn(c, "main", text)
                    assert events[-1][0] == "turn.completed"
                    seen[name].append(json.dumps(events))
        for name, token in tokens.items():
            word = WORDS[name]
            async with d.client(headers=auth(token)) as c:
                context = await search_done(c)
                assert f"profile {word}" in context  # the user's own system prompt
                assert f"quarterly call {word}" in context
                assert "nothing found" not in context
                seen[name].append(context)
                settings = await ok(await c.get("/v1/continuums/main/settings"))
                assert (
                    settings["own"]["max_tokens"]
                    == {"alice": 1111, "bob": 2222, "default": 3333}[name]
                )
                for path in (
                    "/v1/continuums/main/turns",
                    "/v1/continuums/main/messages",
                    "/v1/reminders?include_completed=1",
                    "/v1/memories",
                    "/v1/memories?q=quarterly",
                    "/v1/documents",
                ):
                    body = json.dumps(await ok(await c.get(path)))
                    assert word in body, (name, path)
                    seen[name].append(body)
                # Another user's reminder id is as good as none.
                other = next(n for n in tokens if n != name)
                refused = await c.post(f"/v1/reminders/{reminder_ids[other]}/complete", json={})
                assert refused.status_code == 404
                seen[name].append(refused.text)
        for name, bodies in seen.items():
            for body in bodies:
                for other, word in WORDS.items():
                    if other != name:
                        assert word not in body, (name, other, body[:300])
        # Nothing was completed by those refusals; the owner still can.
        async with d.client(headers=auth(tokens["bob"])) as bob:
            open_ = await ok(await bob.get("/v1/reminders"))
            assert [r["id"] for r in open_["reminders"]] == [reminder_ids["bob"]]
            await ok(await bob.post(f"/v1/reminders/{reminder_ids['bob']}/complete", json={}))
            # A user's token does not manage users or read the instance-wide metrics.
            for forbidden in (
                await bob.post("/v1/users", json={"name": "mallory"}),
                await bob.get("/v1/users"),
                await bob.get("/metrics"),
            ):
                assert forbidden.status_code == 403
                assert forbidden.json()["error"]["type"] == "forbidden"
        async with d.client() as anonymous:
            for headers in ({}, auth("not-a-token"), {"authorization": "Basic " + ADMIN}):
                response = await anonymous.get("/v1/reminders", headers=headers)
                assert response.status_code == 401
            assert (await anonymous.get("/healthz")).status_code == 200
        assert await d.stop() == 0
    code, out, err = await run_cli("users", "list", "--data-dir", str(tmp_path))
    assert (code, out) == (0, "alice\nbob\n"), err


async def test_without_a_token_loopback_requests_act_as_default(tmp_path: Path) -> None:
    code, out, _ = await run_cli("users", "add", "alice", "--data-dir", str(tmp_path))
    assert code == 0
    alice_token = out.strip()
    async with daemon(tmp_path) as d:
        async with d.client() as c:
            await ok(await c.post("/v1/memories", json={"text": "default memory otter"}), 201)
            # No admin token configured: the loopback caller is the admin.
            bob = await ok(await c.post("/v1/users", json={"name": "bob"}), 201)
        async with d.client(headers=auth(alice_token)) as alice:
            assert (await ok(await alice.get("/v1/memories")))["memories"] == []
            response = await alice.get("/v1/continuums/main/messages")
            assert response.status_code == 404
        async with d.client(headers={"authorization": "bearer " + bob["token"]}) as c:
            assert (await ok(await c.get("/v1/memories")))["memories"] == []
        async with d.client(headers=auth("unknown")) as c:
            assert (await c.get("/v1/memories")).status_code == 401
        assert await d.stop() == 0


async def test_users_add_refuses_what_it_cannot_add(tmp_path: Path) -> None:
    data = ["--data-dir", str(tmp_path)]
    assert (await run_cli("users", "add", "alice", *data))[0] == 0
    for name, message in (
        ("alice", "already exists"),
        ("default", "built-in user"),
        ("no/slash", "malformed"),
    ):
        code, out, err = await run_cli("users", "add", name, *data)
        assert code == 2
        assert out == ""
        assert message in err
    code, out, _ = await run_cli("users", "list", *data)
    assert (code, out) == (0, "alice\n")


async def test_users_live_in_the_daemons_store(tmp_path: Path, pg_server: PostgresServer) -> None:
    url = pg_server.new_database()
    code, out, err = await run_cli(
        "users", "add", "alice", "--data-dir", str(tmp_path), "--database", url
    )
    assert code == 0, err
    async with await PostgresStorage.open(url) as store:
        assert await store.user_for_token_hash(token_digest(out.strip())) == "alice"
    code, out, _ = await run_cli(
        "users", "list", "--data-dir", str(tmp_path), FRONTMIND_DATABASE_URL=url
    )
    assert (code, out) == (0, "alice\n")
    assert not (tmp_path / "frontmind.db").exists()  # nothing went to SQLite
