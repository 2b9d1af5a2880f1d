from __future__ import annotations

from storage import Storage, UnknownContinuum

from .._markup import markup_field
from .._messages import Turn
from .._trinket import Trinket
from ._timefmt import day_label, local, seconds

__all__ = ["ManifestTrinket"]

SUMMARY_CHARS = 400


class ManifestTrinket(Trinket):
    """Recent segments of this continuum, grouped by day, newest day last; a closed
    segment shows the title and summary its background pass wrote."""

    def __init__(self, storage: Storage, *, segments: int, gap_seconds: float) -> None:
        self._storage = storage
        self._limit = segments
        self._gap = gap_seconds

    async def render(self, turn: Turn) -> str:
        in_context = turn.history_start  # given by the conversation actor on a turn's path
        if in_context is None:
            try:
                continuum = await self._storage.continuum(turn.user, turn.continuum_id)
            except UnknownContinuum:
                return ""
            in_context = continuum.history_start
        segments = await self._storage.recent_segments(
            turn.user, turn.continuum_id, limit=self._limit
        )
        if not segments:
            return ""
        today = local(turn.now, turn.timezone).date()
        lines: list[str] = []
        current_day = None
        for segment in segments:
            start = local(segment.started_at, turn.timezone)
            end = local(segment.ended_at, turn.timezone)
            if start.date() != current_day:
                current_day = start.date()
                lines.append(day_label(current_day, today))
            notes = []
            if segment is segments[-1] and turn.now - seconds(segment.ended_at) <= self._gap:
                notes.append("active")
            if segment.first_seq < in_context:
                notes.append("no longer in context")
            turns = f"{segment.turn_count} turn{'s' if segment.turn_count != 1 else ''}"
            note = f" ({', '.join(notes)})" if notes else ""
            lines.append(
                f"- {start:%H:%M}–{end:%H:%M}{note} {markup_field(segment.title, 80)} [{turns}]"
            )
            if segment.summary:
                # Written by the segment's background summary once it closed: what a
                # trimmed segment said stays in view here (and in search).
                lines.append(f"  {markup_field(segment.summary, SUMMARY_CHARS)}")
        return "\n".join(lines)
