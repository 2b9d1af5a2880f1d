"""The daemon's OpenAPI 3.1 description, built from the msgspec structs it decodes and sends.

The schemas come from `msgspec.json.schema_components` over the same types the routes
use, then pass through the wire rules of `_wire` (timestamps as ISO 8601 strings, tool
inputs as objects), so the description cannot drift from what is decoded and sent.
A test checks that every route the app serves is described here.
"""

from __future__ import annotations

import functools
from typing import Any

import msgspec

from actors import ModelRequest, TurnEvent
from storage import Document, Memory, Reminder

from .._errors import WIRE_ERRORS
from .._wire import (
    ContinuumPage,
    DocumentBody,
    DocumentPage,
    ErrorBody,
    Health,
    JobList,
    MemoryBody,
    MemoryHitPage,
    MemoryPage,
    MessagePage,
    ModelSettingsBody,
    ModelSettingsReply,
    ReminderBody,
    ReminderPage,
    TurnBody,
    TurnPage,
    UserBody,
    UserCreated,
    UserList,
)

__all__ = ["DOCS_PAGE", "OPERATIONS", "openapi", "openapi_json"]

REF = "#/components/schemas/{name}"


class Param(msgspec.Struct, frozen=True):
    name: str
    where: str  # "path" or "query"
    schema: dict[str, Any]
    description: str = ""


class Operation(msgspec.Struct, frozen=True):
    method: str
    path: str
    summary: str
    ok: int = 200
    reply: Any = None  # a type, or None for no body
    body: Any = None
    params: tuple[Param, ...] = ()
    errors: tuple[int, ...] = (400,)
    media: str = "application/json"
    alt: Any = None  # a second reply type, when a query parameter changes the answer


