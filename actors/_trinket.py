"""The public `Trinket` class, and the actor that runs one.

A trinket provides one section of context. Subclass `Trinket` and implement `render`;
return "" for no section. Placement, caching and order come from the placement
registry (the config file, for your own trinkets), never from the trinket.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from contextlib import suppress
from typing import Any

from runtime import Actor, ActorRef, KernelError, MessageFailed
from storage import storable

from ._messages import (
    SectionLate,
    SectionReply,
    TrinketMessage,
    Turn,
    TurnCommitted,
    TurnStart,
)

__all__ = [
    "Directory",
    "Trinket",
    "TrinketActor",
    "composer_name",
    "render_section",
    "trinket_name",
]

Directory = Callable[[str], "ActorRef[Any, Any] | None"]

log = logging.getLogger("frontmind.trinkets")


def composer_name(user: str, continuum_id: str) -> str:
    # Neither a user name nor a continuum id can hold "/": the name is unambiguous.
    return f"composer:{user}/{continuum_id}"


def trinket_name(section: str, user: str, continuum_id: str) -> str:
    """Each continuum has its own trinket actors: no continuum waits behind another's
    render, and a trinket's state (search results, say) is its continuum's alone."""
    return f"trinket:{user}/{continuum_id}:{section}"


class Trinket:
    """Base class for context providers.

        class Weather(Trinket):
            async def render(self, turn: Turn) -> str:
                return "Sunny, 21°C"

    `render` runs once per turn under the composer's deadline; if it is late its result
    is kept for the next turn. Text that comes from outside the program should be escaped
    with `frontmind.escape_text` / `frontmind.escape_field`.
    """

    async def render(self, turn: Turn) -> str:
        raise NotImplementedError

    async def on_turn_committed(self, event: TurnCommitted) -> None:
        """Called after each committed turn; override to keep state warm."""


class TrinketActor(Actor[TrinketMessage, SectionReply | None]):
    """Runs one trinket. Whatever the trinket raises is contained here: a failed render
    fails that section for that turn (the composer marks it failed, or uses its last
    good content as stale) and the actor, with its trinket's state, goes on. Only a
    fault of the actor itself is a crash for the supervisor."""

    protocol = TrinketMessage
    replies = SectionReply | None

    def __init__(
        self, section: str, trinket: Trinket, directory: Directory, *, early_by: float = 0.0
    ) -> None:
        self._section = section
        self._trinket = trinket
        self._directory = directory
        # A section with its own, shorter deadline is due this much before the turn's.
        self._early_by = early_by
        self._answered = False  # a first render has been asked for already

    async def handle(self, message: TrinketMessage) -> SectionReply | None:
        if isinstance(message, TurnStart):
            due = message.deadline_at - self._early_by
            if time.time() > due and self._answered:
                # It waited behind a slow render until its turn had moved on: rendering
                # it now would only build a backlog of work nobody waits for. A first
                # render is never skipped: nothing older stands in for it, and the
                # composer may still be waiting (a system section's first answer).
                return None
            self._answered = True
            content = await self._render(message.turn)
            if time.time() > due:
                self._warm_next_turn(message.turn, content)
            return SectionReply(self._section, content)
        try:
            await self._trinket.on_turn_committed(message)
        # The boundary: a trinket's bug misses one warm-up, no more.
        except Exception:
            log.exception("trinket %r failed on %s", self._section, type(message).__name__)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is None or task.cancelling():
                raise
            log.warning("trinket %r raised CancelledError without being cancelled", self._section)
        except SystemExit as exc:  # as in a render: not the process's end
            log.warning("trinket %r raised SystemExit(%r)", self._section, exc.code)
        return None

    async def _render(self, turn: Turn) -> str:
        return await render_section(self._section, self._trinket, turn)

    def _warm_next_turn(self, turn: Turn, content: str) -> None:
        """Nobody waits for this reply any more: hand it to the composer for next time."""
        composer = self._directory(composer_name(turn.user, turn.continuum_id))
        if composer is None:
            return
        # If the composer is gone or full, the next turn simply renders afresh. Stamped
        # with its turn's time: ages are read on the turns' clock (the one `Frontmind`
        # was given, a simulation's), which the wall clock need not agree with.
        with suppress(KernelError):
            composer.tell(
                SectionLate(turn.user, turn.continuum_id, self._section, content, turn.now)
            )


async def render_section(
    section: str,
    trinket: Trinket,
    turn: Turn,
) -> str:
    """The trinket's text for this turn, checked: anything it raises, or a result that is
    not text, fails the section (`MessageFailed`). The composer neutralizes the frame in
    it, as in every section that reaches the turn."""
    try:
        content = await trinket.render(turn)
    # The boundary: anything the trinket raises fails this section for this turn.
    except Exception as exc:
        log.warning("section %r failed to render", section, exc_info=exc)
        raise MessageFailed(f"section {section!r} failed: {type(exc).__name__}: {exc}") from exc
    except asyncio.CancelledError as exc:
        # The trinket's own (it awaited a task someone else cancelled) is its failure;
        # it crashed the actor, until its restarts ran out and the section was refused.
        # A cancel this task was asked for (its actor stopping) goes on up.
        task = asyncio.current_task()
        if task is None or task.cancelling():
            raise
        log.warning("section %r raised CancelledError without being cancelled", section)
        raise MessageFailed(
            f"section {section!r} failed: CancelledError (the trinket's own work was cancelled)"
        ) from exc
    except SystemExit as exc:
        # sys.exit() in a render (a library's CLI helper, say) would end every user's
        # turns with no grace; it hung the process instead. It is the section's failure.
        log.warning("section %r raised SystemExit(%r)", section, exc.code)
        raise MessageFailed(
            f"section {section!r} failed: SystemExit({exc.code!r}) "
            "(a trinket may not end the process)"
        ) from exc
    if not isinstance(content, str):
        raise MessageFailed(
            f"section {section!r} failed: render returned {type(content).__name__}, not str"
        )
    # Code's text, as a tool's is: what UTF-8 and the stores cannot hold (a lone
    # surrogate, a NUL) becomes U+FFFD, instead of crashing the composer that encodes it.
    return storable(content)
