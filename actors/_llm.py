"""The adapter to the official `anthropic` SDK: streams one call, translates its errors.

Everything the SDK raises leaves here as a `ModelError` subclass with the cause chained,
named by what the user can do about it.
"""

from __future__ import annotations

import math
from collections.abc import AsyncGenerator, Mapping
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit, urlunsplit

import httpx2
import msgspec

from storage import ContentBlock, RawBlock, TextBlock, ToolUseBlock, TurnUsage

from ._catalog import ModelFacts
from ._exceptions import (
    ModelError,
    ModelOverloaded,
    ModelRejected,
    ModelStreamError,
    ModelStreamOverloaded,
    ModelUnavailable,
)
from ._layout import ModelRequest

if TYPE_CHECKING:
    # Imported where it is used, not here: loading the SDK takes seconds of CPU, and a
    # process that never calls the model (the `frontmind` command's `users`, `stats`,
    # `--version`; anything importing `actors` for its types) should not pay for it.
    import anthropic

__all__ = [
    "AnthropicModel",
    "ModelClient",
    "ModelEvent",
    "SSEDecoder",
    "StreamDone",
    "StreamStarted",
    "StreamText",
    "StreamThinking",
]


class StreamText(msgspec.Struct, frozen=True):
    text: str


class StreamThinking(msgspec.Struct, frozen=True):
    """Thinking text as it streams; `redacted`: a redacted_thinking block began (its
    data is not shown)."""

    text: str
    redacted: bool = False


class StreamStarted(msgspec.Struct, frozen=True):
    """The call's message_start: its usage so far (the input and cache writes, already
    billed), which a stream that breaks before StreamDone must still be counted by."""

    usage: TurnUsage


class StreamDone(msgspec.Struct, frozen=True):
    message_id: str
    stop_reason: str | None
    usage: TurnUsage
    cache_miss_reason: str | None
    content: tuple[ContentBlock, ...]
    stop_sequence: str | None = None
    dropped: int = 0  # blocks cut off unfinished (a truncated tool_use or thinking block)


ModelEvent = StreamStarted | StreamText | StreamThinking | StreamDone


class ModelClient(Protocol):
    def stream(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]: ...

    async def aclose(self) -> None: ...


# -- stream assembly ----------------------------------------------------------------------
#
# The reply is assembled from the server-sent events themselves rather than from the
# SDK's parsed message: a block Frontmind does not interpret keeps the exact JSON the API
# sent (its keys in their order, its values untouched), and only what streamed in as
# deltas (thinking text, the signature, a tool input's JSON) is filled in.


class _ServerToolUse(msgspec.Struct):
    web_search_requests: int = 0
    web_fetch_requests: int = 0


class _Usage(msgspec.Struct):
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_creation_input_tokens: int | None = None
    cache_read_input_tokens: int | None = None
    cache_creation: dict[str, int] | None = None
    server_tool_use: _ServerToolUse | None = None


class _MissReason(msgspec.Struct):
    type: str


class _Diagnostics(msgspec.Struct):
    cache_miss_reason: _MissReason | None = None


class _Message(msgspec.Struct):
    id: str
    usage: _Usage = msgspec.field(default_factory=_Usage)
    diagnostics: _Diagnostics | None = None


_ABSENT = msgspec.Raw(b"")  # msgspec takes no `Raw | None`: an empty Raw means absent


class _Delta(msgspec.Struct):
    type: str = ""
    text: str = ""
    partial_json: str = ""
    thinking: str = ""
    signature: str = ""
    citation: msgspec.Raw = _ABSENT
    content: str | None = None  # compaction_delta: the whole summary
    encrypted_content: str | None = None
    stop_reason: str | None = None
    stop_sequence: str | None = None


class _Error(msgspec.Struct):
    type: str = "api_error"
    message: str = ""


class _Event(msgspec.Struct):
    type: str
    index: int = -1
    message: _Message | None = None
    content_block: msgspec.Raw = _ABSENT
    delta: _Delta | None = None
    usage: _Usage | None = None
    error: _Error | None = None


