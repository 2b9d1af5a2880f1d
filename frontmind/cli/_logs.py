"""The daemon's logging: `--log-level`, `--log-format text|json`, timestamps on every
line, and the id of the turn a line was logged for (from `actors.current_turn`)."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Literal

import msgspec

from actors import current_turn

__all__ = ["ACCESS_FIELDS", "LogFormat", "configure_logging"]

LogFormat = Literal["text", "json"]


# The access log's fields (the daemon passes them as `extra`), each a key of its own in
# a JSON line, so a log pipeline filters by user or status without parsing `message`.
ACCESS_FIELDS = ("method", "path", "status", "duration_ms", "user")


class _TurnId(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "turn_id", None) is None:  # the access log names its own
            record.turn_id = current_turn.get() or "-"
        return True


class _Json(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "turn_id": getattr(record, "turn_id", "-"),
        }
        line.update({k: getattr(record, k) for k in ACCESS_FIELDS if hasattr(record, k)})
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return msgspec.json.encode(line).decode()


def configure_logging(level: str = "WARNING", fmt: LogFormat = "text") -> None:
    """Log to stderr at `level`, as text or one JSON object a line."""
    handler = logging.StreamHandler()
    handler.addFilter(_TurnId())
    if fmt == "json":
        handler.setFormatter(_Json())
    else:
        handler.setFormatter(
            logging.Formatter("%(asctime)s %(levelname)s %(name)s [%(turn_id)s] %(message)s")
        )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
