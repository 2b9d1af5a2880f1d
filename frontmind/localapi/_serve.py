"""Running the local API's ASGI app with uvicorn inside the caller's task group.

The socket is bound before uvicorn starts, so port 0 works and the URL is known at once.
Signals are left to the owner (uvicorn's handlers would re-raise SIGTERM after shutdown).
Logging is left to the owner too: uvicorn's loggers are the whole process's, and a
config with a log level would set theirs (an application served by uvicorn that opens
Frontmind offline would lose its own "Uvicorn running on" lines). This server's own
info lines are dropped by a filter that knows them by the task they come from; its
warnings and errors pass.
This is a test double's server: no connection limits or edge hardening, which belong to
Frontmind's daemon (`frontmind.server`), not to a stand-in for Anthropic's API.
"""

from __future__ import annotations

import contextlib
import logging
import socket
from collections.abc import AsyncIterator, Generator
from contextvars import ContextVar
from typing import Any

import anyio
import uvicorn

__all__ = ["serve_local"]

_STOP_SECONDS = 5.0  # uvicorn's shutdown, connections not waited for (force_exit)
_serving_local = ContextVar("frontmind_local_api_serving", default=False)


class _QuietLocal(logging.Filter):
    """Drops the info lines uvicorn logs for the local API (set in its serving task)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.WARNING or not _serving_local.get()


_quiet = _QuietLocal()


class _Server(uvicorn.Server):
    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.ready = anyio.Event()

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        self.ready.set()


@contextlib.asynccontextmanager
async def serve_local(app: Any, host: str, port: int) -> AsyncIterator[str]:
    """Serve `app` on host:port until the block ends; yields the base URL."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(2048)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    bound = sock.getsockname()[1]
    url = f"http://[{host}]:{bound}" if ":" in host else f"http://{host}:{bound}"
    config = uvicorn.Config(
        app, lifespan="off", log_config=None, log_level=None, access_log=False, ws="none"
    )
    server = _Server(config)
    uvicorn_log = logging.getLogger("uvicorn.error")
    if _quiet not in uvicorn_log.filters:
        uvicorn_log.addFilter(_quiet)

    stopped = anyio.Event()
    # uvicorn stops by `should_exit` alone, never by cancellation: cancelled mid-serve
    # (the block raised, or was cancelled) it skipped its shutdown, and the socket closed
    # under its running server stayed in the loop's selector; the next socket given
    # that descriptor, anyone's, was never polled again (a later local API took
    # connections and never answered).
    serving = anyio.CancelScope(shield=True)

    async def run() -> None:
        _serving_local.set(True)  # this task's context only
        try:
            with serving:
                await server.serve(sockets=[sock])
        finally:
            server.ready.set()
            sock.close()
            stopped.set()

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            try:
                await server.ready.wait()
                if not server.started:
                    raise OSError(f"the local Messages API on {url} failed to start")
                yield url
            finally:
                server.should_exit = True
                server.force_exit = True
                with anyio.CancelScope(shield=True), anyio.move_on_after(_STOP_SECONDS):
                    await stopped.wait()
                serving.cancel()  # a shutdown that hangs past that is cut short
    except BaseExceptionGroup as group:
        # The block's own error, not the group the task group put around it (one level:
        # a group the block raised itself stays one), with its own cause and context.
        # (`frontmind._groups.raise_unwrapped` does this for Frontmind: the local API
        # imports nothing of the project, so its one level is done here.)
        if len(group.exceptions) != 1:
            raise
        (error,) = group.exceptions
        cause, context, suppressed = error.__cause__, error.__context__, error.__suppress_context__
        try:
            raise error
        finally:
            error.__cause__, error.__context__ = cause, context
            error.__suppress_context__ = suppressed
