"""The HTTP face of the local Messages API: routes, headers, errors and SSE streams."""

from __future__ import annotations

import dataclasses
import secrets
import time
from collections import deque
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import anyio
import msgspec
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from ._cache import (
    CacheSimulator,
    CacheUsage,
    PrefixBlock,
    context_messages,
    edits_thinking,
    prefix_blocks,
)
from ._catalog import LIFECYCLES, LISTED_BY_DEFAULT, model_json, model_page
from ._clock import Clock, MonotonicClock
from ._context import COMPACT_BETA, CONTEXT_BETA
from ._diagnostics import DiagnosticsBook
from ._faults import (
    DropConnection,
    Fault,
    Latency,
    MidStreamError,
    Stall,
    StatusFault,
    rate_limit_answer,
)
from ._fetch import check_fetched
from ._models import MODELS, ModelInfo
from ._plan import Planned, plan
from ._prepare import Compaction, Prepared, plan_compaction, prepare
from ._responder import DefaultResponder, Responder, one_call_at_most
from ._schema import (
    CountTokensRequest,
    MessagesRequest,
    RedactedThinkingBlock,
    ThinkingBlock,
    has_thinking,
)
from ._sse import block_events, sse
from ._thinking import ThinkingSigner
from ._validate import (
    VERSIONS,
    ApiError,
    cache_controls,
    decode_request,
    require_model,
    validate,
)

__all__ = [
    "ConnectionDropped",
    "LocalAPIState",
    "RecordedRequest",
    "build_app",
    "count_request_tokens",
]

_FAULT_HEADER = "x-localapi-fault"
_COUNT_MAX_TOKENS = 1 << 30  # count_tokens takes no max_tokens; no thinking budget reaches it
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
    # The models served: the shipped models.toml's, or with rows given as data over them
    # (`_models.served_models`).
    models: Mapping[str, ModelInfo] = field(default_factory=lambda: MODELS)
    record_limit: int = 1000
    # The recorded bodies' bytes at most (the newest request is always kept): with a
    # long history a body is hundreds of KB, and a server that runs for hours would
    # otherwise hold 1,000 of them.
    record_bytes: int = 64 * 1024 * 1024
    faults: deque[Fault] = field(default_factory=deque)
    # URLs of images and documents that can no longer be downloaded (`_fetch.py`).
    gone_urls: set[str] = field(default_factory=set)
    requests: deque[RecordedRequest] = field(init=False)
    cache: CacheSimulator = field(init=False)
    diagnostics: DiagnosticsBook = field(default_factory=DiagnosticsBook)
    signer: ThinkingSigner = field(default_factory=ThinkingSigner)
    # refuse thinking signatures this server did not make (by default they are opaque)
    verify_foreign_signatures: bool = False
    # "calibrated" (the live API's counts, near enough) or "plain" (4 bytes a token, 3 a
    # block: for tests that add tokens up by hand)
    token_counts: str = "calibrated"
    # The simulated account's age, for preserved thinking's prefix check: "new" (created
    # on or after 2026-08-31: enforced by default on Fable 5.1 and its peers) or "old".
    account: str = "new"
    # `context_management` applied to every /v1/messages request that sends none, as a
    # client would send it with the beta client and its beta headers (benchmarks run
    # Frontmind's own requests with server-side context management this way).
    context_management: dict[str, Any] | None = None
    # The `compaction` entries of `usage.iterations`, one per compaction (their usage is
    # outside the responses' top-level figures: benchmarks add them up).
    compactions: list[dict[str, Any]] = field(default_factory=list)
    served: int = 0
    # perf_counter() when each response's last byte was produced (benchmarks read it)
    finished_at: deque[float] = field(default_factory=lambda: deque(maxlen=1000))
    _recorded_bytes: int = field(default=0, init=False, repr=False)

    def __post_init__(self) -> None:
        self.requests = deque()
        self.cache = CacheSimulator(self.clock, self.token_counts == "plain", self.models)

    def record(self, request: RecordedRequest) -> None:
        """Keep the request, and drop the oldest past `record_limit` or `record_bytes`."""
        self.requests.append(request)
        self._recorded_bytes += len(request.body)
        while len(self.requests) > 1 and (
            len(self.requests) > self.record_limit or self._recorded_bytes > self.record_bytes
        ):
            self._recorded_bytes -= len(self.requests.popleft().body)


