"""A turn as server-sent events, and the set of turn streams the daemon is serving.

The stream's events are the library's own `TurnEvent`s, framed as `event: <tag>` with an
`id:` each; shutdown ends every stream with a final `shutting_down` error event.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Generator
from typing import Any

import anyio
import msgspec
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from actors import (
    FrontmindError,
    Overloaded,
    ShuttingDown,
    TurnCompleted,
    TurnError,
    TurnEvent,
    TurnStarted,
    TurnStream,
    shut_down_event,
)
from runtime import KernelError
from storage import error_type

from .._exceptions import wire_event_message, wire_retry_seconds
from .._wire import to_wire
from ._guard import EDGE_KEY, EdgeSignal
from ._metrics import Metrics

__all__ = ["PING_SECONDS", "TURN_KEY", "TurnEvents", "TurnStreams"]

TURN_KEY = "frontmind_turn_id"  # in the request's state: the turn it ran (access log)

log = logging.getLogger("frontmind.daemon")
_encoder = msgspec.json.Encoder()
PING_SECONDS = 15.0
PING = b": ping\n\n"
EVICTED = (
    "this turn was still waiting for its slot when its connection was given to a client "
    "holding fewer (server.max_connections, shared fairly); retry"
)


def _sse_frame(event: TurnEvent, event_id: str) -> bytes:
    name = str(type(event).__struct_config__.tag)
    data = _encoder.encode(to_wire(event))
    return b"id: %s\nevent: %s\ndata: %s\n\n" % (event_id.encode(), name.encode(), data)


class TurnStreams:
    """The turn streams being served, so that shutdown can wait for them and, after the
    grace period, end each one cleanly: the turn is cancelled (its record says so) and
    the stream's last event is an error, not a cut connection."""

    def __init__(self) -> None:
        self._scopes: set[anyio.CancelScope] = set()
        self._active = 0
        self._idle = anyio.Event()
        self._idle.set()
        self.cancelled = False

    @contextlib.contextmanager
    def serving(self) -> Generator[None, None, None]:
        self._active += 1
        self._idle = anyio.Event() if self._active == 1 else self._idle
        try:
            yield
        finally:
            self._active -= 1
            if self._active == 0:
                self._idle.set()

    @contextlib.contextmanager
    def waiting(self) -> Generator[anyio.CancelScope, None, None]:
        """A scope around waiting for the next event; cancelled by `cancel_all`."""
        with anyio.CancelScope() as scope:
            if self.cancelled:
                scope.cancel()
            self._scopes.add(scope)
            try:
                yield scope
            finally:
                self._scopes.discard(scope)

    def cancel_all(self) -> None:
        self.cancelled = True
        for scope in list(self._scopes):
            scope.cancel()

    async def wait_idle(self) -> None:
        await self._idle.wait()


