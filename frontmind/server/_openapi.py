"""The daemon's OpenAPI 3.1 description, built from its table of endpoints.

Each `Endpoint` (one row of `frontmind.server._routes.ENDPOINTS`) is what the router
serves and what this describes: method, path, handler, the request and reply structs,
the auth level, the operation id, tag and summary. The schemas come from
`msgspec.json.schema_components` over those same structs, then pass through the wire
rules of `_wire` (timestamps as ISO 8601 strings, tool inputs as objects), so the
description cannot drift from what is decoded and sent.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from actors import ModelRequest, TurnEvent
from storage import FrontmindError

from .._exceptions import HTTP_STATUS
from .._wire import ErrorBody

__all__ = ["DOCS_PAGE", "TAGS", "Auth", "Endpoint", "Param", "openapi"]

REF = "#/components/schemas/{name}"


Auth = Literal["public", "user", "admin"]
Handler = Callable[[Request], Awaitable[Response]]


class Param(msgspec.Struct, frozen=True):
    name: str
    where: str  # "path" or "query"
    schema: dict[str, Any]
    description: str = ""


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One operation of the API, as both the router and this description read it.

    `auth`: "public" needs no token (so no 401 is described), "user" any valid token,
    "admin" the admin token (a user's token is answered 403).
    """

    method: str  # upper case, as the router matches it
    path: str
    handler: Handler
    operation_id: str
    tag: str
    summary: str
    auth: Auth = "user"
    ok: int = 200
    reply: Any = None  # a type, or None for no body
    body: Any = None
    params: tuple[Param, ...] = ()
    errors: tuple[int, ...] = (400,)  # besides those `auth` brings, and 500
    media: str = "application/json"
    alt: Any = None  # a second reply type, when a query parameter changes the answer

    def statuses(self) -> tuple[int, ...]:
        """Every error status the operation can answer, in order: its own, and those
        every operation of its kind answers. A token is looked up in storage (503 when
        it is down); a user's writes meet a user being forgotten (429); a body and a
        path parameter are checked (400 when malformed); a body meets the edge guard
        before any route (415 not JSON, 413 over `max_body_bytes`, 408 too slow)."""
        auth = {"public": (), "user": (401, 503), "admin": (401, 403, 503)}[self.auth]
        gate = (429,) if self.auth == "user" and self.method != "GET" else ()
        checked = self.body is not None or any(p.where == "path" for p in self.params)
        malformed = (400,) if checked else ()
        guarded = (408, 413, 415) if self.body is not None else ()
        return tuple(sorted({*self.errors, *auth, *gate, *malformed, *guarded, 500}))


TAGS = {
    "continuums": "Conversations: list, delete, their messages and model settings.",
    "turns": "Run a turn, read the turn records, preview the next request.",
    "reminders": "The user's reminders.",
    "memories": "The user's long-term memories and their search.",
    "documents": "The user's documents, which make up the system prompt.",
    "users": "Users and their tokens (admin token only).",
    "mcp": "The MCP servers whose tools the model is offered, and their reload.",
    "jobs": "Background work: segment summaries, their state and the cost of their call.",
    "service": "Health, metrics and this description.",
}


_RAW_BLOCK = {
    "type": "object",
    "description": "a block kept as the exact JSON it came as: thinking, redacted"
    " thinking, image, document, server tool use or result (see the Messages API)",
    "properties": {"type": {"type": "string"}},
    "required": ["type"],
}


def _wire_rules(name: str, schema: dict[str, Any]) -> dict[str, Any]:
    """Apply the wire rules of `_wire` to one component schema."""
    if name == "RawBlock":
        return dict(_RAW_BLOCK)
    _drop_raw_discriminators(schema)
    props = schema.get("properties")
    if name == "ToolResultBlock" and props and "content_json" in props:
        del props["content_json"]
        props["content"] = {
            "anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "object"}}]
        }
    if not props:
        return schema
    for name in list(props):
        if name == "input_json":
            props["input"] = {"type": "object", "description": "the tool input"}
            del props["input_json"]
            schema["required"] = [
                "input" if r == "input_json" else r for r in schema.get("required", [])
            ]
    return schema


def _drop_raw_discriminators(schema: Any) -> None:
    """A raw block's `type` is its own (thinking, image, …): no tag discriminates it."""
    if isinstance(schema, dict):
        mapping = schema.get("discriminator", {}).get("mapping", {})
        if "raw" in mapping:
            del schema["discriminator"]
        for value in schema.values():
            _drop_raw_discriminators(value)
    elif isinstance(schema, list):
        for value in schema:
            _drop_raw_discriminators(value)


# The HTTP edge's own answers, besides the errors of the tree.
_EDGE_TYPES = {401: "unauthorized", 404: "not_found", 405: "method_not_allowed"}


def _error_responses(statuses: tuple[int, ...]) -> dict[str, Any]:
    kinds: dict[int, set[str]] = {}
    for cls, status in HTTP_STATUS.items():
        kind = cls.type if issubclass(cls, FrontmindError) else FrontmindError.type
        kinds.setdefault(status, set()).add(kind)
    for status, kind in _EDGE_TYPES.items():
        kinds.setdefault(status, set()).add(kind)
    out: dict[str, Any] = {}
    for status in statuses:
        types = ", ".join(sorted(kinds[status]))
        out[str(status)] = {
            "description": f"error type: {types}",
            "content": {"application/json": {"schema": {"$ref": REF.format(name="ErrorBody")}}},
        }
    return out