# The wait a stream broken by `overloaded_error` says to retry after. Anthropic's errors
# page (platform.claude.com/docs/en/api/errors) gives 529 `overloaded_error`, "The API is
# temporarily overloaded", and says that in a stream an error can come after the 200,
# outside the status and headers of the usual answer: no `retry-after` comes with it
# (the 200's headers went out before the overload met the call). The SDK has none to
# give either: it never retries a started stream, and its error for the event carries
# that 200. So the wait is the SDK's own for an overloaded answer that names none: its
# backoff, 0.5 s doubling per retry (anthropic's INITIAL_RETRY_DELAY, capped at
# MAX_RETRY_DELAY, 8 s), at the try the caller's retry is: after the broken call and the
# turn's own retry of a stream broken before any text, the third, 2 s. With no wait, a
# client retries at once, into the overload.
OVERLOADED_STREAM_WAIT_S = 2.0

_event_decoder = msgspec.json.Decoder(_Event)
_block_decoder = msgspec.json.Decoder(dict[str, Any])
_json_encoder = msgspec.json.Encoder()


class _Block:
    """One content block while it streams in."""

    __slots__ = ("citations", "fields", "parts", "raw", "signature", "streamed")

    def __init__(self, raw: bytes) -> None:
        self.raw = raw
        self.fields: dict[str, Any] = _block_decoder.decode(raw)
        self.parts: list[str] = []  # text, thinking or a tool input's JSON, as streamed
        self.signature: str | None = None
        self.citations: list[msgspec.Raw] = []
        self.streamed = False

    def add(self, delta: _Delta) -> StreamText | StreamThinking | None:
        """Apply one delta; returns what to show the caller, if anything."""
        self.streamed = True
        if delta.type == "text_delta":
            self.parts.append(delta.text)
            return StreamText(delta.text) if delta.text else None
        if delta.type == "input_json_delta":
            self.parts.append(delta.partial_json)
        elif delta.type == "thinking_delta":
            self.parts.append(delta.thinking)
            return StreamThinking(delta.thinking) if delta.thinking else None
        elif delta.type == "signature_delta":
            self.signature = (self.signature or "") + delta.signature
        elif delta.type == "citations_delta" and delta.citation:
            self.citations.append(delta.citation)
        elif delta.type == "compaction_delta":
            # One delta carries the whole summary (compaction docs, "Streaming"); the
            # block goes back as it came.
            self.fields["content"] = delta.content
            self.fields["encrypted_content"] = delta.encrypted_content
        return None

    def finish(self) -> ContentBlock | None:
        """The finished block; None for an empty text block or one cut off unfinished."""
        kind = str(self.fields.get("type", ""))
        joined = "".join(self.parts)
        if kind == "text" and not self.citations and not self.fields.get("citations"):
            text = str(self.fields.get("text", "")) + joined
            # The API can emit empty text blocks, and rejects them on replay.
            return TextBlock(text) if text.strip() else None
        if kind == "tool_use":
            input_json = joined or _json_encoder.encode(self.fields.get("input", {})).decode()
            try:
                msgspec.json.decode(input_json)
            except msgspec.DecodeError:
                return None  # cut off by max_tokens: never replayed broken
            return ToolUseBlock(str(self.fields["id"]), str(self.fields["name"]), input_json)
        if not self.streamed:
            return RawBlock(kind, self.raw.decode())
        fields = self.fields
        if kind == "thinking":
            fields["thinking"] = str(fields.get("thinking", "")) + joined
            if self.signature is not None:
                fields["signature"] = str(fields.get("signature", "")) + self.signature
            if not fields.get("signature"):
                return None  # unsigned: cut off, and the API would refuse it back
        elif kind == "text":
            fields["text"] = str(fields.get("text", "")) + joined
            if self.citations:
                fields["citations"] = [*(fields.get("citations") or []), *self.citations]
        elif joined:
            try:
                msgspec.json.decode(joined)
            except msgspec.DecodeError:
                return None
            fields["input"] = msgspec.Raw(joined.encode())
        return RawBlock(kind, _json_encoder.encode(fields).decode())


