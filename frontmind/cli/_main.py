"""The `frontmind` command.

Each command imports what it needs when it runs: building the parser loads nothing of
the project but the default data directory, so `frontmind --version` and `--help` start
in a few tens of milliseconds, and no command but `serve` loads the HTTP server, nor any
but those that call a model the SDK (tests/test_cli.py checks it). Errors a user can fix
print one line and exit 2; nothing prints a traceback for them, however deep in a task
group they were raised.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

from .._groups import raise_unwrapped
from .._paths import data_dir_path, default_data_dir
from ._data import add_data_commands, add_user_actions

__all__ = ["main"]

# `--user`'s default, storage's DEFAULT_USER: said here so that `--help` need not load
# storage to show it (tests/test_cli.py checks that the two agree).
DEFAULT_USER = "default"
T = TypeVar("T")


def _run(main: Callable[[], Coroutine[Any, Any, T]]) -> T:
    import anyio

    try:
        import uvloop  # noqa: F401 - optional speed-up

        options: dict[str, Any] = {"use_uvloop": True}
    except ImportError:
        options = {}
    return anyio.run(main, backend="asyncio", backend_options=options)


def _announce(url: str) -> None:
    print(url, flush=True)


def _announce_daemon(url: str) -> None:
    # The first line stays exactly the API's base URL: tests and scripts read it.
    print(url, flush=True)
    print(f"console: {url.rstrip('/')}/ui/", flush=True)


def cmd_serve(args: argparse.Namespace) -> None:
    from ..server._daemon import serve

    _run(
        lambda: serve(
            data_dir=args.data_dir,
            config_file=args.config,
            host=args.host,
            port=args.port,
            offline=args.offline,
            token=args.token,
            token_file=args.token_file,
            announce=_announce_daemon,
            access_log=args.access_log,
            database=args.database,
            otel=args.otel,
        )
    )


def cmd_demo(args: argparse.Namespace) -> None:
    from ._demo import run_demo

    async def main() -> None:
        await run_demo(args.data_dir)

    _run(main)


def cmd_chat(args: argparse.Namespace) -> None:
    from storage import check_continuum_id

    check_continuum_id(args.continuum)  # refused at start, not at the first message
    from ._chat import HISTORY_FILE, chat_in_process, chat_remote

    if args.url:
        failed = _run(
            lambda: chat_remote(
                args.url,
                args.continuum,
                token=args.token,
                history_file=args.data_dir / HISTORY_FILE,
            )
        )
    else:
        failed = _run(
            lambda: chat_in_process(
                args.data_dir, args.continuum, offline=args.offline, config_file=args.config
            )
        )
    if failed:  # through a pipe: each error went to stderr as it came; the status says so
        sys.stdout.flush()
        print(f"frontmind: {failed} message{'s' if failed != 1 else ''} failed", file=sys.stderr)
        sys.exit(1)


_ASK_THE_DAEMON = "; to ask the daemon that runs on it, pass --url (and --token)"


def cmd_inspect(args: argparse.Namespace) -> None:
    from storage import check_continuum_id

    from .._exceptions import DataDirLocked, EdgeError
    from .._frontmind import DATABASE_FILE, Frontmind, NoModel
    from ..config import load_config
    from ._render import render_context

    async def main() -> None:
        if args.url:
            from ._remote import remote_context

            request = await remote_context(args.url, args.token, args.continuum, args.message)
        else:
            config = load_config(args.config, args.data_dir)
            check_continuum_id(args.continuum)
            if config.storage.url is None and not (args.data_dir / DATABASE_FILE).exists():
                # Opening it would make an empty store in a mistyped --data-dir.
                raise EdgeError(f"no Frontmind database in {args.data_dir}")
            try:
                async with Frontmind.open(args.data_dir, config, model=NoModel()) as fm:
                    request = await fm.user(args.user).context(args.continuum, args.message)
            except DataDirLocked as exc:
                raise DataDirLocked(f"{exc}{_ASK_THE_DAEMON}") from None
        print(render_context(request))

    _run(main)


def cmd_stats(args: argparse.Namespace) -> None:
    # The store alone: no actors run and no model is called (the renderer loads the
    # model data, for prices, but not the SDK).
    from .._models import load_catalog
    from ..config import load_config
    from ._data import store_of
    from ._render import render_stats

    async def main() -> None:
        waiting: int | None = None  # the daemon does not say: not shown
        # The prices the daemon uses: the model data with the config's [[models]] rows.
        config = load_config(args.config, args.data_dir, check_plugins=False)
        catalog = load_catalog(config.models)
        if args.url:
            from ._remote import remote_records

            records, jobs = await remote_records(args.url, args.token, args.continuum)
        else:
            async with store_of(args) as storage:  # SQLite in the data dir, or PostgreSQL
                records = await storage.turns(args.user, args.continuum, limit=-1)  # all
                jobs = await storage.jobs(args.user, args.continuum, limit=-1)
                waiting = await storage.count_memories_without_vectors()
        print(render_stats(records, jobs, catalog, waiting_vectors=waiting))

    _run(main)


def cmd_simulate(args: argparse.Namespace) -> None:
    import json

    import msgspec

    from .._models import load_catalog
    from ..config import Config, load_config
    from ._simulate import (
        chart_backend,
        check_chart_path,
        load_script,
        render_table,
        run_simulation,
        write_chart,
    )

    if args.chart is not None:
        chart_backend()  # a missing matplotlib is said now, not after the replay
        check_chart_path(args.chart)  # and a file it cannot write
    script = load_script(args.script)
    # No data directory here: the config's own folder stands in for it (its
    # base_prompt.md), never the directory the command happens to run from.
    config = load_config(args.config, args.config.parent) if args.config else Config()
    if args.model:
        model = msgspec.structs.replace(config.model, name=args.model)
        row = load_catalog(config.models).lookup(args.model)
        if (
            row is not None
            and model.thinking == "off"
            and row.refuses_thinking("disabled", model.effort)
            and not row.refuses_thinking("adaptive", model.effort)
        ):
            # A model that always thinks (the README's `--model claude-fable-5-1`) was
            # refused for the default `thinking = "off"`: the replay uses what the model
            # takes, and says so.
            model = msgspec.structs.replace(model, thinking="adaptive")
            print(
                f'simulate: {args.model} cannot turn thinking off: thinking = "adaptive"',
                file=sys.stderr,
            )
        config = msgspec.structs.replace(config, model=model)
    layouts = args.layout or None
    policies = args.ttl or None

    async def main() -> None:
        rows, missing = await run_simulation(
            script,
            layouts=layouts or ("notification", "system_message", "user_message",
                                "system_prompt", "none"),
            policies=policies or ("5m", "1h", "adaptive", "adaptive+warm", "oracle"),
            config=config,
            frame=args.frame,
        )  # fmt: skip
        if args.json:
            body: dict[str, object] = {"rows": [row.as_json() for row in rows]}
            if missing:
                body["not_available"] = missing
            print(json.dumps(body))
        else:
            catalog = load_catalog(config.models)
            priced = catalog.lookup(config.model.name)
            print(render_table(rows, missing, len(script), priced, catalog))
        if args.chart is not None:
            write_chart(rows, args.chart)

    _run(main)


def cmd_users(args: argparse.Namespace) -> None:
    import msgspec

    from .._frontmind import open_storage
    from .._users import new_token, token_digest
    from ..config import load_config

    async def main() -> None:
        # Storage alone (no actors, no model): this works beside a running daemon, which
        # looks tokens up on every request and so knows the new user at once. The store
        # is the daemon's: SQLite in the data dir, or the configured PostgreSQL database.
        config = load_config(args.config, args.data_dir, check_plugins=False)
        if args.database is not None:
            config = msgspec.structs.replace(
                config, storage=msgspec.structs.replace(config.storage, url=args.database)
            )
        storage = await open_storage(config, args.data_dir)  # `add` may make the store
        try:
            token = new_token()
            await storage.add_user(args.name, token_digest(token))
            print(token)
            print(
                f"added user {args.name!r}: this token is shown only now; "
                "it is stored only as a hash",
                file=sys.stderr,
            )
        finally:
            await storage.close()

    async def listing() -> None:
        from ._data import store_of

        # A reader: a data dir without a store is refused, not made an empty one.
        async with store_of(args) as storage:
            for user in await storage.users():
                print(user.name)

    if args.users_command == "list":
        _run(listing)
        return

    _run(main)


def cmd_local_api(args: argparse.Namespace) -> None:
    import signal

    import anyio

    from ..localapi import LocalMessagesAPI

    async def main() -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async with LocalMessagesAPI(host=args.host, port=args.port) as api:
                _announce(api.base_url)
                async for _ in signals:
                    break

    _run(main)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="frontmind",
        description="A runtime for long-lived Claude agents that keeps the prompt cache warm.",
    )
    parser.add_argument("--version", action="version", version=f"frontmind {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def data_options(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--data-dir",
            type=data_dir_path,
            default=default_data_dir(),
            help="database, config and base prompt (default: $FRONTMIND_DATA_DIR or ~/.frontmind)",
        )
        p.add_argument(
            "--config",
            type=Path,
            default=None,
            help="config file (default: frontmind.toml in the data dir, if any)",
        )

    def database_option(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--database",
            default=None,
            metavar="URL",
            help="the daemon's PostgreSQL URL, if it has one (or FRONTMIND_DATABASE_URL)",
        )

    p = sub.add_parser("serve", help="run the HTTP daemon")
    data_options(p)
    p.add_argument("--host", default=None, help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=None, help="port (default 8765; 0 picks one)")
    p.add_argument(
        "--offline",
        action="store_true",
        help="use the built-in local Messages API instead of Anthropic's",
    )
    p.add_argument(
        "--token",
        default=None,
        help="bearer token clients must send (required off loopback; or FRONTMIND_TOKEN)",
    )
    p.add_argument(
        "--log-level",
        default="warning",
        choices=["debug", "info", "warning", "error"],
        help="log lines from this level up (default warning)",
    )
    p.add_argument("--log-format", default="text", choices=["text", "json"], help="log line format")
    p.add_argument("--access-log", action="store_true", help="log every request (at info level)")
    p.add_argument(
        "--token-file",
        type=Path,
        default=None,
        help="read the bearer token from this file (keeps it out of ps and shell history)",
    )
    p.add_argument(
        "--database",
        default=None,
        metavar="URL",
        help="a PostgreSQL URL to share with other replicas (or FRONTMIND_DATABASE_URL;"
        " default: SQLite in the data dir)",
    )
    p.add_argument(
        "--otel",
        action="store_true",
        help="export spans with OpenTelemetry (the otel extra; OTEL_* variables configure it)",
    )
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser("demo", help="run the offline demo conversation (both layouts)")
    p.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="keep the demo's databases here (default: a temporary directory)",
    )
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("chat", help="chat in the terminal (with a daemon, or in-process)")
    data_options(p)
    p.add_argument("--url", default=None, help="a running daemon's base URL")
    p.add_argument(
        "--token",
        default=None,
        help="the daemon's bearer token, if it needs one (or FRONTMIND_TOKEN, kept out of ps)",
    )
    p.add_argument("--continuum", default="default", help="conversation id (default: default)")
    p.add_argument("--offline", action="store_true", help="in-process: use the local API")
    p.set_defaults(func=cmd_chat)

    def daemon_options(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--url", default=None, help="ask a running daemon at this base URL (not the data dir)"
        )
        p.add_argument(
            "--token",
            default=None,
            help="with --url: the bearer token (or FRONTMIND_TOKEN, kept out of ps); whose "
            "token it is says whose data (--user is for the data dir)",
        )

    p = sub.add_parser("inspect", help="print the context window of the next turn")
    data_options(p)
    daemon_options(p)
    p.add_argument("--continuum", default="default", help="conversation id")
    p.add_argument("--message", default="(next message)", help="the next user message")
    p.add_argument(
        "--user", default=None, help="whose continuum, in the data dir (default: default)"
    )
    p.set_defaults(func=cmd_inspect)

    p = sub.add_parser("stats", help="cache hit share, latencies and section misses")
    data_options(p)
    daemon_options(p)
    database_option(p)
    p.add_argument("--continuum", default=None, help="one conversation (default: all)")
    p.add_argument("--user", default=None, help="whose turns, in the data dir (default: default)")
    p.set_defaults(func=cmd_stats)

    p = sub.add_parser(
        "simulate",
        help="replay a conversation offline: cache cost by layout and TTL policy",
        description=(
            'Replay SCRIPT (JSON Lines of {"at": ISO 8601 with offset, "message": text}, '
            'or an exported continuum: {"messages": [...], "turns": [...]}) through '
            "Frontmind on the local API's cache simulator with a simulated clock."
        ),
    )
    p.add_argument("script", type=Path, help="the conversation to replay")
    p.add_argument("--json", action="store_true", help='print {"rows": [...]} as JSON')
    p.add_argument("--chart", type=Path, default=None, help="write cost per turn (PNG)")
    p.add_argument("--config", type=Path, default=None, help="a frontmind.toml to start from")
    p.add_argument("--model", default=None, help="the model every run uses (default: config's)")
    p.add_argument(
        "--layout",
        action="append",
        choices=("notification", "system_message", "user_message", "system_prompt", "none"),
        help="only this layout (repeatable; default: all)",
    )
    p.add_argument(
        "--ttl",
        action="append",
        choices=("5m", "1h", "adaptive", "adaptive+warm", "oracle"),
        help="only this TTL policy (repeatable; default: all)",
    )
    p.add_argument(
        "--frame", choices=("seed", "compact"), default="seed", help="the notification frame"
    )
    p.set_defaults(func=cmd_simulate)

    p = sub.add_parser(
        "users", help="add, list, rotate or delete the users the daemon accepts tokens of"
    )
    users = p.add_subparsers(dest="users_command", required=True, metavar="ACTION")
    add = users.add_parser("add", help="add a user and print its token (shown once)")
    data_options(add)
    database_option(add)
    add.add_argument("name", help="1 to 64 of A-Z a-z 0-9 _ -")
    add.set_defaults(func=cmd_users)
    listing = users.add_parser("list", help="list the users, one name a line")
    data_options(listing)
    database_option(listing)
    listing.set_defaults(func=cmd_users)

    def store_options(p: argparse.ArgumentParser) -> None:
        data_options(p)
        database_option(p)

    add_user_actions(users, store_options)
    add_data_commands(sub, store_options)

    p = sub.add_parser("local-api", help="run the local Messages API server on its own")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument(
        "--port", type=int, default=0, help="port (default 0: a free one; its URL is printed)"
    )
    p.set_defaults(func=cmd_local_api)
    return parser


def _version() -> str:
    from .. import __version__

    return __version__


def _usage_error(exc: BaseException) -> str | None:
    """One line for a mistake the user can fix, or None for a bug (keep the traceback)."""
    import errno
    import socket

    # A FrontmindError's class came with storage: if no command loaded storage, `exc` is
    # none (and `local-api`, which loads nothing else of the project, must not load it
    # just to ask).
    root = getattr(sys.modules.get("storage"), "FrontmindError", None)
    if root is not None and isinstance(exc, root):
        return str(exc)
    if isinstance(exc, OSError) and exc.errno == errno.EADDRINUSE:
        return f"the address is already in use ({exc.strerror}): choose another --port"
    if isinstance(exc, (NotADirectoryError, FileExistsError, PermissionError)):
        return f"{exc.strerror}: {exc.filename}"
    if isinstance(exc, socket.gaierror):
        return f"the host cannot be resolved ({exc.strerror}): check --host"
    if isinstance(exc, OverflowError) and "port" in str(exc):
        return f"{exc}: check --port"
    return None


def _check_daemon_options(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """A daemon is asked as the token's user (`--url`, `--token`); the data dir as
    `--user`. Mixing them would answer for someone else than asked, silently."""
    if not hasattr(args, "url"):
        return
    if args.url and not args.token:
        # A command line is every local account's to read (`ps`) for as long as a chat
        # runs: the token may come from the environment instead, as `serve` takes it.
        args.token = os.environ.get("FRONTMIND_TOKEN") or None
    # What a daemon decides itself: given to a chat with --url, it was ignored without a
    # word. (`stats --url` still reads --config: its [[models]] rows price the jobs.)
    chat = hasattr(args, "offline")
    if chat and args.url and args.offline:
        parser.error("--offline is for an in-process chat: with --url, the daemon's model answers")
    if chat and args.url and args.config is not None:
        parser.error("--config is for the data dir: with --url, the daemon's own config holds")
    if not hasattr(args, "user"):
        return
    if args.url and args.user is not None:
        parser.error("--user is for the data dir: with --url, the token says whose data")
    if args.token and not args.url:
        parser.error("--token goes with --url (a running daemon)")
    if args.user is None:
        args.user = DEFAULT_USER


def main(argv: list[str] | None = None) -> None:
    parser = build_parser()
    args = parser.parse_args(argv)
    _check_daemon_options(parser, args)
    if args.func is cmd_serve:
        from ._logs import configure_logging

        configure_logging(args.log_level, args.log_format)
    else:
        import logging

        logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        try:
            args.func(args)
            sys.stdout.flush()  # here, where a reader gone is caught, not at exit
        except BaseExceptionGroup as group:
            raise_unwrapped(group)
    except KeyboardInterrupt:
        sys.exit(130)
    except BrokenPipeError:
        # The reader left (`frontmind export | head`): what is unwritten goes nowhere,
        # so the flush at exit cannot fail again, and the exit is a shell's for SIGPIPE.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(128 + signal.SIGPIPE)
    except Exception as exc:
        line = _usage_error(exc)
        if line is None:
            raise
        print(f"frontmind: error: {line}", file=sys.stderr)
        sys.exit(2)