def _media(media: str, schema: dict[str, Any]) -> dict[str, Any]:
    """A reply's media type object. A stream of server-sent events is text to a client
    that reads whole bodies (a generated client hands it back as a string, rather than
    failing to read it as one JSON value); the events' own schema, by their `event`
    name, rides beside it as `x-item-schema` (OpenAPI 3.2's `itemSchema`, which a 3.1
    description may carry only as an extension)."""
    if media != "text/event-stream":
        return {"schema": schema}
    return {
        "schema": {
            "type": "string",
            "description": "server-sent events; each event's `data` is one of x-item-schema",
        },
        "x-item-schema": schema,
    }


def openapi(endpoints: Sequence[Endpoint]) -> dict[str, Any]:
    """The OpenAPI 3.1 description of `endpoints`, as plain JSON values."""
    types = [ErrorBody, TurnEvent, ModelRequest]
    for op in endpoints:
        for t in (op.body, op.reply, op.alt):
            if t is not None and t not in (str, dict) and t not in types:
                types.append(t)
    refs, components = msgspec.json.schema_components(types, ref_template=REF)
    by_type = dict(zip(types, refs, strict=True))
    paths: dict[str, Any] = {}
    for op in endpoints:
        entry: dict[str, Any] = {
            "operationId": op.operation_id,
            "tags": [op.tag],
            "summary": op.summary,
            "parameters": [
                {
                    "name": p.name,
                    "in": p.where,
                    "required": p.where == "path",
                    "schema": p.schema,
                    **({"description": p.description} if p.description else {}),
                }
                for p in op.params
            ],
        }
        if op.body is not None:
            entry["requestBody"] = {
                "required": True,
                "content": {"application/json": {"schema": by_type[op.body]}},
            }
        ok: dict[str, Any] = {"description": "OK"}
        if op.reply is str:
            ok["content"] = {op.media: {"schema": {"type": "string"}}}
        elif op.reply is dict:
            ok["content"] = {op.media: {"schema": {"type": "object"}}}
        elif op.reply is not None:
            schema = by_type[op.reply]
            if op.alt is not None:
                # anyOf: an empty page is valid as either (oneOf would refuse it).
                schema = {"anyOf": [schema, by_type[op.alt]]}
            ok["content"] = {op.media: _media(op.media, schema)}
        entry["responses"] = {str(op.ok): ok, **_error_responses(op.statuses())}
        if op.auth == "public":
            entry["security"] = []  # no token needed
        paths.setdefault(op.path, {})[op.method.lower()] = entry
    spec = {
        "openapi": "3.1.0",
        "info": {
            "title": "Frontmind",
            "version": "1",
            "description": "Long-lived Claude agents over HTTP. Every timestamp is ISO 8601"
            " with a UTC offset; lists are paged with `?limit=&cursor=` and answer"
            " `next_cursor`. Send `Authorization: Bearer <token>` when the daemon has one.",
        },
        "tags": [{"name": name, "description": text} for name, text in TAGS.items()],
        "paths": paths,
        "components": {
            "schemas": {name: _wire_rules(name, s) for name, s in components.items()},
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}],
    }
    result: dict[str, Any] = msgspec.json.decode(msgspec.json.encode(spec))  # plain JSON
    return result


# A self-contained page (no CDN, no external assets): it fetches /openapi.json and lists
# each operation with its parameters and schemas.
DOCS_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Frontmind API</title>
<style>
body{font:15px/1.45 system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem}
code,pre{font:13px ui-monospace,monospace}pre{background:#f4f4f4;padding:.5rem;overflow:auto}
h3{margin:1.5rem 0 .25rem}.m{display:inline-block;width:4.5rem;font-weight:bold}
</style></head><body>
<h1>Frontmind API</h1><p id="intro"></p><div id="ops">Loading /openapi.json …</div>
<script>
fetch("openapi.json").then(r => r.json()).then(spec => {
  document.getElementById("intro").textContent = spec.info.description;
  const ops = document.getElementById("ops"); ops.textContent = "";
  for (const [path, methods] of Object.entries(spec.paths)) {
    for (const [method, op] of Object.entries(methods)) {
      const h = document.createElement("h3");
      h.innerHTML = '<span class="m"></span><code></code>';
      h.firstChild.textContent = method.toUpperCase(); h.lastChild.textContent = path;
      const p = document.createElement("p"); p.textContent = op.summary;
      const pre = document.createElement("pre");
      pre.textContent = JSON.stringify({parameters: op.parameters,
        requestBody: op.requestBody, responses: op.responses}, null, 1);
      ops.append(h, p, pre);
    }
  }
  const s = document.createElement("h2"); s.textContent = "Schemas";
  const pre = document.createElement("pre");
  pre.textContent = JSON.stringify(spec.components.schemas, null, 1);
  ops.append(s, pre);
});
</script></body></html>
"""
