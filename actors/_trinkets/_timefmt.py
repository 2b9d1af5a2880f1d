"""Human time phrases: "in 40 minutes", "2 days ago", day labels in the user's zone."""

from __future__ import annotations

from datetime import date, datetime
from zoneinfo import ZoneInfo

__all__ = ["day_label", "local", "relative"]


def local(epoch: float, tz: str) -> datetime:
    return datetime.fromtimestamp(epoch, ZoneInfo(tz))


def relative(target: float, now: float) -> str:
    delta = target - now
    seconds = abs(delta)
    if seconds < 60:
        return "now"
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size:
            count = int(seconds // size)
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
