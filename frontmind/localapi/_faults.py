"""Fault injection: per request (a header) or by schedule (a queue on the server).

A request with the header `x-localapi-fault: <JSON>` gets that fault; otherwise the next
scheduled fault, if any, is taken. Latency (time to first token, token rate) is a server
setting so that benchmark figures mean something.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Literal

import msgspec

__all__ = [
    "RATE_LIMIT_RETRY_AFTER",
    "DropConnection",
    "Fault",
    "Latency",
    "MidStreamError",
    "Stall",
    "StatusFault",
    "rate_limit_answer",
]


class StatusFault(msgspec.Struct, frozen=True, tag="status"):
    """Answer with an HTTP error before any streaming (429, 500, 529, ...). A 429 is the
    simulated organization's input-token rate limit, with the headers the docs give it
    (`rate_limit_answer`); `retry_after` None gives it `RATE_LIMIT_RETRY_AFTER`."""

    status: int = 529
    retry_after: float | None = None
    retry_after_ms: int | None = None
    should_retry: bool | None = None


class MidStreamError(msgspec.Struct, frozen=True, tag="midstream_error"):
    """Send `event: error` after `after_events` stream events, then end the stream."""

    after_events: int = 3
    error_type: Literal["overloaded_error", "api_error"] = "overloaded_error"


class DropConnection(msgspec.Struct, frozen=True, tag="drop"):
    """Cut the connection after `after_events` stream events."""

    after_events: int = 3


class Stall(msgspec.Struct, frozen=True, tag="stall"):
    """Wait this long before answering at all."""

    seconds: float = 30.0


Fault = StatusFault | MidStreamError | DropConnection | Stall


class Latency(msgspec.Struct, frozen=True):
    """Simulated model time: to the first event (counted from the request's arrival, the
    server's own work on it included), and per output token."""

    time_to_first_token: float = 0.0
    tokens_per_second: float = 0.0  # 0: as fast as possible


# Docs: rate limits (https://platform.claude.com/docs/en/api/rate-limits). "If you exceed
# any of the rate limits you will get a 429 error describing which rate limit was
# exceeded, along with a retry-after header indicating how long to wait", and the response
# headers: `retry-after` ("The number of seconds to wait until you can retry the request.
# Earlier retries will fail."), and `anthropic-ratelimit-{requests,tokens,input-tokens,
# output-tokens}-{limit,remaining,reset}` (remaining tokens "rounded to the nearest
# thousand", reset "the time when the rate limit will be fully replenished, provided in
# RFC 3339 format"). The `tokens` ones are input and output combined: "Maximum combined
# tokens (input + output) per minute" (the page as Claude Platform on AWS repeats it,
# https://docs.aws.amazon.com/claude-platform/latest/userguide/rate-limits.html), as a
# recorded live answer shows (tidyllm's fixture of api.anthropic.com/v1/messages:
# tokens-limit 96000 = input 80000 + output 16000, its reset the input tokens'). The
# limits are Tier 1's for Claude Sonnet (50 RPM, 30,000 ITPM, 8,000 OTPM); they
# replenish continuously, so an emptied bucket is full again a minute later.
RATE_LIMIT_RETRY_AFTER = 1.0  # seconds; chosen (the docs give no figure)
_REQUESTS_PER_MINUTE = 50
_INPUT_TOKENS_PER_MINUTE = 30_000
_OUTPUT_TOKENS_PER_MINUTE = 8_000
_ORGANIZATION = "00000000-0000-4000-8000-000000000000"  # the simulated organization


def _rfc3339(moment: datetime) -> str:
    """The live headers' form, to the second in UTC ("2025-08-21T12:40:59Z")."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def rate_limit_answer(retry_after: float | None, now: datetime) -> tuple[str, dict[str, str]]:
    """A 429's message and headers: this request would pass the input-token limit, whose
    bucket is empty; one request of the 50 is spent; the output tokens are untouched."""
    wait = RATE_LIMIT_RETRY_AFTER if retry_after is None else retry_after
    emptied = now + timedelta(seconds=max(60.0, wait))
    buckets = {
        "requests": (
            _REQUESTS_PER_MINUTE,
            _REQUESTS_PER_MINUTE - 1,
            now + timedelta(seconds=60 / _REQUESTS_PER_MINUTE),
        ),
        "input-tokens": (_INPUT_TOKENS_PER_MINUTE, 0, emptied),
        "output-tokens": (_OUTPUT_TOKENS_PER_MINUTE, _OUTPUT_TOKENS_PER_MINUTE, now),
    }
    (in_limit, in_left, in_reset), (out_limit, out_left, _) = (
        buckets["input-tokens"],
        buckets["output-tokens"],
    )
    buckets["tokens"] = (in_limit + out_limit, in_left + out_left, in_reset)
    headers = {"retry-after": f"{wait:g}"}
    for name, (limit, remaining, reset) in buckets.items():
        headers[f"anthropic-ratelimit-{name}-limit"] = str(limit)
        headers[f"anthropic-ratelimit-{name}-remaining"] = str(remaining)
        headers[f"anthropic-ratelimit-{name}-reset"] = _rfc3339(reset)
    # The live API's message, as public reports quote it (continuedev/continue#9623).
    message = (
        f"This request would exceed the rate limit for your organization ({_ORGANIZATION}) "
        f"of {_INPUT_TOKENS_PER_MINUTE:,} input tokens per minute. For details, refer to: "
        "https://docs.claude.com/en/api/rate-limits. You can see the response headers for "
        "current usage. Please reduce the prompt length or the maximum tokens requested, or "
        "try again later. You may also contact sales at https://www.anthropic.com/contact-sales "
        "to discuss your options for a rate limit increase."
    )
    return message, headers