class TurnEvents(Response):
    """A turn as server-sent events: an `id:` on every event, and a `: ping` comment
    whenever nothing was sent for `ping_seconds`, so an idle proxy keeps the stream.

    The turn's events are pumped by a child task into a channel; waiting on the channel
    (never on the turn itself) can time out for a ping without disturbing the turn. A
    client that disconnects cancels the pump, which cancels the turn cleanly and closes
    the channel, which ends the relay. Shutdown
    after the grace period (`TurnStreams.cancel_all`) ends the stream with a final
    `shutting_down` error event, and the turn is cancelled with a record saying so.
    """

    media_type = "text/event-stream"

    def __init__(
        self, stream: TurnStream, metrics: Metrics, ping_seconds: float, served: TurnStreams
    ) -> None:
        super().__init__(
            headers={"cache-control": "no-cache", "x-accel-buffering": "no"},
            media_type=self.media_type,
        )
        # A stream has no length: drop the content-length Response set for an empty body.
        self.raw_headers = [(k, v) for k, v in self.raw_headers if k != b"content-length"]
        self.stream = stream
        self.metrics = metrics
        self.ping_seconds = ping_seconds
        self.served = served
        self.turn_id: str | None = stream.turn_id  # started: every event can carry it
        self.state: dict[str, Any] = {}
        self.edge: EdgeSignal | None = None
        self.evicted = False  # its connection was taken while it waited for its slot

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        relayed = False
        self.state = scope.setdefault("state", {})  # the access log reads the turn id there
        # Until its first event the turn waits for its slot: its connection may be
        # taken for a client holding fewer (frontmind/server/_shares.py).
        self.edge = scope.get("extensions", {}).get(EDGE_KEY)
        if self.edge is not None:
            self.edge.queued = True
        with self.served.serving():
            async with self.stream, anyio.create_task_group() as tg:
                # Each child ends inside a scope of its own, never by the group's:
                # anyio keeps a child that ended by cancellation in a reference
                # cycle (its CancelledError, the traceback, its done callback's
                # frame) that holds the turn's objects until a full collection,
                # which the `idle` policy runs rarely under load (bench/README,
                # "What the high-water mark is made of").
                pump, watch = anyio.CancelScope(), anyio.CancelScope()
                tg.start_soon(self._watch_disconnect, receive, watch, pump)
                events, received = anyio.create_memory_object_stream[TurnEvent](1)
                tg.start_soon(self._pump, events, pump)
                await send(
                    {"type": "http.response.start", "status": 200, "headers": self.raw_headers}
                )
                await self._relay(received, send)
                relayed = True
                pump.cancel()
                watch.cancel()
            # The turn is closed (cancelled and recorded, if it had not ended) before
            # the stream ends.
            if relayed:
                await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _relay(self, received: MemoryObjectReceiveStream[TurnEvent], send: Send) -> None:
        """Send every event with its id, until the turn's last one (or the shutdown's)."""
        count = 0
        async with received:
            while True:
                with self.served.waiting() as shutdown:
                    with anyio.move_on_after(self.ping_seconds) as waited:
                        try:
                            event = await received.receive()
                        except anyio.EndOfStream:
                            return
                if shutdown.cancelled_caught:
                    self.metrics.error(ShuttingDown.type)
                    event = shut_down_event(self.turn_id)
                    count += 1
                    await send(self._body(event, count))
                    return
                if waited.cancelled_caught:
                    await send({"type": "http.response.body", "body": PING, "more_body": True})
                    continue
                if isinstance(event, TurnCompleted):
                    self.metrics.completed(event)
                elif isinstance(event, TurnError):
                    self.metrics.error(event.type)
                count += 1
                await send(self._body(event, count))

    def _body(self, event: TurnEvent, count: int) -> Message:
        event_id = f"{self.turn_id}:{count}" if self.turn_id else str(count)
        if isinstance(event, TurnError):  # what an HTTP body would say of it
            event = msgspec.structs.replace(
                event, message=wire_event_message(event.type, event.message)
            )
        return {
            "type": "http.response.body",
            "body": _sse_frame(event, event_id),
            "more_body": True,
        }

    async def _pump(
        self, events: MemoryObjectSendStream[TurnEvent], scope: anyio.CancelScope
    ) -> None:
        """The turn's events into the channel until it ends or `scope` is cancelled (the
        client left: the turn is cancelled as its read is); the channel closes either
        way, which ends the relay."""
        async with events:
            with scope:
                try:
                    async for event in self.stream:
                        if self.edge is not None:
                            self.edge.queued = False  # it holds its slot: never taken
                        if isinstance(event, TurnStarted):
                            self.turn_id = self.state[TURN_KEY] = event.turn_id
                        await events.send(event)
                except FrontmindError as exc:
                    # Refused after the answer's headers went out (the continuum's actor
                    # given up on for now, Frontmind closing): its error event ends the
                    # stream, as its error body would have ended the answer, and says
                    # when to retry as that body would have (its `retry_after`).
                    wait = wire_retry_seconds(exc)
                    event = TurnError(error_type(exc), str(exc), self.turn_id, wait)
                    await events.send(event)
                except KernelError as exc:
                    # A bug in the turn's actor (it is restarted): end with an error
                    # event rather than a broken stream.
                    log.error("turn failed inside the runtime", exc_info=exc)
                    await events.send(TurnError(error_type(exc), str(exc), self.turn_id))
            if self.evicted:  # left unstarted (its record says cancelled): the answer says why
                await events.send(TurnError(Overloaded.type, EVICTED, self.turn_id))

    async def _watch_disconnect(
        self, receive: Receive, scope: anyio.CancelScope, pump: anyio.CancelScope
    ) -> None:
        """Until the client leaves or its waiting turn's connection is taken (then the
        pump stops), or `scope` is cancelled."""
        edge = self.edge
        with scope:
            while (await receive())["type"] != "http.disconnect":
                if edge is not None and edge.cut is not None:  # woken by the socket
                    self.evicted = True
                    break
            pump.cancel()
