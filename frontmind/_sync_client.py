"""`frontmind.SyncClient`: the daemon's client for scripts with no event loop.

    with SyncClient("http://127.0.0.1:8765") as c:
        for event in c.turn("ada", "hello"):
            ...
        print(c.reminders())

Every call is `Client`'s own, run on an event loop in a thread of its own (anyio's
blocking portal), so the two cannot drift apart: the same arguments, the same return
types, the same errors. A turn runs as one task there; its events cross to the caller
through a queue, and leaving the loop early cancels the turn (the daemon records it
as cancelled), as leaving `Client.turn` does.
"""

from __future__ import annotations

import functools
import queue
import weakref
from collections.abc import Awaitable, Callable, Iterator
from contextlib import AbstractContextManager
from types import TracebackType
from typing import Concatenate, ParamSpec, TypeVar

from anyio.from_thread import BlockingPortal, start_blocking_portal

from actors import TurnEvent, UserInput

from ._client import Client

__all__ = ["SyncClient"]

P = ParamSpec("P")
R = TypeVar("R")


def _blocking(
    method: Callable[Concatenate[Client, P], Awaitable[R]],
) -> Callable[Concatenate[SyncClient, P], R]:
    """`Client.method`, called from a thread without an event loop, blocking."""

    @functools.wraps(method)
    def call(self: SyncClient, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return self._portal.call(functools.partial(method, self._client, *args, **kwargs))

    return call


class SyncClient:
    """A blocking `Client`; use it with `with`, or call `close()`."""

    def __init__(self, url: str, *, token: str | None = None, timeout: float | None = 60.0) -> None:
        portal_cm: AbstractContextManager[BlockingPortal] = start_blocking_portal()
        self._portal = portal_cm.__enter__()
        try:
            self._client = Client(url, token=token, timeout=timeout)
        except BaseException:
            portal_cm.__exit__(None, None, None)
            raise
        # Closed once: by `close`, or, for a client never closed, when it is collected
        # or at exit. At exit it must be done while the portal's (daemon) thread still
        # runs: left to the interpreter's last collection, the portal's context manager
        # would call into that thread once it has been stopped, and wait for ever.
        self._closer = weakref.finalize(self, _close, self._portal, portal_cm, self._client)
        self.url = url

    def __enter__(self) -> SyncClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the connections and stop the client's thread (a second call does nothing)."""
        self._closer()

    def turn(self, continuum_id: str, message: UserInput) -> Iterator[TurnEvent]:
        """Run a turn and yield its events as they come; breaking out of the loop (or
        closing the iterator) cancels the turn."""
        # Unbounded: the event loop never blocks on a slow reader (a turn's events are
        # few, and the reader drains them).
        events: queue.SimpleQueue[TurnEvent | None] = queue.SimpleQueue()

        async def relay() -> None:
            try:
                async with self._client.turn(continuum_id, message) as turn:
                    async for event in turn:
                        events.put(event)
            finally:
                events.put(None)  # the end, however the turn ended

        future = self._portal.start_task_soon(relay)
        try:
            while (event := events.get()) is not None:
                yield event
            future.result()  # the turn's error (ClientError, Busy, ...) is raised here
        finally:
            # Left early: the task is cancelled, which closes the stream; the daemon
            # cancels the turn. It unwinds on the portal's loop, which `close` awaits.
            future.cancel()

    health = _blocking(Client.health)
    ready = _blocking(Client.ready)
    context = _blocking(Client.context)
    model_settings = _blocking(Client.model_settings)
    set_model_settings = _blocking(Client.set_model_settings)
    history = _blocking(Client.history)
    turns = _blocking(Client.turns)
    continuums = _blocking(Client.continuums)
    delete_continuum = _blocking(Client.delete_continuum)
    add_reminder = _blocking(Client.add_reminder)
    complete_reminder = _blocking(Client.complete_reminder)
    reminders = _blocking(Client.reminders)
    delete_reminder = _blocking(Client.delete_reminder)
    remember = _blocking(Client.remember)
    memories = _blocking(Client.memories)
    search_memories = _blocking(Client.search_memories)
    delete_memory = _blocking(Client.delete_memory)
    put_document = _blocking(Client.put_document)
    documents = _blocking(Client.documents)
    delete_document = _blocking(Client.delete_document)
    jobs = _blocking(Client.jobs)
    mcp_servers = _blocking(Client.mcp_servers)
    offered_tools = _blocking(Client.offered_tools)
    reload_tools = _blocking(Client.reload_tools)
    add_user = _blocking(Client.add_user)
    users = _blocking(Client.users)
    rotate_token = _blocking(Client.rotate_token)
    delete_user = _blocking(Client.delete_user)
    backup = _blocking(Client.backup)


def _close(
    portal: BlockingPortal, portal_cm: AbstractContextManager[BlockingPortal], client: Client
) -> None:
    try:
        portal.call(client.aclose)
    finally:
        portal_cm.__exit__(None, None, None)
