from __future__ import annotations

from .._messages import Turn
from .._trinket import Trinket
from ._timefmt import local

__all__ = ["DateTimeTrinket"]


class DateTimeTrinket(Trinket):
    """The current date and time in the user's timezone, to the minute."""

    async def render(self, turn: Turn) -> str:
        moment = local(turn.now, turn.timezone)
        offset = moment.strftime("%z")
        return (
            f"Current date and time: {moment.strftime('%A')}, {moment.day} "
            f"{moment.strftime('%B %Y, %H:%M')} ({turn.timezone}, UTC{offset[:3]}:{offset[3:]})"
        )
