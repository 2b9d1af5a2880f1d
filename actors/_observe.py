"""Observability hooks: the turn being run (for the logs) and OpenTelemetry spans.

`current_turn` is a context variable set where a turn runs; the daemon's log formatter
reads it, so every line logged for a turn names it.

Spans: one per turn, with children for compose, each trinket, each model call and each
tool. They come from the OpenTelemetry API's global tracer (the API is a dependency of
the anthropic SDK too), which makes non-recording no-op spans until an SDK tracer
provider is installed: the `otel` extra brings the SDK, the application sets it up.
Actors hand a turn across tasks, so no span is made "current": a child finds its parent
through the turn id, and no span is ever detached from a context it was not attached in
(spans here stay open across `yield`s).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Span, Status, StatusCode

from storage import TurnUsage

__all__ = ["current_turn", "failed", "record_span", "span", "turn_span", "usage_attributes"]

current_turn: ContextVar[str | None] = ContextVar("frontmind_turn", default=None)
_turns: dict[str, Span] = {}  # turn id -> the turn's open span


def _start(name: str, turn_id: str | None, start: int | None, attrs: dict[str, Any]) -> Span:
    parent = _turns.get(turn_id) if turn_id else None
    context = trace.set_span_in_context(parent) if parent is not None else None
    if turn_id:
        attrs["frontmind.turn_id"] = turn_id
    return trace.get_tracer("frontmind").start_span(
        name, context=context, attributes=attrs, start_time=start
    )


@contextmanager
def span(name: str, turn_id: str | None = None, **attrs: Any) -> Iterator[Span]:
    """A child span of the turn `turn_id` around the block (which may add attributes to
    it); an error marks it failed."""
    opened = _start(name, turn_id, None, attrs)
    try:
        yield opened
    except Exception as exc:
        opened.record_exception(exc)
        opened.set_status(Status(StatusCode.ERROR, str(exc)))
        raise
    finally:
        opened.end()


def failed(opened: Span, message: str) -> None:
    """Mark a span failed that raised nothing (a tool's error result, its timeout)."""
    opened.set_status(Status(StatusCode.ERROR, message[:200]))


@contextmanager
def turn_span(turn_id: str, continuum_id: str) -> Iterator[Callable[[str], None]]:
    """The turn's span, which the spans of its parts find by the turn id. It yields a
    function that marks the turn failed (a turn reports failure as an event)."""
    opened = _start("frontmind.turn", None, None, {"frontmind.continuum_id": continuum_id})
    opened.set_attribute("frontmind.turn_id", turn_id)
    _turns[turn_id] = opened

    def failed(message: str) -> None:
        opened.set_status(Status(StatusCode.ERROR, message))

    try:
        yield failed
    except Exception as exc:
        opened.record_exception(exc)
        opened.set_status(Status(StatusCode.ERROR, str(exc)))
        raise
    finally:
        del _turns[turn_id]
        opened.end()


def record_span(
    name: str, turn_id: str, start_ns: int, end_ns: int, *, failed: bool, **attrs: Any
) -> None:
    """A span already over (a trinket's reply, timed by the gather that awaited it)."""
    opened = _start(name, turn_id, start_ns, attrs)
    if failed:
        opened.set_status(Status(StatusCode.ERROR))
    opened.end(end_time=end_ns)


def usage_attributes(usage: TurnUsage) -> dict[str, int]:
    """A model call's token counts as span attributes: OpenTelemetry's GenAI names, where
    `gen_ai.usage.input_tokens` counts all input, cache reads and writes included, and
    the Messages API's own split beside them."""
    return {
        "gen_ai.usage.input_tokens": usage.total_input,
        "gen_ai.usage.output_tokens": usage.output_tokens,
        "gen_ai.usage.cache_read.input_tokens": usage.cache_read_input_tokens,
        "gen_ai.usage.cache_creation.input_tokens": usage.cache_creation_input_tokens,
        "frontmind.uncached_input_tokens": usage.input_tokens,
        "frontmind.cache_creation_5m_input_tokens": usage.cache_creation_5m,
        "frontmind.cache_creation_1h_input_tokens": usage.cache_creation_1h,
    }
