"""`[[mcp]]`: an MCP server the model's tools may come from, and its checks.

Each entry is checked when the instance starts (before any server is spawned): a bad
one fails with one line naming it. A server's tools are offered as
`mcp__{server}__{tool}`, so the server's name is part of every tool name and follows the
API's rule for tool names.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec

from .._exceptions import ToolDefinitionError

__all__ = ["MCP_PREFIX", "McpServer", "check_mcp_servers", "mcp_servers", "mcp_tool_name"]

MCP_PREFIX = "mcp__"
_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
# What HTTP takes (RFC 9110): a header name is a token; a value is visible ASCII, with
# spaces and tabs inside it but not at either end.
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_HEADER_VALUE = re.compile(r"([\x21-\x7e]([\x20-\x7e\t]*[\x21-\x7e])?)?")


class McpServer(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """One MCP server: a command to run (stdio) or a URL (streamable HTTP)."""

    name: str  # 1-64 of A-Z a-z 0-9 _ -; its tools are offered as mcp__{name}__{tool}
    command: tuple[str, ...] | None = None  # stdio: the program and its arguments
    url: str | None = None  # streamable HTTP: the endpoint
    headers: dict[str, str] = {}  # streamable HTTP only: sent with every request
    env: dict[str, str] = {}  # stdio only: set for the server, over a minimal environment
    # stdio only: its working directory; a relative one is the process's as the entry is
    # made (a config file's entries are taken from the file's directory, with no cwd too).
    cwd: str | None = None
    allowed_tools: tuple[str, ...] | None = None  # only these of its tools (None: all)
    timeout_s: float = 30.0  # per call; a call running longer is an error for the model
    startup_timeout_s: float = 30.0  # to start and answer the handshake and tools/list
    required: bool = False  # true: the instance refuses to start without it
    max_result_chars: int = 100_000  # a longer text result is cut, with a note

    def __post_init__(self) -> None:
        # A relative cwd was resolved each time the server started: a `chdir` of the
        # process in between moved it (or made it fail), at any restart. Resolved once,
        # here, it is the directory the entry was written for. `~` is the user's home.
        if self.cwd is not None:
            absolute = os.path.abspath(os.path.expanduser(self.cwd))
            msgspec.structs.force_setattr(self, "cwd", absolute)


def mcp_tool_name(server: str, tool: str) -> str:
    return f"{MCP_PREFIX}{server}__{tool}"


def _where(index: int, entry: McpServer | None = None) -> str:
    name = f" ({entry.name})" if entry is not None and entry.name else ""
    return f"[[mcp]] #{index + 1}{name}"


def check_mcp_servers(servers: Sequence[McpServer]) -> None:
    """Refuse an unusable entry, naming it: a bad name, a name used twice or one whose
    tools' names would run into another's, neither or both of command and url, options
    of the other transport, a cwd that is not a directory, bad numbers."""
    seen: set[str] = set()
    names = {server.name for server in servers}
    for index, server in enumerate(servers):
        where = _where(index, server)
        if not _NAME.fullmatch(server.name):
            raise ToolDefinitionError(
                f"{_where(index)}: name {server.name!r} must be 1-64 of A-Z a-z 0-9 _ -"
            )
        if "__" in server.name:
            # mcp__a__b__c could be server a's tool b__c or server a__b's tool c.
            raise ToolDefinitionError(
                f"{where}: name {server.name!r} may not hold '__' (its tools are named "
                "mcp__{server}__{tool}, which would be ambiguous)"
            )
        if server.name in seen:
            raise ToolDefinitionError(
                f"{where}: another [[mcp]] entry has the name {server.name!r}"
            )
        if server.name.endswith("_") and server.name[:-1] in names:
            # The one way two names run into each other once prefixed: mcp__a___x is
            # server a_'s tool x and server a's tool _x, and the second server's tool
            # was left out, the one the model meant or not.
            other, tool = server.name[:-1], "x"
            raise ToolDefinitionError(
                f"{where}: name {server.name!r} is another entry's {other!r} with a '_' "
                f"after it: {mcp_tool_name(server.name, tool)} would name both {server.name}'s "
                f"tool {tool} and {other}'s tool _{tool}; rename one of them"
            )
        seen.add(server.name)
        if (server.command is None) == (server.url is None):
            raise ToolDefinitionError(
                f"{where}: give command (a stdio server) or url (streamable HTTP), one of them"
            )
        if server.command is not None:
            if not server.command or not server.command[0]:
                raise ToolDefinitionError(f"{where}: command is empty")
            if server.headers:
                raise ToolDefinitionError(f"{where}: headers are for url servers, not command")
        if server.url is not None:
            if not server.url.startswith(("http://", "https://")):
                raise ToolDefinitionError(f"{where}: url must be http:// or https://")
            _check_headers(server.headers, where)
            if server.env or server.cwd is not None:
                raise ToolDefinitionError(f"{where}: env and cwd are for command servers, not url")
        if server.cwd is not None and not Path(server.cwd).is_dir():
            # Found only at the server's start, it failed every retry with a bare
            # "FileNotFoundError: No such file or directory", naming nothing.
            what = "is not a directory" if Path(server.cwd).exists() else "does not exist"
            raise ToolDefinitionError(f"{where}: cwd {server.cwd!r} {what}")
        for key in ("timeout_s", "startup_timeout_s"):
            value = getattr(server, key)
            if not value > 0:
                raise ToolDefinitionError(f"{where}: {key} must be greater than 0, got {value}")
        if server.max_result_chars < 1000:
            raise ToolDefinitionError(
                f"{where}: max_result_chars must be at least 1000, got {server.max_result_chars}"
            )


def _check_headers(headers: Mapping[str, str], where: str) -> None:
    """Refuse a header HTTP would refuse. Found only when the server was reached, it
    failed every try, with the HTTP library's error quoting the value: often a secret
    (a token pasted with its line break), here it is named but never quoted."""
    for name, value in headers.items():
        if not _HEADER_NAME.fullmatch(name):
            raise ToolDefinitionError(f"{where}: headers: {name!r} is not a valid HTTP header name")
        if not _HEADER_VALUE.fullmatch(value):
            raise ToolDefinitionError(
                f"{where}: headers: the value of {name!r} is not a valid HTTP header value "
                "(a line break, another control or a non-ASCII character, or a space at "
                "either end; not shown, as it may be a secret)"
            )


def mcp_servers(given: Iterable[McpServer | Mapping[str, Any]]) -> tuple[McpServer, ...]:
    """The library's `mcp=[...]`: structs as they are, mappings decoded as the config
    decodes `[[mcp]]` (the same errors); then checked."""
    servers: list[McpServer] = []
    for index, entry in enumerate(given):
        if isinstance(entry, McpServer):
            servers.append(entry)
            continue
        try:
            servers.append(msgspec.convert(entry, McpServer))
        except msgspec.ValidationError as exc:
            name = entry.get("name")
            where = _where(index) + (f" ({name})" if isinstance(name, str) and name else "")
            # msgspec's path (`- at `$.timeout_s``) as the config's errors give it.
            what, _, path = str(exc).partition(" - at `$")
            key = path.removesuffix("`").removeprefix(".")
            message = what + (f" (at {key})" if key else "")
            raise ToolDefinitionError(f"{where}: {message}") from None
    check_mcp_servers(servers)
    return tuple(servers)
