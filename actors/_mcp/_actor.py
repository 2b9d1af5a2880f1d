"""The actor that owns one MCP server's connection, under the kernel's supervision.

Its instance connects when it is built (`started`): the server is spawned (stdio) or
reached (HTTP), answers the handshake and lists its tools. A server that cannot start
makes `started` fail, and the kernel restarts the actor with its backoff, up to the
policy's restart limit, then rests it for the cool-down and tries again (half-open). A
link that is lost later (the process exited, the connection closed) is reported to the
actor as `Lost`, which it answers by failing, so the kernel restarts it the same way: a
fresh instance, a fresh process. Stopping the actor (with the instance) stops the server.

Calls do not queue in this mailbox: `Attach` hands the caller the live link (or fails
at once), and the call runs in the caller's task, so one slow call never holds up
another continuum's. The mailbox carries only the connection's life.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import msgspec

from runtime import Actor, ActorRestart

from ._link import McpLink, McpStartFailed
from ._spec import McpServer

__all__ = ["Attach", "Connect", "Lost", "McpServerActor", "McpServerDown", "McpServerMessage"]


class Connect(msgspec.Struct, frozen=True, tag=True):
    """Be connected: a no-op for a running instance (building it connected it)."""


class Attach(msgspec.Struct, frozen=True, tag=True):
    """The live link, for a call."""


class Lost(msgspec.Struct, frozen=True, tag=True):
    """The link of this generation ended."""

    generation: int
    reason: str


McpServerMessage = Connect | Attach | Lost


class McpServerDown(ActorRestart):
    """The server's connection ended (or it did not start): the actor fails, and the
    kernel restarts it. The link has logged why, so the kernel logs no traceback."""


OpenLink = Callable[[McpServer], Awaitable[McpLink]]


class McpServerActor(Actor[McpServerMessage, Any]):
    protocol = McpServerMessage

    def __init__(self, spec: McpServer, open_link: OpenLink) -> None:
        self._spec = spec
        self._open = open_link
        self._link: McpLink | None = None

    async def started(self) -> None:
        # A server that cannot start is a crash, restarted with the policy's backoff.
        try:
            self._link = await self._open(self._spec)
        except McpStartFailed as exc:
            raise McpServerDown(f"MCP server {self._spec.name!r} did not start: {exc}") from exc

    async def stopped(self) -> None:
        if self._link is not None:
            self._link.close()
            await self._link.done.wait()

    async def handle(self, message: McpServerMessage) -> Any:
        link = self._link
        assert link is not None
        if isinstance(message, Lost):
            if message.generation == link.generation:
                link.close()
                await link.done.wait()
                raise McpServerDown(f"MCP server {self._spec.name!r}: {message.reason}")
            return None  # an earlier connection's end: this one is fresh
        if isinstance(message, Attach):
            if not link.alive:
                link.close()
                await link.done.wait()
                raise McpServerDown(f"MCP server {self._spec.name!r}: {link.reason or 'ended'}")
            return link
        return None
