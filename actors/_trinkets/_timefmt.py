"""Human time phrases: "in 40 minutes", "2 days ago", day labels in the user's zone."""

from __future__ import annotations

from datetime import date, datetime
from zoneinfo import ZoneInfo

__all__ = ["day_label", "local", "relative", "seconds"]


def seconds(when: datetime | float) -> float:
    """A record's time (a `datetime`) or a turn's (`Turn.now`, epoch seconds) as epoch
    seconds."""
    return when.timestamp() if isinstance(when, datetime) else when


def local(when: datetime | float, tz: str) -> datetime:
    return datetime.fromtimestamp(seconds(when), ZoneInfo(tz))


def relative(target: datetime | float, now: datetime | float) -> str:
    delta = seconds(target) - seconds(now)
    # To the second first: a time stored at the microsecond, "in 10 minutes" from a
    # float clock, is 599.9999995 s away and would read "in 9 minutes".
    apart = round(abs(delta))
    if apart < 60:
        return "now"
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if apart >= size:
            count = int(apart // size)
            phrase = f"{count} {unit}{'s' if count != 1 else ''}"
            return f"in {phrase}" if delta > 0 else f"{phrase} ago"
    raise AssertionError("unreachable")  # pragma: no cover


def day_label(day: date, today: date) -> str:
    gap = (today - day).days
    if gap == 0:
        return "Today"
    if gap == 1:
        return "Yesterday"
    return f"{day.strftime('%A')}, {day.day} {day.strftime('%B %Y')}"