def _usage(start: _Usage, final: _Usage | None) -> TurnUsage:
    u = start
    if final is not None:
        # message_delta's usage is cumulative; it overrides whatever it carries.
        u = _Usage(
            *(
                b if b is not None else a
                for a, b in zip(
                    msgspec.structs.astuple(start), msgspec.structs.astuple(final), strict=True
                )
            )
        )
    split = u.cache_creation or {}
    servers = u.server_tool_use or _ServerToolUse()
    return TurnUsage(
        input_tokens=u.input_tokens or 0,
        cache_creation_input_tokens=u.cache_creation_input_tokens or 0,
        cache_read_input_tokens=u.cache_read_input_tokens or 0,
        output_tokens=u.output_tokens or 0,
        cache_creation_5m=split.get("ephemeral_5m_input_tokens", 0),
        cache_creation_1h=split.get("ephemeral_1h_input_tokens", 0),
        web_search_requests=servers.web_search_requests,
        web_fetch_requests=servers.web_fetch_requests,
    )


class _Assembly:
    """Folds the events of one stream into its StreamDone."""

    def __init__(self) -> None:
        self.message: _Message | None = None
        self.blocks: dict[int, _Block] = {}
        self.finished: dict[int, ContentBlock | None] = {}
        self.final_usage: _Usage | None = None
        self.stop_reason: str | None = None
        self.stop_sequence: str | None = None
        self.dropped = 0
        self.stopped = False

    def _close(self, index: int, block: _Block, *, cut: bool = False) -> None:
        result = None if cut else block.finish()
        if result is None and block.fields.get("type") != "text":
            self.dropped += 1  # an empty text block is not a loss; anything else is
        self.finished[index] = result

    def feed(self, event: _Event) -> StreamStarted | StreamText | StreamThinking | None:
        if event.type == "message_start" and event.message is not None:
            self.message = event.message
            return StreamStarted(_usage(event.message.usage, None))
        if event.type == "content_block_start" and event.content_block:
            opened = self.blocks[event.index] = _Block(bytes(event.content_block))
            if opened.fields.get("type") == "redacted_thinking":
                return StreamThinking("", redacted=True)  # announced, its data never shown
        elif event.type == "content_block_delta" and event.delta is not None:
            block = self.blocks.get(event.index)
            if block is not None:
                return block.add(event.delta)
        elif event.type == "content_block_stop":
            block = self.blocks.pop(event.index, None)
            if block is not None:
                self._close(event.index, block)
        elif event.type == "message_delta":
            if event.delta is not None:
                self.stop_reason = event.delta.stop_reason
                self.stop_sequence = event.delta.stop_sequence
            self.final_usage = event.usage
        elif event.type == "message_stop":
            self.stopped = True
        elif event.type == "error":
            error = event.error or _Error()
            said = f"the stream broke: {error.type}: {error.message}"
            if error.type == "overloaded_error":
                raise ModelStreamOverloaded(said, retry_after=OVERLOADED_STREAM_WAIT_S)
            raise ModelStreamError(said)
        return None

    def done(self) -> StreamDone:
        if self.message is None or not self.stopped:
            raise ModelStreamError("the stream ended before message_stop")
        # A block still open when the stream ended was cut off.
        for index, block in self.blocks.items():
            self._close(index, block, cut=True)
        ordered = (self.finished[i] for i in sorted(self.finished))
        content = tuple(b for b in ordered if b is not None)
        diagnostics = self.message.diagnostics
        reason = diagnostics.cache_miss_reason if diagnostics is not None else None
        return StreamDone(
            message_id=self.message.id,
            stop_reason=self.stop_reason,
            usage=_usage(self.message.usage, self.final_usage),
            cache_miss_reason=None if reason is None else reason.type,
            content=content,
            stop_sequence=self.stop_sequence,
            dropped=self.dropped,
        )


def _supported(capability: Any) -> bool:
    return bool(getattr(capability, "supported", False))


def _known(capability: Any) -> bool | None:
    """A capability's `supported`, or None when the answer lacks the key."""
    return None if capability is None else _supported(capability)


def _server_tools(caps: Any) -> dict[str, bool] | None:
    """capabilities.server_tools, per tool (web_search, code_execution; web fetch has no
    key): a tool is supported only where the whole capability is."""
    tools = getattr(caps, "server_tools", None)
    if tools is None:
        return None
    found = {}
    for family in ("web_search", "code_execution"):
        each = _known(getattr(tools, family, None))
        if each is not None:
            found[family] = each and bool(getattr(tools, "supported", True))
    return found


