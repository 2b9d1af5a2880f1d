from __future__ import annotations

from collections.abc import Callable

from storage import Reminder, Storage

from .._markup import escape_field, markup_field
from .._messages import Turn
from .._trinket import Trinket
from ._timefmt import local, relative, seconds

__all__ = ["RemindersTrinket", "describe_reminder"]


def describe_reminder(
    reminder: Reminder, now: float, tz: str, *, field: Callable[[str, int], str] = escape_field
) -> str:
    """One reminder on one line. A tool's result is escaped whole here (`escape_field`);
    the section passes `markup_field`, as the composer neutralizes the section whole."""
    text = field(reminder.text, 200)
    if reminder.due_at is None:
        return f"#{reminder.id} {text}"
    due = local(reminder.due_at, tz)
    # The year only when it is not this one: "Tue 07 Dec" a year out reads as this week.
    shown = (
        f"{due:%a %d %b %H:%M}" if due.year == local(now, tz).year else f"{due:%a %d %b %Y %H:%M}"
    )
    return f"#{reminder.id} {text} — due {relative(reminder.due_at, now)} ({shown})"


class RemindersTrinket(Trinket):
    """Overdue reminders first and clearly marked, then today's, then upcoming ones."""

    def __init__(self, storage: Storage, *, limit: int = 30) -> None:
        self._storage = storage
        self._limit = limit

    async def render(self, turn: Turn) -> str:
        reminders = await self._storage.active_reminders(turn.user, limit=self._limit + 1)
        if not reminders:
            return ""
        # Past the bound (old overdue ones fill it first), the model is told the rest
        # exist, rather than taking what it sees for every open reminder.
        more = len(reminders) > self._limit
        reminders = reminders[: self._limit]
        today = local(turn.now, turn.timezone).date()
        groups: dict[str, list[str]] = {
            "OVERDUE": [],
            "Due today": [],
            "Upcoming": [],
            "No due time": [],
        }
        for reminder in reminders:
            line = "- " + describe_reminder(reminder, turn.now, turn.timezone, field=markup_field)
            if reminder.due_at is None:
                groups["No due time"].append(line)
            elif seconds(reminder.due_at) < turn.now:
                groups["OVERDUE"].append(line + " ⚠ OVERDUE")
            elif local(reminder.due_at, turn.timezone).date() == today:
                groups["Due today"].append(line)
            else:
                groups["Upcoming"].append(line)
        parts = [f"{title}:\n" + "\n".join(lines) for title, lines in groups.items() if lines]
        if more:
            parts.append("More open reminders are not shown here: list_reminders lists them all.")
        return "\n".join(parts)