_STR = {"type": "string"}
_INT = {"type": "integer", "minimum": 1}
_LABEL = {"type": "string", "pattern": "^[A-Za-z0-9_.-]{1,64}$"}
CONTINUUM = Param("continuum_id", "path", {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$"})
PAGE = (
    Param("limit", "query", {"type": "integer", "minimum": 1, "maximum": 10000, "default": 100}),
    Param("cursor", "query", _STR, "the `next_cursor` of the previous page"),
)

OPERATIONS: tuple[Operation, ...] = (
    Operation(
        "get",
        "/v1/continuums",
        "List continuums, the most recently active first.",
        reply=ContinuumPage,
        params=PAGE,
    ),
    Operation(
        "delete",
        "/v1/continuums/{continuum_id}",
        "Delete a continuum with its turns, messages and search index entries.",
        ok=204,
        params=(CONTINUUM,),
        errors=(400, 404, 429),
    ),
    Operation(
        "post",
        "/v1/continuums/{continuum_id}/turns",
        "Run a turn; its events stream as server-sent events (each with an `id:`; a"
        " `: ping` comment every 15 s while nothing else is sent).",
        reply=TurnEvent,
        body=TurnBody,
        params=(CONTINUUM,),
        errors=(400, 413, 429, 503),
        media="text/event-stream",
    ),
    Operation(
        "get",
        "/v1/continuums/{continuum_id}/turns",
        "The continuum's turn records: the latest first page, each page in time order;"
        " `next_cursor` leads to earlier turns.",
        reply=TurnPage,
        params=(CONTINUUM, *PAGE),
        errors=(400, 404),
    ),
    Operation(
        "get",
        "/v1/continuums/{continuum_id}/messages",
        "The continuum's messages, in order.",
        reply=MessagePage,
        params=(CONTINUUM, *PAGE),
        errors=(400, 404),
    ),
    Operation(
        "get",
        "/v1/continuums/{continuum_id}/context",
        "The Messages API request a turn with `message` would send now (nothing is sent).",
        reply=ModelRequest,
        params=(CONTINUUM, Param("message", "query", _STR, "the would-be user message")),
    ),
    Operation(
        "get",
        "/v1/continuums/{continuum_id}/settings",
        "The continuum's own model settings, and those its turns run with.",
        reply=ModelSettingsReply,
        params=(CONTINUUM,),
    ),
    Operation(
        "put",
        "/v1/continuums/{continuum_id}/settings",
        "Choose the continuum's model settings (null: the config's).",
        reply=ModelSettingsReply,
        body=ModelSettingsBody,
        params=(CONTINUUM,),
    ),
    Operation(
        "get",
        "/v1/reminders",
        "List reminders (open ones unless include_completed).",
        reply=ReminderPage,
        params=(*PAGE, Param("include_completed", "query", {"type": "boolean"})),
    ),
    Operation(
        "post", "/v1/reminders", "Add a reminder.", ok=201, reply=Reminder, body=ReminderBody
    ),
    Operation(
        "delete",
        "/v1/reminders/{reminder_id}",
        "Delete a reminder.",
        ok=204,
        params=(Param("reminder_id", "path", _INT),),
        errors=(400, 404),
    ),
    Operation(
        "post",
        "/v1/reminders/{reminder_id}/complete",
        "Mark a reminder done.",
        reply=Reminder,
        params=(Param("reminder_id", "path", _INT),),
        errors=(400, 404),
    ),
    Operation(
        "get",
        "/v1/memories",
        "List memories, the newest first; with `q`, one ranked page of search hits"
        " (a MemoryHitPage, whose next_cursor is always null).",
        reply=MemoryPage,
        alt=MemoryHitPage,
        params=(*PAGE, Param("q", "query", _STR, "search text")),
    ),
    Operation("post", "/v1/memories", "Add a memory.", ok=201, reply=Memory, body=MemoryBody),
    Operation(
        "delete",
        "/v1/memories/{memory_id}",
        "Delete a memory and its search index entry.",
        ok=204,
        params=(Param("memory_id", "path", _INT),),
        errors=(400, 404),
    ),
    Operation("get", "/v1/documents", "List documents by label.", reply=DocumentPage, params=PAGE),
    Operation(
        "post",
        "/v1/documents",
        "Create or replace a document.",
        ok=201,
        reply=Document,
        body=DocumentBody,
    ),
    Operation(
        "delete",
        "/v1/documents/{label}",
        "Delete a document.",
        ok=204,
        params=(Param("label", "path", _LABEL),),
        errors=(404,),
    ),
    Operation(
        "post",
        "/v1/users",
        "Add a user (admin token only); the answer holds its token, shown this once.",
        ok=201,
        reply=UserCreated,
        body=UserBody,
        errors=(400, 403, 409),
    ),
    Operation(
        "get",
        "/v1/users",
        "List the added users (admin token only; `default` is built in).",
        reply=UserList,
        errors=(403,),
    ),
    Operation(
        "get",
        "/v1/jobs",
        "The background jobs (segment summaries) of the token's user, oldest first.",
        reply=JobList,
        params=(Param("continuum_id", "query", CONTINUUM.schema, "Only this continuum's."),),
    ),
    Operation("get", "/healthz", "Liveness (needs no token).", reply=Health, errors=()),
    Operation(
        "get",
        "/metrics",
        "Prometheus metrics (text exposition format; admin token only).",
        reply=str,
        errors=(403,),
        media="text/plain",
    ),
    Operation("get", "/openapi.json", "This description (needs no token).", reply=dict, errors=()),
    Operation(
        "get",
        "/docs",
        "A readable page of this description.",
        reply=str,
        errors=(),
        media="text/html",
    ),
)


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
        if name.endswith("_at") and "date-time" not in msgspec.json.encode(props[name]).decode():
            nullable = "anyOf" in props[name]
            stamp = {"type": "string", "format": "date-time"}
            props[name] = {"anyOf": [stamp, {"type": "null"}]} if nullable else stamp
            if "default" in schema["properties"][name]:
                props[name]["default"] = None
        elif name == "input_json":
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


def _error_responses(statuses: tuple[int, ...]) -> dict[str, Any]:
    kinds: dict[int, set[str]] = {}
    for status, kind in WIRE_ERRORS.values():
        kinds.setdefault(status, set()).add(kind)
    kinds.setdefault(404, set()).add("not_found")
    out: dict[str, Any] = {}
    for status in (*statuses, 401, 500):
        fallback = "unauthorized" if status == 401 else "internal_error"
        types = ", ".join(sorted(kinds.get(status, {fallback})))
        out[str(status)] = {
            "description": f"error type: {types}",
            "content": {"application/json": {"schema": {"$ref": REF.format(name="ErrorBody")}}},
        }
    return out


def _operation_id(op: Operation) -> str:
    words = op.path.strip("/").replace("{", "").replace("}", "").replace(".", "_").split("/")
    return "_".join([op.method, *words])


@functools.cache
def openapi() -> dict[str, Any]:
    types = [ErrorBody, TurnEvent, ModelRequest]
    for op in OPERATIONS:
        for t in (op.body, op.reply, op.alt):
            if t is not None and t not in (str, dict) and t not in types:
                types.append(t)
    refs, components = msgspec.json.schema_components(types, ref_template=REF)
    by_type = dict(zip(types, refs, strict=True))
    paths: dict[str, Any] = {}
    for op in OPERATIONS:
        entry: dict[str, Any] = {
            "summary": op.summary,
            "operationId": _operation_id(op),
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
                schema = {"oneOf": [schema, by_type[op.alt]]}
            ok["content"] = {op.media: {"schema": schema}}
        entry["responses"] = {str(op.ok): ok, **_error_responses(op.errors)}
        paths.setdefault(op.path, {})[op.method] = entry
    spec = {
        "openapi": "3.1.0",
        "info": {
            "title": "Frontmind",
            "version": "1",
            "description": "Long-lived Claude agents over HTTP. Every timestamp is ISO 8601"
            " with a UTC offset; lists are paged with `?limit=&cursor=` and answer"
            " `next_cursor`. Send `Authorization: Bearer <token>` when the daemon has one.",
        },
        "paths": paths,
        "components": {
            "schemas": {name: _wire_rules(name, s) for name, s in components.items()},
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}],
    }
    result: dict[str, Any] = msgspec.json.decode(msgspec.json.encode(spec))  # plain JSON
    return result


@functools.cache
def openapi_json() -> bytes:
    return msgspec.json.encode(openapi())


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