def _facts(info: anthropic.types.ModelInfo) -> ModelFacts:
    """The Models API's answer as Frontmind keeps it (its `capabilities` read key by key:
    a key the answer lacks says nothing, and the data's fact stands)."""
    caps = info.capabilities
    if caps is None:
        return ModelFacts(
            id=info.id, max_input_tokens=info.max_input_tokens, max_tokens=info.max_tokens
        )
    types = caps.thinking.types
    thinking = frozenset(
        kind
        for kind in ("adaptive", "enabled", "disabled", "between_tools")
        if _supported(getattr(types, kind, None))
    )
    effort = caps.effort
    efforts = frozenset(
        level
        for level in ("low", "medium", "high", "xhigh", "max")
        if effort.supported and _supported(getattr(effort, level, None))
    )
    manage = caps.context_management
    strategies = frozenset(
        name
        for name in ("clear_tool_uses_20250919", "clear_thinking_20251015", "compact_20260112")
        if manage.supported and _supported(getattr(manage, name, None))
    )
    return msgspec.convert(
        {
            "id": info.id,
            "max_input_tokens": info.max_input_tokens,
            "max_tokens": info.max_tokens,
            "thinking_types": thinking,
            "effort_levels": efforts,
            "context_management": strategies,
            "image_input": _supported(caps.image_input),
            "pdf_input": _supported(caps.pdf_input),
            "server_tools": _server_tools(caps),
            "code_calls_tools": _known(getattr(caps, "code_execution", None)),
        },
        ModelFacts,
    )


class SSEDecoder:
    """Server-sent events from a byte stream: (event name, data) per event.

    Lines end at CR, LF or CR LF and nowhere else (the SSE grammar, WHATWG HTML
    "Server-sent events", 9.2.6): a JSON string in a `data:` line may hold U+2028,
    U+2029 or U+0085 raw, which `str.splitlines` (and so `iter_lines()`) would cut.
    Working on bytes, no line is ever decoded to text: the data goes to the JSON
    decoder as it came.
    """

    __slots__ = ("_buffer", "_cr", "_data", "_name")

    def __init__(self) -> None:
        self._buffer = b""  # an unfinished line (holds no CR or LF)
        self._cr = False  # the last chunk ended in CR: a LF opening the next is its pair
        self._name = b""
        self._data: list[bytes] = []

    def feed(self, chunk: bytes) -> list[tuple[str, bytes]]:
        if self._cr and chunk[:1] == b"\n":
            chunk = chunk[1:]
        self._cr = chunk[-1:] == b"\r"
        if b"\r" in chunk:
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        lines = (self._buffer + chunk).split(b"\n")
        self._buffer = lines.pop()
        events: list[tuple[str, bytes]] = []
        for line in lines:
            if not line:
                if self._data:
                    events.append((self._name.decode(), b"\n".join(self._data)))
                self._name, self._data = b"", []
                continue
            field, colon, value = line.partition(b":")
            if not colon:
                value = b""  # a line with no colon is a field with an empty value
            elif value[:1] == b" ":
                value = value[1:]
            if field == b"data":
                self._data.append(value)
            elif field == b"event":
                self._name = value
            # ":" comments, `id:` and `retry:` are not used by the Messages API's stream.
        return events


