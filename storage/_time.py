"""Times between the database and the records: epoch floats inside, `datetime` outside.

The databases keep every instant as epoch seconds (UTC) in a float column: compact,
ordered, and what the kernel computes with (leases, TTLs, backoff). Every record handed
out carries an aware UTC `datetime` instead, at the microsecond (`moment`), so the
library, the daemon's client and the wire (RFC 3339) all speak the same type.

A float read back through a `datetime` is the float stored only when that float was a
whole microsecond to begin with: `exact` rounds the instants the store compares for
equality later (a claim is checked by its `claimed_at`), and a record's own times are
`datetime`s already, so the floats written from them (`epoch`) always are.
"""

from __future__ import annotations

import functools
import typing
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Annotated, Any, TypeVar

import msgspec

__all__ = [
    "EPOCH",
    "Instant",
    "epoch",
    "epoch_or_none",
    "exact",
    "from_row",
    "moment",
    "moment_or_none",
    "stored_fields",
]

# A record's time: a `datetime` that must carry its offset (always UTC when Frontmind
# makes one), an RFC 3339 "date-time" in the JSON schema.
Instant = Annotated[datetime, msgspec.Meta(tz=True)]
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)  # the "not set" time (a message not yet stored)

R = TypeVar("R", bound=msgspec.Struct)


_FIRST, _LAST = datetime.min.replace(tzinfo=UTC), datetime.max.replace(tzinfo=UTC)


def moment(seconds: float) -> datetime:
    """The stored instant `seconds` as an aware UTC datetime (to the microsecond).

    Every instant written is checked to lie from 1900 up to 9000 (`check_instant`); one
    stored before that check, past what a `datetime` holds, reads as the first or last
    instant one can, so that its row can still be listed, completed and deleted."""
    try:
        return datetime.fromtimestamp(seconds, UTC)
    except (OverflowError, ValueError, OSError):
        return _LAST if seconds > 0 else _FIRST


def moment_or_none(seconds: float | None) -> datetime | None:
    return None if seconds is None else moment(seconds)


def epoch(when: datetime) -> float:
    """A record's time as the float the database keeps."""
    return when.timestamp()


def epoch_or_none(when: datetime | None) -> float | None:
    return None if when is None else epoch(when)


def exact(seconds: float) -> float:
    """`seconds` at the microsecond: the float a `datetime` of it gives back exactly
    (both roundings are correctly rounded, so `epoch(moment(exact(x))) == exact(x)`)."""
    return round(seconds, 6)


def stored_fields(record: msgspec.Struct) -> dict[str, Any]:
    """A record's fields as its stored JSON holds them: its own times as epoch floats,
    the form every release has written, so that the release before this one reads a
    database this one wrote. (A turn record and a passage hold no nested times.)"""
    fields = msgspec.to_builtins(record, builtin_types=(datetime,))
    return {k: v.timestamp() if isinstance(v, datetime) else v for k, v in fields.items()}


@functools.cache
def _time_slots(cls: type[msgspec.Struct]) -> tuple[int, ...]:
    """Which of a record's fields (by position) are times."""
    hints = typing.get_type_hints(cls)
    times = (datetime, datetime | None)
    return tuple(i for i, name in enumerate(cls.__struct_fields__) if hints[name] in times)


def from_row(cls: type[R], row: Sequence[Any]) -> R:
    """The record `cls` of a row whose columns are its fields in order (a prefix of
    them), the stored floats of its time fields read as `datetime`s."""
    values = list(row)
    for slot in _time_slots(cls):
        if slot < len(values) and values[slot] is not None:
            values[slot] = moment(values[slot])
    return cls(*values)
