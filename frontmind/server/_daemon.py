"""`frontmind serve`: the HTTP daemon (Starlette on uvicorn), server-sent events for turns.

Errors are `{"error": {"type": ..., "message": ...}}` with a fitting status. Bad input
never changes what is stored, and the daemon keeps serving. A client that disconnects
mid-stream cancels its turn cleanly. SIGTERM/SIGINT/SIGHUP: stop accepting, let running turns
finish within the grace period (then cancel them cleanly), exit 0. The routes, bodies
and events are described at /openapi.json; both the routes and that description are
built from one table, `ENDPOINTS` in frontmind/server/_routes.py.

Users: every request acts as one user and sees only that user's data, on every route.
The admin token (`--token` / FRONTMIND_TOKEN) acts as user `default` and alone may add
users (`POST /v1/users`); a user's token (from `frontmind users add` or that route)
acts as that user. With no admin token (loopback only), a request without a token acts
as `default` with the admin's rights, and one with a user's token as that user.
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
import math
import signal
import socket
import time
from collections.abc import Callable
from pathlib import Path

import anyio
import msgspec
from starlette.applications import Starlette
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from storage import DEFAULT_USER, FrontmindError, StorageError

from .._exceptions import ConfigError
from .._frontmind import Frontmind
from ..config import Config, RuntimeConfig, load_config
from ._asgi import SocketLimits, is_loopback, serve_app
from ._console import console_routes, is_console_path
from ._guard import DEFAULT_MAX_BODY_BYTES, EdgeGuard, bearer_token, loggable_path
from ._metrics import Metrics
from ._routes import (
    ADMIN_KEY,
    ENDPOINTS,
    PATH_KEY,
    USER_KEY,
    Daemon,
    admin_only,
    error_response,
    exception_response,
    known_error,
    not_allowed,
    not_found,
    route_path,
    unexpected,
)
from ._sse import PING_SECONDS, TURN_KEY, TurnStreams
from ._startup import freeze_startup_objects
from ._tracing import setup_tracing

__all__ = ["TurnStreams", "build_app", "serve"]

log = logging.getLogger("frontmind.daemon")
# What stops the daemon gracefully. SIGHUP too: a `frontmind serve` in a terminal that
# closes got it and died at once, leaving its running turns recorded as interrupted.
STOP_SIGNALS = (
    signal.SIGTERM,
    signal.SIGINT,
    *([signal.SIGHUP] if hasattr(signal, "SIGHUP") else []),
)
access_log = logging.getLogger("frontmind.access")
# nginx's status for a request whose client closed the connection before the answer.
CLIENT_CLOSED = 499
# The health check, the API description and its page hold no data: no token needed.
PUBLIC_PATHS = frozenset(e.path for e in ENDPOINTS if e.auth == "public")
assert not any(e.path in PUBLIC_PATHS and e.auth != "public" for e in ENDPOINTS)


class UserAuth:
    """Pure ASGI middleware (streaming-safe): settles which user a request acts as.

    Every route but the public ones and the console's files: the admin token acts as
    `default` (with the right to add users), a user's token as that user; no token acts
    as `default` only when no admin token is configured; anything else is 401.
    """

    def __init__(self, app: ASGIApp, fm: Frontmind, token: str | None) -> None:
        self.app = app
        self.fm = fm
        self.admin = token.encode() if token else None

    async def _resolve(self, scope: Scope) -> tuple[str, bool] | None:
        given = bearer_token(scope["headers"])
        if given is None:
            return None if self.admin else (DEFAULT_USER, True)
        if self.admin is not None and hmac.compare_digest(given, self.admin):
            return DEFAULT_USER, True
        try:
            user = await self.fm.user_for_token(given.decode("ascii")) if given else None
        except UnicodeDecodeError:
            user = None
        return None if user is None else (user, False)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # The public endpoints and the console's files (none of which holds data) need
        # no token.
        path = route_path(scope) if scope["type"] == "http" else ""
        if path:
            scope.setdefault("state", {})[PATH_KEY] = path
        # A public path with a stray trailing slash too: its 404 names the route, which
        # a probe sent with no token would never have read behind a 401.
        public = path.rstrip("/") in PUBLIC_PATHS or is_console_path(path)
        if path and not public:
            try:
                resolved = await self._resolve(scope)
            except StorageError as exc:
                log.error("token lookup failed", exc_info=exc)
                await exception_response(exc)(scope, receive, send)
                return
            if resolved is None:
                # RFC 9110 §15.5.2: a 401 names the scheme to authenticate with; RFC 6750
                # §3: a token that was sent and refused is an invalid one.
                challenge = 'Bearer realm="frontmind"'
                if bearer_token(scope["headers"]) is not None:
                    challenge += ', error="invalid_token"'
                response = error_response(
                    401,
                    "unauthorized",
                    "missing or wrong bearer token",
                    {"www-authenticate": challenge},
                )
                await response(scope, receive, send)
                return
            user, admin = resolved
            # In the request's own state dict, which the access log reads afterwards.
            scope.setdefault("state", {}).update({USER_KEY: user, ADMIN_KEY: admin})
        await self.app(scope, receive, send)


class Observed:
    """Outermost ASGI middleware: counts responses by status and writes the access log."""

    def __init__(self, app: ASGIApp, metrics: Metrics, *, access: bool) -> None:
        self.app = app
        self.metrics = metrics
        self.access = access

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500  # if the app fails before answering, the server answers 500
        answered = left = False

        async def sending(message: Message) -> None:
            nonlocal status, answered
            if message["type"] == "http.response.start":
                status, answered = int(message["status"]), True
            await send(message)

        async def receiving() -> Message:
            nonlocal left
            message = await receive()
            left = left or (message["type"] == "http.disconnect" and not answered)
            return message

        state = scope.setdefault("state", {})  # filled by the layers inside
        try:
            await self.app(scope, receiving, sending)
        finally:
            if left:
                # The client left before any answer (mid-body, say): whatever the app
                # answered then (Starlette's 500 for the `ClientDisconnect` its body read
                # raised) reached no one, and nothing failed: not a 500.
                status = CLIENT_CLOSED
            self.metrics.response(status)
            if self.access:
                duration_ms = round((time.perf_counter() - started) * 1000, 1)
                user = state.get(USER_KEY)
                access_log.info(
                    "%s %s %d %.1fms user=%s",
                    scope["method"],
                    loggable_path(scope["path"]),
                    status,
                    duration_ms,
                    user or "-",
                    # Fields of their own in the JSON log (frontmind/cli/_logs.py).
                    extra={
                        "method": scope["method"],
                        "path": scope["path"],
                        "status": status,
                        "duration_ms": duration_ms,
                        "user": user,
                        "turn_id": state.get(TURN_KEY),
                    },
                )


def build_app(
    fm: Frontmind,
    *,
    token: str | None = None,
    streams: TurnStreams | None = None,
    metrics: Metrics | None = None,
    ping_seconds: float = PING_SECONDS,
    access_log: bool = False,
    allowed_hosts: tuple[str, ...] = (),
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    body_idle_seconds: float = 30.0,
    body_deadline_seconds: float = 120.0,
    body_min_rate: float = 1024.0,
    body_grace_seconds: float = 5.0,
) -> ASGIApp:
    """The daemon as an ASGI app over `fm`: the routes of `ENDPOINTS` (admin rows behind
    the admin check), the console, the user's token check, the edge guard and metrics."""
    stats = metrics or Metrics()
    stats.watch_warm_ups(fm.warm_ups)
    stats.watch_turns(fm.turn_totals)
    stats.watch_admission(fm.admission)
    routes: list[BaseRoute] = [
        Route(e.path, admin_only(e) if e.auth == "admin" else e.handler, methods=[e.method])
        for e in ENDPOINTS
    ]
    routes += console_routes(token_required=bool(token))
    starlette = Starlette(
        routes=routes,
        exception_handlers={
            404: not_found,
            405: not_allowed,
            FrontmindError: known_error,
            Exception: unexpected,
        },
    )
    # A path with a stray trailing slash is answered 404 naming the route without it
    # (`not_found`), not redirected: the router's redirect was an absolute URL built from
    # the request the daemon saw, outside the prefix of a proxy that strips one
    # (https://host/fm/); and an API's paths are the client's code, which a 404 gets
    # fixed once, where a redirect would cost every call a second request (a turn's
    # POST sending its body twice) and hide the mistake.
    starlette.router.redirect_slashes = False
    starlette.state.daemon = Daemon(fm, stats, streams or TurnStreams(), ping_seconds)
    app = UserAuth(starlette, fm, token)
    guarded = EdgeGuard(
        app,
        allowed_hosts=allowed_hosts,
        max_body_bytes=max_body_bytes,
        body_idle_seconds=body_idle_seconds,
        body_deadline_seconds=body_deadline_seconds,
        body_min_rate=body_min_rate,
        body_grace_seconds=body_grace_seconds,
    )
    # Outermost: the guard's refusals (403/413/415...) are counted and logged too.
    return Observed(guarded, stats, access=access_log)


