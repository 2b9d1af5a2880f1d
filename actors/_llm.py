"""The adapter to the official `anthropic` SDK: streams one call, translates its errors.

Everything the SDK raises leaves here as a `ModelError` subclass with the cause chained,
named by what the user can do about it.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any, Protocol

import anthropic
import httpx2
import msgspec
from anthropic.lib.streaming import AsyncMessageStreamManager

from storage import ContentBlock, TextBlock, ToolUseBlock, TurnUsage

from ._exceptions import (
    ModelError,
    ModelOverloaded,
    ModelRejected,
    ModelStreamError,
    ModelUnavailable,
)
from ._layout import ModelRequest

__all__ = ["AnthropicModel", "ModelClient", "ModelEvent", "StreamDone", "StreamText"]

_ENCODER = msgspec.json.Encoder()


class StreamText(msgspec.Struct, frozen=True):
    text: str


class StreamDone(msgspec.Struct, frozen=True):
    message_id: str
    stop_reason: str | None
    usage: TurnUsage
    cache_miss_reason: str | None
    content: tuple[ContentBlock, ...]


ModelEvent = StreamText | StreamDone


class ModelClient(Protocol):
    def stream(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]: ...

    async def aclose(self) -> None: ...


def _usage(message: Any) -> TurnUsage:
    u = message.usage
    split = u.cache_creation
    return TurnUsage(
        input_tokens=u.input_tokens,
        cache_creation_input_tokens=u.cache_creation_input_tokens or 0,
        cache_read_input_tokens=u.cache_read_input_tokens or 0,
        output_tokens=u.output_tokens,
        cache_creation_5m=split.ephemeral_5m_input_tokens if split else 0,
        cache_creation_1h=split.ephemeral_1h_input_tokens if split else 0,
    )


def _content(message: Any) -> tuple[ContentBlock, ...]:
    blocks: list[ContentBlock] = []
    for block in message.content:
        if block.type == "text":
            # The API can emit empty text blocks, and rejects them on replay.
            if block.text.strip():
                blocks.append(TextBlock(block.text))
        elif block.type == "tool_use":
            blocks.append(
                ToolUseBlock(block.id, block.name, msgspec.json.encode(block.input).decode())
            )
    return tuple(blocks)


def _miss_reason(message: Any) -> str | None:
    diagnostics = getattr(message, "diagnostics", None)
    reason = getattr(diagnostics, "cache_miss_reason", None)
    return None if reason is None else str(reason.type)


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
        self._client = anthropic.AsyncAnthropic(
            api_key=api_key, base_url=base_url, max_retries=max_retries, timeout=timeout
        )
        self.base_url = str(self._client.base_url)

    async def aclose(self) -> None:
        await self._client.close()

    def _translate(self, exc: Exception, *, started: bool) -> ModelError:
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
        if isinstance(exc, anthropic.RateLimitError | anthropic.InternalServerError):
            return ModelOverloaded(f"{where} is overloaded or rate limited: {exc}")
        if isinstance(exc, anthropic.APIStatusError) and exc.status_code >= 500:
            return ModelOverloaded(f"{where} failed: {exc}")
        return ModelRejected(f"{where} rejected the request: {exc}")

    def _open(self, request: ModelRequest) -> AsyncMessageStreamManager[Any]:
        """`messages.stream` for a body already encoded: the request leaves as bytes.

        `messages.stream(**params)` would need the whole history as dicts (a second copy,
        alive for the whole stream) which the SDK then serializes again (a third, and a
        young-generation collection's worth of garbage per turn). The SDK's own `post`
        takes `content` bytes and the same stream class `messages.stream` uses.
        """
        encoded = _ENCODER.encode(request)
        body = b"".join((memoryview(encoded)[:-1], b',"stream":true}'))
        del encoded  # only `body` lives on, for the SDK's retries
        api_request = self._client.post(
            "/v1/messages",
            content=body,
            options={"headers": {"content-type": "application/json"}},
            cast_to=anthropic.types.Message,
            stream=True,
            stream_cls=anthropic.AsyncStream[anthropic.types.RawMessageStreamEvent],
        )
        return AsyncMessageStreamManager(api_request)

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]:
        started = False
        try:
            async with self._open(request) as stream:
                started = True
                async for event in stream:
                    if event.type == "text" and event.text:
                        yield StreamText(event.text)
                final = await stream.get_final_message()
        except (anthropic.APIError, httpx2.HTTPError) as exc:
            raise self._translate(exc, started=started) from exc
        yield StreamDone(
            message_id=final.id,
            stop_reason=final.stop_reason,
            usage=_usage(final),
            cache_miss_reason=_miss_reason(final),
            content=_content(final),
        )
