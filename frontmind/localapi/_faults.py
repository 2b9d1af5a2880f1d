"""Fault injection: per request (a header) or by schedule (a queue on the server).

A request with the header `x-localapi-fault: <JSON>` gets that fault; otherwise the next
scheduled fault, if any, is taken. Latency (time to first token, token rate) is a server
setting so that benchmark figures mean something.
"""

from __future__ import annotations

from typing import Literal

import msgspec

__all__ = ["DropConnection", "Fault", "Latency", "MidStreamError", "Stall", "StatusFault"]


class StatusFault(msgspec.Struct, frozen=True, tag="status"):
    """Answer with an HTTP error before any streaming (429, 500, 529, ...)."""

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