def _new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(12)}"


def _error_response(error: ApiError, request_id: str) -> JSONResponse:
    detail: dict[str, Any] = {"type": error.type, "message": error.message}
    if error.details is not None:
        detail["details"] = error.details
    body = {
        "type": "error",
        "error": detail,
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


def _count_max_tokens(model: str, models: Mapping[str, ModelInfo]) -> int:
    """count_tokens takes no max_tokens: the model's largest, so no rule on it trips."""
    info = models.get(model)
    return info.max_output if info is not None and info.max_output else _COUNT_MAX_TOKENS


def _page_limit(raw: str) -> int:
    if not raw.isdigit() or not 1 <= int(raw) <= 1000:
        raise ApiError(400, "limit: Input should be between 1 and 1000")
    return int(raw)


def _lifecycles(request: Request) -> frozenset[str]:
    """The list's `lifecycle` filter: the SDK sends it as `lifecycle[]=...` (its
    brackets array format), once a value; none given, the active and deprecated models.
    The messages are pydantic's for a literal and a list's length (chosen: no public
    report quotes the live API's)."""
    given = request.query_params.getlist("lifecycle[]") + request.query_params.getlist("lifecycle")
    if not given:
        return LISTED_BY_DEFAULT
    if len(given) > len(LIFECYCLES):
        raise ApiError(400, "lifecycle: List should have at most 3 items after validation")
    for i, value in enumerate(given):
        if value not in LIFECYCLES:
            raise ApiError(
                400, f"lifecycle.{i}: Input should be 'active', 'deprecated' or 'retired'"
            )
    return frozenset(given)


def _betas(request: Request) -> frozenset[str]:
    """The `anthropic-beta` header's values (comma-separated, as the SDK joins them)."""
    raw = ",".join(request.headers.getlist("anthropic-beta"))
    return frozenset(v.strip() for v in raw.split(",") if v.strip())


def _is_beta(request: Request) -> bool:
    """A beta request: the beta client's `?beta=true`, or an `anthropic-beta` header (SDK
    2.15 sends the header alone; docs: beta headers, e.g. context editing's
    `context-management-2025-06-27`)."""
    return request.query_params.get("beta") == "true" or bool(
        request.headers.get("anthropic-beta", "").strip()
    )


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
    messages = {500: "Internal server error", 529: "Overloaded"}
    message = messages.get(fault.status, "Injected fault")
    if fault.status == 429:
        message, headers = rate_limit_answer(fault.retry_after, datetime.now(UTC))
    elif fault.retry_after is not None:
        headers["retry-after"] = f"{fault.retry_after:g}"
    if fault.retry_after_ms is not None:
        headers["retry-after-ms"] = str(fault.retry_after_ms)
    if fault.should_retry is not None:
        headers["x-should-retry"] = "true" if fault.should_retry else "false"
    return ApiError(fault.status, message, headers)


def _server_tool_use(request: MessagesRequest, blocks: list[dict[str, Any]]) -> dict[str, int]:
    """usage.server_tool_use: the server tool calls the reply made (docs: web search and
    web fetch tools, "Usage")."""
    names = [b.get("name") for b in blocks if b.get("type") == "server_tool_use"]
    return {
        "web_search_requests": names.count("web_search"),
        "web_fetch_requests": names.count("web_fetch"),
    }


def _has_server_tools(request: MessagesRequest) -> bool:
    return any(tool.type not in (None, "custom") for tool in request.tools or ())


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


def _iteration(kind: str, usage: CacheUsage, output_tokens: int) -> dict[str, Any]:
    """One entry of `usage.iterations` (compaction docs, "Understanding usage")."""
    entry = _usage_json(usage, output_tokens)
    del entry["service_tier"]
    return {"type": kind, **entry}


class _Exchange:
    """One accepted request: its usage is decided when the response starts.

    With a compaction, two sampling steps: the summary's (read from the cache over the
    whole request, writing nothing) and the reply's, on the compacted context; only the
    reply's is the top-level usage, both are in `usage.iterations`."""

    def __init__(
        self,
        state: LocalAPIState,
        prepared: Prepared,
        planned: Planned,
        blocks: list[PrefixBlock],
        compaction: tuple[Compaction, CacheUsage] | None = None,
        arrived: float | None = None,
    ) -> None:
        self.state = state
        self.arrived = time.perf_counter() if arrived is None else arrived
        self.prepared = prepared
        self.request = prepared.request
        self.planned = planned
        self.message_id = _new_id("msg")
        self.compaction = compaction
        self.usage = state.cache.lookup(self.request, blocks)  # consulted on arrival
        self.iterations: list[dict[str, Any]] | None = None

    def start(self) -> tuple[CacheUsage, dict[str, Any] | None]:
        """The response starts: this request's cache entries become readable now."""
        state, request, usage = self.state, self.request, self.usage
        state.cache.commit(usage)
        plan = self.prepared.plan
        if plan is not None and plan.compact is not None:
            # Every response of the compaction beta has `usage.iterations`.
            self.iterations = []
            if self.compaction is not None:
                compaction, summary_usage = self.compaction
                entry = _iteration("compaction", summary_usage, compaction.output_tokens)
                self.iterations.append(entry)
                state.compactions.append(entry)
            if self.compaction is None or not self.compaction[0].pause:
                self.iterations.append(_iteration("message", usage, self.planned.output_tokens))
        diagnostics: dict[str, Any] | None = None
        if request.diagnostics is not None:
            previous = request.diagnostics.previous_message_id
            reason = None
            if previous is not None:
                reason = state.diagnostics.diagnose(previous, request.model, usage)
            diagnostics = {"cache_miss_reason": reason}
            # Only a request that sends `diagnostics` leaves a fingerprint: "It stores
            # nothing for requests that omit the object" (cache diagnostics, "How cache
            # diagnostics work", https://platform.claude.com/docs/en/build-with-claude/
            # cache-diagnostics), so a later request naming one of those is answered
            # previous_message_not_found.
            state.diagnostics.record(self.message_id, request.model, usage)
        return usage, diagnostics

    def usage_body(self, usage: CacheUsage, output_tokens: int) -> dict[str, Any]:
        body = _usage_json(usage, output_tokens)
        if _has_server_tools(self.request):
            body["server_tool_use"] = _server_tool_use(self.request, self.planned.blocks)
        if self.iterations is not None:
            body["iterations"] = self.iterations
        return body

    def _context_management(self) -> dict[str, Any] | None:
        applied = self.prepared.applied
        return None if applied is None else {"applied_edits": applied}

    def message(
        self,
        content: list[dict[str, Any]],
        usage: dict[str, Any],
        stop: str | None,
        diagnostics: dict[str, Any] | None,
        stop_sequence: str | None = None,
        *,
        final: bool = True,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "id": self.message_id,
            "type": "message",
            "role": "assistant",
            "model": self.request.model,
            "content": content,
            "stop_reason": stop,
            "stop_sequence": stop_sequence,
            "usage": usage,
        }
        if diagnostics is not None:
            body["diagnostics"] = diagnostics
        if self.prepared.transformations is not None:
            body["input_transformations"] = self.prepared.transformations
        managed = self._context_management()
        if final and managed is not None:
            body["context_management"] = managed
        return body

    async def _pause(self, tokens: int) -> None:
        rate = self.state.latency.tokens_per_second
        if rate > 0:
            await anyio.sleep(tokens / rate)

    def _stream(
        self, usage: CacheUsage, diagnostics: dict[str, Any] | None
    ) -> list[tuple[str, dict[str, Any], int]]:
        planned = self.planned
        start = self.message([], _usage_json(usage, 1), None, diagnostics, final=False)
        stream: list[tuple[str, dict[str, Any], int]] = [
            ("message_start", {"type": "message_start", "message": start}, 0),
            ("ping", {"type": "ping"}, 0),
        ]
        for index, block in enumerate(planned.blocks):
            stream.extend(block_events(index, block))
        final_usage = self.usage_body(usage, planned.output_tokens)
        del final_usage["cache_creation"], final_usage["service_tier"]
        delta = {"stop_reason": planned.stop_reason, "stop_sequence": planned.stop_sequence}
        event: dict[str, Any] = {"type": "message_delta", "delta": delta, "usage": final_usage}
        managed = self._context_management()
        if managed is not None:
            # Docs (context editing): "in the final message_delta event when streaming".
            event["context_management"] = managed
        stream.append(("message_delta", event, 0))
        stream.append(("message_stop", {"type": "message_stop"}, 0))
        return stream

    async def first_token(self) -> None:
        """The simulated model's time to first token, counted from the request's arrival
        as a client counts it: the server's own work on the request (decoding, checks,
        the cache lookup, some 10 ms for a long history) is part of that time, not added
        to it, so a benchmark's model server adds its configured latency and not its CPU
        time or that time's jitter."""
        ttft = self.state.latency.time_to_first_token
        if ttft:
            await anyio.sleep(max(0.0, ttft - (time.perf_counter() - self.arrived)))

    async def events(self, fault: Fault | None) -> AsyncIterator[bytes]:
        await self.first_token()
        usage, diagnostics = self.start()
        # after_events counts the events sent before the fault: 0 fires before message_start.
        cut_after = fault.after_events if isinstance(fault, MidStreamError | DropConnection) else -1
        for sent, (event, data, tokens) in enumerate(self._stream(usage, diagnostics)):
            if sent == cut_after:
                if isinstance(fault, DropConnection):
                    raise ConnectionDropped("injected: connection dropped mid-stream")
                assert isinstance(fault, MidStreamError)
                kind = fault.error_type
                message = "Overloaded" if kind == "overloaded_error" else "Internal error"
                yield sse("error", {"type": "error", "error": {"type": kind, "message": message}})
                return
            await self._pause(tokens)
            yield sse(event, data)
        self.state.finished_at.append(time.perf_counter())


def _thread_error(request: MessagesRequest) -> ApiError:
    """The API's answer to `thread` where it cannot thread the request; the SDK's tool
    runner falls back to sending the whole conversation on `thread_unsupported_request`."""
    unsupported: list[str] = []
    if request.cache_control is not None or any(True for _ in cache_controls(request)):
        unsupported.append("cache_control")
    if request.context_management is not None:
        unsupported.append("context_management")
    if request.fallbacks is not None:
        unsupported.append("fallbacks")
    if request.thinking is not None:
        unsupported.append("thinking")
    return ApiError(
        400,
        "thread: the local Messages API does not keep threads; send the full conversation "
        "without `thread`.",
        details={"error_code": "thread_unsupported_request", "unsupported": unsupported},
    )


def _check_signatures(
    request: MessagesRequest, model: ModelInfo, signer: ThinkingSigner, verify_foreign: bool
) -> None:
    """Thinking blocks the model will see must come back as it wrote them (docs:
    extended thinking, "preserving thinking blocks"). Blocks signed elsewhere (the live
    API) are opaque here: taken as they are, unless `verify_foreign`."""
    if not has_thinking(request.messages):
        return
    messages = context_messages(request.messages, model, edits_thinking(request))
    for i, message in enumerate(messages):
        if message.role != "assistant" or isinstance(message.content, str):
            continue
        for j, block in enumerate(message.content):
            if isinstance(block, ThinkingBlock):
                if not verify_foreign and not signer.made_here(block.signature):
                    continue
                if signer.thinking_text(block.thinking, block.signature) is None:
                    raise ApiError(
                        400, f"messages.{i}.content.{j}: Invalid `signature` in `thinking` block"
                    )
            elif isinstance(block, RedactedThinkingBlock):
                if not verify_foreign and not signer.made_here(block.data):
                    continue
                if not signer.redacted_text(block.data):
                    raise ApiError(
                        400,
                        f"messages.{i}.content.{j}: Invalid `data` in `redacted_thinking` block",
                    )


def _with_default_edits(
    decoded: MessagesRequest, beta: bool, betas: frozenset[str], state: LocalAPIState
) -> tuple[MessagesRequest, bool, frozenset[str]]:
    """The state's `context_management` on a request that sends none, with the beta
    headers a client sending it would send."""
    if state.context_management is None or decoded.context_management is not None:
        return decoded, beta, betas
    decoded = msgspec.structs.replace(decoded, context_management=state.context_management)
    return decoded, True, betas | {CONTEXT_BETA, COMPACT_BETA}


def _accept(
    decoded: MessagesRequest,
    version: str,
    beta: bool,
    betas: frozenset[str],
    state: LocalAPIState,
) -> tuple[Prepared, ModelInfo]:
    """The request checked, and what its model reads of it (`_prepare.py`)."""
    if decoded.thread is not None:
        raise _thread_error(decoded)
    parsed, model = validate(decoded, version, beta=beta, models=state.models, betas=betas)
    check_fetched(parsed.messages, state.gone_urls)
    _check_signatures(parsed, model, state.signer, state.verify_foreign_signatures)
    plain = state.token_counts == "plain"

    def count(request: MessagesRequest) -> int:
        return sum(block.tokens for block in prefix_blocks(request, state.models, plain))

    prepared = prepare(
        parsed, model, betas, state.signer, count, new_account=state.account == "new"
    )
    return prepared, model


def count_request_tokens(
    request: MessagesRequest,
    version: str,
    beta: bool,
    signer: ThinkingSigner,
    verify_foreign: bool = False,
    plain: bool = False,
    models: Mapping[str, ModelInfo] = MODELS,
) -> int:
    """What `count_tokens` answers: the request's input tokens as `usage` would add them
    up (docs: token counting, "the same count a Messages request would report")."""
    checked, model = validate(request, version, beta=beta, models=models)
    _check_signatures(checked, model, signer, verify_foreign)
    return sum(block.tokens for block in prefix_blocks(checked, models, plain))


def _compact(
    state: LocalAPIState, prepared: Prepared, blocks: list[PrefixBlock], prompt: int
) -> tuple[Compaction, CacheUsage] | None:
    """The compaction this request makes, and its summary step's usage: that step reads
    the whole request from the cache as the request would, and writes nothing."""
    compaction = plan_compaction(prepared, prompt, state.signer)
    if compaction is None:
        return None
    looked = state.cache.lookup(prepared.request, blocks)
    return compaction, CacheUsage(looked.total, looked.read, 0, 0, blocks, [])


def build_app(state: LocalAPIState) -> Starlette:
    async def messages(request: Request) -> Response:
        arrived = time.perf_counter()  # the simulated time to first token counts from here
        request_id = _new_id("req")
        body = await request.body()
        state.record(
            RecordedRequest(request.url.path, dict(request.headers), body, time.perf_counter())
        )
        state.served += 1
        beta, betas = _is_beta(request), _betas(request)
        plain = state.token_counts == "plain"
        try:
            version = _check_headers(request, state)
            fault = _take_fault(request, state)
            if isinstance(fault, Stall):
                await anyio.sleep(fault.seconds)
                arrived = time.perf_counter()  # a stall comes on top of the model's time
            elif isinstance(fault, StatusFault):
                raise _status_fault(fault)
            decoded = decode_request(body, MessagesRequest)
            decoded, beta, betas = _with_default_edits(decoded, beta, betas, state)
            prepared, model = _accept(decoded, version, beta, betas, state)
            try:
                reply = one_call_at_most(
                    state.responder.respond(prepared.request), prepared.request
                )
            except LookupError as exc:
                raise ApiError(500, str(exc)) from None
        except ApiError as error:
            return _error_response(error, request_id)
        parsed = prepared.request
        blocks = prefix_blocks(parsed, state.models, plain)
        prompt = sum(block.tokens for block in blocks)
        compaction = _compact(state, prepared, blocks, prompt)
        if compaction is not None:
            # The reply continues on the compacted context (system, tools, the block).
            blocks = (
                []
                if compaction[0].pause
                else prefix_blocks(compaction[0].context, state.models, plain)
            )
            prompt = sum(block.tokens for block in blocks)
        if prompt > model.context_window:
            # Docs: context windows ("prompt is too long" when the input alone exceeds it).
            too_long = ApiError(
                400, f"prompt is too long: {prompt} tokens > {model.context_window} maximum"
            )
            return _error_response(too_long, request_id)
        room = model.context_window - prompt
        made = None if compaction is None else compaction[0]
        if made is not None and made.pause:
            planned = Planned([dict(made.block)], "compaction", 0)
        else:
            struct = None if made is None else made.struct
            planned = plan(
                reply, parsed, model, state.signer, room, sent=prepared.sent, compaction=struct
            )
            if made is not None:
                # The compaction block opens the reply (compaction docs).
                planned = dataclasses.replace(planned, blocks=[dict(made.block), *planned.blocks])
        exchange = _Exchange(state, prepared, planned, blocks, compaction, arrived)
        headers = {"request-id": request_id}
        if parsed.stream:
            return StreamingResponse(
                exchange.events(fault),
                media_type="text/event-stream",
                headers={**headers, "cache-control": "no-cache"},
            )
        await exchange.first_token()
        usage, diagnostics = exchange.start()
        body_json = exchange.message(
            planned.blocks,
            exchange.usage_body(usage, planned.output_tokens),
            planned.stop_reason,
            diagnostics,
            planned.stop_sequence,
        )
        return JSONResponse(body_json, headers=headers)

    async def count_tokens(request: Request) -> Response:
        request_id = _new_id("req")
        body = await request.body()
        beta, betas = _is_beta(request), _betas(request)
        plain = state.token_counts == "plain"
        try:
            version = _check_headers(request, state)
            parsed = decode_request(body, CountTokensRequest)
            as_messages = MessagesRequest(
                model=parsed.model,
                max_tokens=_count_max_tokens(parsed.model, state.models),
                messages=parsed.messages,
                system=parsed.system,
                tools=parsed.tools,
                tool_choice=parsed.tool_choice,
                thinking=parsed.thinking,
                cache_control=parsed.cache_control,
                output_config=parsed.output_config,
                speed=parsed.speed,
                billing_policy=parsed.billing_policy,
                compaction=parsed.compaction,
                context_management=parsed.context_management,
                mcp_servers=parsed.mcp_servers,
            )
            # The same checks and clearing edits as a Messages request; existing
            # compaction blocks apply, no new compaction is made (compaction docs,
            # "Token counting").
            prepared, _ = _accept(as_messages, version, beta, betas, state)
        except ApiError as error:
            return _error_response(error, request_id)
        total = sum(block.tokens for block in prefix_blocks(prepared.request, state.models, plain))
        answer: dict[str, Any] = {"input_tokens": total}
        if prepared.applied is not None:
            answer["context_management"] = {"original_input_tokens": prepared.original_tokens}
        return JSONResponse(answer, headers={"request-id": request_id})

    async def list_models(request: Request) -> Response:
        request_id = _new_id("req")
        try:
            _check_headers(request, state)
            page = model_page(
                state.models,
                _page_limit(request.query_params.get("limit", "20")),
                request.query_params.get("after_id"),
                request.query_params.get("before_id"),
                _lifecycles(request),
            )
        except ApiError as error:
            return _error_response(error, request_id)
        return JSONResponse(page, headers={"request-id": request_id})

    async def get_model(request: Request) -> Response:
        request_id = _new_id("req")
        try:
            _check_headers(request, state)
            info = require_model(request.path_params["model_id"], state.models)
        except ApiError as error:
            return _error_response(error, request_id)
        return JSONResponse(model_json(info), headers={"request-id": request_id})

    async def not_found(request: Request, exc: Exception) -> Response:
        return _error_response(ApiError(404, f"Not found: {request.url.path}"), _new_id("req"))

    async def not_allowed(request: Request, exc: Exception) -> Response:
        error = ApiError(405, f"Method {request.method} not allowed on {request.url.path}")
        return _error_response(error, _new_id("req"))

    routes = [
        Route("/v1/messages", messages, methods=["POST"]),
        Route("/v1/messages/count_tokens", count_tokens, methods=["POST"]),
        Route("/v1/models", list_models, methods=["GET"]),
        Route("/v1/models/{model_id:path}", get_model, methods=["GET"]),
    ]
    return Starlette(routes=routes, exception_handlers={404: not_found, 405: not_allowed})