async def serve(
    *,
    data_dir: Path,
    config_file: Path | None,
    host: str | None,
    port: int | None,
    offline: bool,
    token: str | None,
    announce: Callable[[str], None],
    token_file: Path | None = None,
    access_log: bool = False,
    database: str | None = None,
    otel: bool = False,
) -> None:
    """Run the daemon until SIGTERM, SIGINT or SIGHUP, then shut down gracefully."""
    config = load_config(config_file, data_dir)
    stop_tracing = setup_tracing(otel)  # --otel, or the standard OTEL_* variables
    try:
        await _serve(
            config,
            data_dir=data_dir,
            host=host,
            port=port,
            offline=offline,
            token=token,
            announce=announce,
            token_file=token_file,
            access_log=access_log,
            database=database,
        )
    finally:
        if stop_tracing is not None:
            stop_tracing()  # the spans still batched are exported before the exit


async def _serve(
    config: Config,
    *,
    data_dir: Path,
    host: str | None,
    port: int | None,
    offline: bool,
    token: str | None,
    announce: Callable[[str], None],
    token_file: Path | None,
    access_log: bool,
    database: str | None,
) -> None:
    if database is not None:  # --database wins over FRONTMIND_DATABASE_URL and the file
        config = msgspec.structs.replace(
            config, storage=msgspec.structs.replace(config.storage, url=database)
        )
    if config.runtime.gc is None:  # the daemon owns its process: no full GC in a turn
        config = msgspec.structs.replace(config, runtime=RuntimeConfig(gc="idle"))
    where_host = "server.host" if not host else "--host"
    host = host or config.server.host
    where = "server.port" if port is None else "--port"
    port = config.server.port if port is None else port
    if not 0 <= port <= 65535:  # said now, naming where it came from, before the store opens
        raise ConfigError(f"{where}: must be 0 (any free port) to 65535, got {port}")
    try:  # a host that names nothing: said now too, with the name, not at the bind
        await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        why = exc.strerror if isinstance(exc, socket.gaierror) else str(exc)
        raise ConfigError(f"{where_host}: {host!r} cannot be resolved ({why})") from None
    token = resolve_token(config, token, token_file)
    limits = socket_limits(config)
    if not is_loopback(host) and not token:
        raise ConfigError(
            f"binding to {host}, which is not a loopback address, requires a token: "
            "pass --token or --token-file, set FRONTMIND_TOKEN, or set [server] token "
            "or token_file in the config"
        )
    grace = config.server.grace_seconds
    async with Frontmind.open(data_dir, config, offline=offline) as fm:
        streams = TurnStreams()
        app = build_app(
            fm,
            token=token,
            streams=streams,
            access_log=access_log,
            allowed_hosts=with_bound_name(config.server.allowed_hosts, host),
            max_body_bytes=config.server.max_body_bytes,
            body_idle_seconds=config.server.body_timeout_s,
            body_deadline_seconds=config.server.body_deadline_s,
            body_min_rate=config.server.body_min_rate,
            body_grace_seconds=config.server.body_grace_s,
        )
        with anyio.open_signal_receiver(*STOP_SIGNALS) as signals:
            async with serve_app(
                app,
                host,
                port,
                # Ours ends the turns at `grace`; uvicorn only has to flush what is left.
                graceful_seconds=grace + 5,
                force_exit_on_close=False,
                log_level="warning",
                limits=limits,
            ) as served:
                if config.runtime.gc == "idle":
                    freeze_startup_objects()  # the app too, now that it is built
                announce(served.url)
                async for signum in signals:
                    log.warning(
                        "received %s: shutting down within %d s (again to exit now)",
                        signal.Signals(signum).name,
                        grace,
                    )
                    break
                served.request_shutdown()  # stop accepting; requests in flight go on
                fm.drain()  # queued turns: an error event and a record each
                async with anyio.create_task_group() as tg:

                    async def second_signal() -> None:
                        async for signum in signals:
                            log.warning(
                                "received %s again: cancelling turns and exiting now",
                                signal.Signals(signum).name,
                            )
                            streams.cancel_all()
                            with anyio.move_on_after(2):
                                await streams.wait_idle()
                            served.request_shutdown(force=True)
                            tg.cancel_scope.cancel()

                    tg.start_soon(second_signal)
                    with anyio.move_on_after(grace):
                        await streams.wait_idle()
                    streams.cancel_all()  # after the grace: cancelled, with a final event
                    with anyio.move_on_after(5):
                        await streams.wait_idle()
                    tg.cancel_scope.cancel()


