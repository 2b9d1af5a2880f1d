"""The HTTP face of the local Messages API: routes, headers, errors and SSE streams."""

from __future__ import annotations

import secrets
import time
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import anyio
import msgspec
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from ._cache import CacheSimulator, CacheUsage, prefix_blocks
from ._clock import Clock, MonotonicClock
from ._diagnostics import DiagnosticsBook
from ._faults import DropConnection, Fault, Latency, MidStreamError, Stall, StatusFault
from ._responder import DefaultResponder, Reply, ReplyText, Responder
from ._schema import CountTokensRequest, MessagesRequest
from ._tokens import canonical_json, estimate_text_tokens
from ._validate import VERSIONS, ApiError, decode_request, validate

__all__ = ["ConnectionDropped", "LocalAPIState", "RecordedRequest", "build_app"]

_FAULT_HEADER = "x-localapi-fault"
_fault_decoder = msgspec.json.Decoder(Fault)


class ConnectionDropped(Exception):
    """Raised inside a stream to cut the connection (a `DropConnection` fault)."""


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    path: str
    headers: dict[str, str]
    body: bytes
    received_at: float = 0.0  # time.perf_counter() when the body was read

    def json(self) -> Any:
        return msgspec.json.decode(self.body)


@dataclass
class LocalAPIState:
    responder: Responder = field(default_factory=DefaultResponder)
    clock: Clock = field(default_factory=MonotonicClock)
    latency: Latency = field(default_factory=Latency)
    api_key: str | None = None
    record_limit: int = 1000
    faults: deque[Fault] = field(default_factory=deque)
    requests: deque[RecordedRequest] = field(init=False)
    cache: CacheSimulator = field(init=False)
    diagnostics: DiagnosticsBook = field(default_factory=DiagnosticsBook)
    served: int = 0
    # perf_counter() when each response's last byte was produced (benchmarks read it)
    finished_at: deque[float] = field(default_factory=lambda: deque(maxlen=1000))

    def __post_init__(self) -> None:
        self.requests = deque(maxlen=self.record_limit)
        self.cache = CacheSimulator(self.clock)


def _new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(12)}"


def _error_response(error: ApiError, request_id: str) -> JSONResponse:
    body = {
        "type": "error",
        "error": {"type": error.type, "message": error.message},
        "request_id": request_id,
    }
    headers = {"request-id": request_id, **error.headers}
    return JSONResponse(body, status_code=error.status, headers=headers)


def _check_headers(request: Request, state: LocalAPIState) -> str:
    key = request.headers.get("x-api-key") or None
    auth = request.headers.get("authorization", "")
    if key is None and auth.lower().startswith("bearer "):
        key = auth[7:].strip()
    if not key:
        raise ApiError(401, "x-api-key or Authorization: Bearer header is required")
    if state.api_key is not None and key != state.api_key:
        raise ApiError(401, "invalid x-api-key")
    version = request.headers.get("anthropic-version")
    if version is None:
        raise ApiError(400, "anthropic-version: header is required")
    if version not in VERSIONS:
        raise ApiError(400, f"anthropic-version: {version!r} is not a valid version")
    return version


def _take_fault(request: Request, state: LocalAPIState) -> Fault | None:
    raw = request.headers.get(_FAULT_HEADER)
    if raw is not None:
        try:
            return _fault_decoder.decode(raw)
        except msgspec.DecodeError as exc:
            raise ApiError(400, f"{_FAULT_HEADER}: {exc}") from None
    return state.faults.popleft() if state.faults else None


def _status_fault(fault: StatusFault) -> ApiError:
    headers: dict[str, str] = {}
    if fault.retry_after is not None:
        headers["retry-after"] = f"{fault.retry_after:g}"
    if fault.retry_after_ms is not None:
        headers["retry-after-ms"] = str(fault.retry_after_ms)
    if fault.should_retry is not None:
        headers["x-should-retry"] = "true" if fault.should_retry else "false"
    messages = {429: "Rate limited", 500: "Internal server error", 529: "Overloaded"}
    return ApiError(fault.status, messages.get(fault.status, "Injected fault"), headers)


def _usage_json(usage: CacheUsage, output_tokens: int) -> dict[str, Any]:
    return {
        "input_tokens": usage.uncached,
        "cache_creation_input_tokens": usage.written,
        "cache_read_input_tokens": usage.read,
        "cache_creation": {
            "ephemeral_5m_input_tokens": usage.written_5m,
            "ephemeral_1h_input_tokens": usage.written_1h,
        },
        "output_tokens": output_tokens,
        "service_tier": "standard",
    }