def shown_url(url: str) -> str:
    """`url` as an error may show it: scheme, host, port and path; no userinfo, query
    or fragment."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        return "the configured URL"
    if ":" in host:
        host = f"[{host}]"
    netloc = host if port is None else f"{host}:{port}"
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    """The seconds an HTTP answer says to wait (the API's 429/529, the daemon's 429/503):
    `retry-after-ms`, else `retry-after` in seconds (RFC 9110 §10.2.3; its HTTP-date
    form, which neither sends, is left out), bounded to a day; None when it says nothing
    usable."""
    for name, unit in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        try:
            seconds = float(headers.get(name, "")) / unit
        except ValueError:
            continue
        if math.isfinite(seconds) and seconds >= 0:
            return min(seconds, 86_400.0)
    return None


class AnthropicModel:
    """Streams requests through `AsyncAnthropic`. The SDK retries 408/409/429/5xx itself."""

    def __init__(
        self, *, api_key: str | None, base_url: str | None, max_retries: int, timeout: float
    ) -> None:
        if not api_key:
            raise ModelUnavailable(
                "no API key: set ANTHROPIC_API_KEY (and ANTHROPIC_BASE_URL for another "
                "endpoint), or run offline with --offline"
            )
        import anthropic

        self._client = anthropic.AsyncAnthropic(
            api_key=api_key, base_url=base_url, max_retries=max_retries, timeout=timeout
        )
        # Named in errors, which every user of a daemon gets: the address, never the
        # credentials a gateway's URL may hold (`user:password@`, a `?key=`).
        self.base_url = shown_url(str(self._client.base_url))

    async def aclose(self) -> None:
        await self._client.close()

    def _translate(self, exc: Exception, *, started: bool) -> ModelError:
        import anthropic

        where = f"the Messages API at {self.base_url}"
        if isinstance(exc, anthropic.AuthenticationError | anthropic.PermissionDeniedError):
            return ModelUnavailable(f"{where} refused the API key: check ANTHROPIC_API_KEY")
        if started:
            return ModelStreamError(f"the stream from {where} broke: {exc}")
        if isinstance(exc, anthropic.APITimeoutError):
            return ModelUnavailable(f"{where} did not answer in time (set ANTHROPIC_BASE_URL?)")
        if isinstance(exc, anthropic.APIConnectionError | httpx2.HTTPError):
            return ModelUnavailable(
                f"cannot reach {where}: set ANTHROPIC_BASE_URL, or run offline with --offline"
            )
        status = exc.status_code if isinstance(exc, anthropic.APIStatusError) else None
        wait = (
            retry_after_seconds(exc.response.headers)
            if isinstance(exc, anthropic.APIStatusError)
            else None
        )
        if isinstance(exc, anthropic.RateLimitError) or status == 529:
            return ModelOverloaded(
                f"{where} is overloaded or rate limited: {exc}", retry_after=wait
            )
        if status is not None and status >= 500:  # its own failure: worth another try too
            return ModelOverloaded(f"{where} failed ({status}): {exc}", retry_after=wait)
        return ModelRejected(f"{where} rejected the request: {exc}")

    async def _open(self, request: ModelRequest) -> httpx2.Response:
        """POST the request as the bytes of one encoding and return the streaming HTTP
        response, unread (the SDK's retries and status errors apply before it returns).

        `messages.create(**params)` would need the whole history as dicts (a second
        copy, alive for the whole stream) which the SDK then serializes again (a third,
        and a young collection's worth of garbage per turn). The SDK's public `post`
        takes `content` bytes, and `cast_to=httpx2.Response` hands back the response
        itself ("Making custom/undocumented requests" in the SDK's README): its bytes are
        read by `SSEDecoder`, so every block keeps the exact JSON the API sent.
        """
        encoded = _json_encoder.encode(request)
        body = b"".join((memoryview(encoded)[:-1], b',"stream":true}'))
        del encoded  # only `body` lives on, for the SDK's retries
        response: httpx2.Response = await self._client.post(
            "/v1/messages",
            cast_to=httpx2.Response,
            content=body,
            options={"headers": {"content-type": "application/json"}},
            stream=True,
            stream_cls=None,
        )
        return response

    async def model_facts(self, name: str) -> ModelFacts | None:
        """What `GET /v1/models/{id}` says of a model (the SDK's `models.retrieve`);
        None when the API answers 404 (unknown or retired for this key)."""
        import anthropic

        try:
            info = await self._client.models.retrieve(name)
        except anthropic.NotFoundError:
            return None
        except (anthropic.APIError, httpx2.HTTPError) as exc:
            raise self._translate(exc, started=False) from exc
        return _facts(info)

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]:
        import anthropic

        assembly = _Assembly()
        started = False
        try:
            response = await self._open(request)
            started = True
            try:
                decoder = SSEDecoder()
                async for chunk in response.aiter_bytes():
                    for name, data in decoder.feed(chunk):
                        if name == "ping":
                            continue
                        try:
                            event = _event_decoder.decode(data)
                        except msgspec.DecodeError as exc:
                            raise ModelStreamError(f"a malformed stream event: {exc}") from exc
                        shown = assembly.feed(event)
                        if shown is not None:
                            yield shown
            finally:
                await response.aclose()
        except (anthropic.APIError, httpx2.HTTPError) as exc:
            raise self._translate(exc, started=started) from exc
        yield assembly.done()