def with_bound_name(allowed: tuple[str, ...], host: str) -> tuple[str, ...]:
    """The Host names the edge takes, with the name the daemon was bound by (`--host
    vm.lan`): its operator chose it and the URL printed at start carries it, yet every
    request by it was refused 403. A rebinding attacker's name is still no bound name."""
    try:
        ipaddress.ip_address(host)
    except ValueError:  # a name; `localhost` the edge already takes on the bound port
        return allowed if host == "localhost" else (*allowed, host)
    return allowed  # an address: the edge takes it as the connection's own


def resolve_token(config: Config, given: str | None, token_file: Path | None) -> str | None:
    """--token, else --token-file, else FRONTMIND_TOKEN / server.token, else
    server.token_file: a file keeps the secret out of `ps` and shell history."""
    if given:
        return _usable(given, "--token")
    if token_file is None and config.server.token:
        return _usable(config.server.token, "FRONTMIND_TOKEN or server.token")
    path = token_file or (Path(config.server.token_file) if config.server.token_file else None)
    if path is None:
        return None
    try:
        token = path.read_text("utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read the token file {path}: {exc}") from None
    if not token or any(c.isspace() for c in token):
        raise ConfigError(f"the token file {path} must hold one token (no spaces)")
    return token


def _usable(token: str, where: str) -> str:
    """The admin token as given, if a client can present it: a header's credentials are
    read without the whitespace around them (and cannot hold a control character), so a
    token with a space at either end (an env file's trailing blank) could never match,
    and every request would be refused 401 with nothing said at the start."""
    if token != token.strip() or not token.isprintable():
        raise ConfigError(
            f"the token from {where} has whitespace at its start or end, or a control "
            "character: no client could send it; give the token alone"
        )
    return token