@dataclass(frozen=True, slots=True)
class _Planned:
    """A reply cut to max_tokens, with ids, ready to send."""

    blocks: list[dict[str, Any]]
    stop_reason: str
    output_tokens: int


def _plan(reply: Reply, max_tokens: int) -> _Planned:
    budget = max_tokens
    blocks: list[dict[str, Any]] = []
    used = 0
    truncated = False
    for block in reply.blocks:
        if isinstance(block, ReplyText):
            tokens = estimate_text_tokens(block.text)
            text = block.text
            if used + tokens > budget:
                text = text.encode()[: max(budget - used, 0) * 4].decode("utf-8", "ignore")
                tokens, truncated = estimate_text_tokens(text), True
            if text:
                blocks.append({"type": "text", "text": text})
            used += tokens
        else:
            tokens = estimate_text_tokens(block.name + canonical_json(block.input))
            if used + tokens > budget:
                truncated = True
                break
            blocks.append(
                {
                    "type": "tool_use",
                    "id": block.id or _new_id("toolu"),
                    "name": block.name,
                    "input": block.input,
                }
            )
            used += tokens
        if truncated:
            break
    if truncated:
        stop = "max_tokens"
    elif reply.stop_reason is not None:
        stop = reply.stop_reason
    else:
        stop = "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"
    return _Planned(blocks, stop, max(used, 1))


def _sse(event: str, data: dict[str, Any]) -> bytes:
    return b"event: " + event.encode() + b"\ndata: " + msgspec.json.encode(data) + b"\n\n"


def _chunks(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


class _Exchange:
    """One accepted request: its usage is decided when the response starts."""

    def __init__(self, state: LocalAPIState, request: MessagesRequest, planned: _Planned) -> None:
        self.state = state
        self.request = request
        self.planned = planned
        self.message_id = _new_id("msg")
        self.usage = state.cache.lookup(request)  # the cache is consulted on arrival

    def start(self) -> tuple[CacheUsage, dict[str, Any] | None]:
        """The response starts: this request's cache entries become readable now."""
        state, request, usage = self.state, self.request, self.usage
        state.cache.commit(usage)
        diagnostics: dict[str, Any] | None = None
        if request.diagnostics is not None:
            previous = request.diagnostics.previous_message_id
            reason = None
            if previous is not None:
                reason = state.diagnostics.diagnose(previous, request.model, usage)
            diagnostics = {"cache_miss_reason": reason}
        state.diagnostics.record(self.message_id, request.model, usage)
        return usage, diagnostics

    def message(
        self,
        content: list[dict[str, Any]],
        usage: dict[str, Any],
        stop: str | None,
        diagnostics: dict[str, Any] | None,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "id": self.message_id,
            "type": "message",
            "role": "assistant",
            "model": self.request.model,
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": usage,
        }
        if diagnostics is not None:
            body["diagnostics"] = diagnostics
        return body

    async def _pause(self, tokens: int) -> None:
        rate = self.state.latency.tokens_per_second
        if rate > 0:
            await anyio.sleep(tokens / rate)

    async def events(self, fault: Fault | None) -> AsyncIterator[bytes]:
        latency = self.state.latency
        if latency.time_to_first_token:
            await anyio.sleep(latency.time_to_first_token)
        usage, diagnostics = self.start()
        planned = self.planned
        sent = 0
        cut_after = fault.after_events if isinstance(fault, MidStreamError | DropConnection) else -1

        def emit(event: str, data: dict[str, Any]) -> bytes:
            nonlocal sent
            sent += 1
            return _sse(event, data)

        def cut() -> bytes:
            if isinstance(fault, DropConnection):
                raise ConnectionDropped("injected: connection dropped mid-stream")
            assert isinstance(fault, MidStreamError)
            message = "Overloaded" if fault.error_type == "overloaded_error" else "Internal error"
            error = {"type": fault.error_type, "message": message}
            return _sse("error", {"type": "error", "error": error})

        start_usage = _usage_json(usage, 1)
        yield emit(
            "message_start",
            {
                "type": "message_start",
                "message": self.message([], start_usage, None, diagnostics),
            },
        )
        stream: list[tuple[str, dict[str, Any], int]] = [("ping", {"type": "ping"}, 0)]
        for index, block in enumerate(planned.blocks):
            if block["type"] == "text":
                stream.append(
                    (
                        "content_block_start",
                        {
                            "type": "content_block_start",
                            "index": index,
                            "content_block": {"type": "text", "text": ""},
                        },
                        0,
                    )
                )
                for piece in _chunks(block["text"], 24):
                    stream.append(
                        (
                            "content_block_delta",
                            {
                                "type": "content_block_delta",
                                "index": index,
                                "delta": {"type": "text_delta", "text": piece},
                            },
                            estimate_text_tokens(piece),
                        )
                    )
            else:
                stream.append(
                    (
                        "content_block_start",
                        {
                            "type": "content_block_start",
                            "index": index,
                            "content_block": {
                                "type": "tool_use",
                                "id": block["id"],
                                "name": block["name"],
                                "input": {},
                            },
                        },
                        0,
                    )
                )
                for piece in _chunks(canonical_json(block["input"]), 32):
                    stream.append(
                        (
                            "content_block_delta",
                            {
                                "type": "content_block_delta",
                                "index": index,
                                "delta": {"type": "input_json_delta", "partial_json": piece},
                            },
                            estimate_text_tokens(piece),
                        )
                    )
            stream.append(("content_block_stop", {"type": "content_block_stop", "index": index}, 0))
        final_usage = _usage_json(usage, planned.output_tokens)
        del final_usage["cache_creation"], final_usage["service_tier"]
        stream.append(
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": planned.stop_reason, "stop_sequence": None},
                    "usage": final_usage,
                },
                0,
            )
        )
        stream.append(("message_stop", {"type": "message_stop"}, 0))
        for event, data, tokens in stream:
            if sent == cut_after:
                yield cut()
                return
            await self._pause(tokens)
            yield emit(event, data)
        self.state.finished_at.append(time.perf_counter())