def socket_limits(config: Config) -> SocketLimits:
    server = config.server
    for key in (
        "max_body_bytes",
        "max_connections",
        "header_timeout_s",
        "body_timeout_s",
        "body_deadline_s",
        "keep_alive_s",
        "send_timeout_s",
    ):
        value = getattr(server, key)
        # Written so that NaN fails too (TOML has `nan` and `inf`): a NaN timeout hung the
        # start or the shutdown, or crashed the start with a traceback; an infinite one
        # crashed it (the send watch's budget is an integer of it).
        if not (value > 0 and math.isfinite(value)):
            raise ConfigError(f"server.{key} must be positive (and finite), got {value}")
    if server.max_client_connections is not None and server.max_client_connections <= 0:
        raise ConfigError("server.max_client_connections must be positive (or unset)")
    if server.send_min_rate < 0:
        raise ConfigError("server.send_min_rate cannot be negative")
    if server.grace_seconds < 0:
        raise ConfigError("server.grace_seconds cannot be negative")
    if not (server.body_min_rate >= 0 and 0 <= server.body_grace_s < math.inf):
        raise ConfigError("server.body_min_rate and server.body_grace_s cannot be negative")
    for entry in server.allowed_hosts:
        try:
            EdgeGuard(_no_app, allowed_hosts=(entry,))
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
    return SocketLimits(
        max_connections=server.max_connections,
        max_client_connections=server.max_client_connections,
        header_timeout=server.header_timeout_s,
        keep_alive_timeout=server.keep_alive_s,
        max_body_bytes=server.max_body_bytes,
        send_timeout=server.send_timeout_s,
        send_min_rate=server.send_min_rate,
    )


async def _no_app(scope: Scope, receive: Receive, send: Send) -> None:
    raise NotImplementedError