def build_app(state: LocalAPIState) -> Starlette:
    async def messages(request: Request) -> Response:
        request_id = _new_id("req")
        body = await request.body()
        state.requests.append(
            RecordedRequest(request.url.path, dict(request.headers), body, time.perf_counter())
        )
        state.served += 1
        try:
            version = _check_headers(request, state)
            fault = _take_fault(request, state)
            if isinstance(fault, Stall):
                await anyio.sleep(fault.seconds)
            elif isinstance(fault, StatusFault):
                raise _status_fault(fault)
            parsed = validate(decode_request(body, MessagesRequest), version)
            try:
                reply = state.responder.respond(parsed)
            except LookupError as exc:
                raise ApiError(500, str(exc)) from None
        except ApiError as error:
            return _error_response(error, request_id)
        exchange = _Exchange(state, parsed, _plan(reply, parsed.max_tokens))
        headers = {"request-id": request_id}
        if parsed.stream:
            return StreamingResponse(
                exchange.events(fault),
                media_type="text/event-stream",
                headers={**headers, "cache-control": "no-cache"},
            )
        if state.latency.time_to_first_token:
            await anyio.sleep(state.latency.time_to_first_token)
        usage, diagnostics = exchange.start()
        planned = exchange.planned
        body_json = exchange.message(
            planned.blocks,
            _usage_json(usage, planned.output_tokens),
            planned.stop_reason,
            diagnostics,
        )
        return JSONResponse(body_json, headers=headers)

    async def count_tokens(request: Request) -> Response:
        request_id = _new_id("req")
        body = await request.body()
        try:
            _check_headers(request, state)
            parsed = decode_request(body, CountTokensRequest)
            as_messages = MessagesRequest(
                model=parsed.model,
                max_tokens=1,
                messages=parsed.messages,
                system=parsed.system,
                tools=parsed.tools,
            )
            total = sum(block.tokens for block in prefix_blocks(as_messages))
        except ApiError as error:
            return _error_response(error, request_id)
        return JSONResponse({"input_tokens": total}, headers={"request-id": request_id})

    async def not_found(request: Request, exc: Exception) -> Response:
        return _error_response(ApiError(404, f"Not found: {request.url.path}"), _new_id("req"))

    async def not_allowed(request: Request, exc: Exception) -> Response:
        error = ApiError(405, f"Method {request.method} not allowed on {request.url.path}")
        return _error_response(error, _new_id("req"))

    routes = [
        Route("/v1/messages", messages, methods=["POST"]),
        Route("/v1/messages/count_tokens", count_tokens, methods=["POST"]),
    ]
    return Starlette(routes=routes, exception_handlers={404: not_found, 405: not_allowed})
