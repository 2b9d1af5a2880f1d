"""Admission: how many turns compose and stream at once in this process, and who is next.

A process that starts every turn the moment it arrives falls behind on its event loop
once it has more turns than a core can serve: each step of every composition waits a
whole pass through a long ready queue, and the composer's deadline cuts sections that
were starved, not slow (bench/README.md, issue 27's figures). So at most
`turns.max_active` turns hold a slot (from the composition to the commit); the rest wait
at the door, without costing the loop anything, in a fair queue:

- round robin over the users with a turn waiting, one turn each per round;
- within a user, round robin over their continuums;
- within a continuum, in arrival order. A continuum whose turn holds a slot is skipped:
  its turns run one at a time anyway, and a slot given to its next turn would sit idle.

So one user's burst (many continuums at once) cannot starve another user's one turn. A
turn is refused at the door (`Overloaded`, a `Busy`, with `retry_after`) only when its
expected wait would pass `turns.max_wait_s`: the queue ahead of it in that order, at the
rate slots have been freed lately (nested turns, below, are not part of it: each brings a
slot of its own). Its own continuum's turns ahead of it (running or
waiting) go one at a time whatever slots are free, so they alone can make the wait too
long: then it is refused as `Busy` (this continuum's, not the process's state). Refused
turns cost nothing: no actor is started, nothing is composed or stored (a write per
refusal would load the store exactly when the process is past its capacity); they are
counted (`refused`) for the metrics.

A turn started from inside a turn that holds a slot (a tool asking another continuum:
a sub-agent) does not wait in the queue for a slot of its own: its parent, waiting on
the tool, would hold its slot until the tool's timeout, and with every slot held so (or
one slot) no nested turn could ever run. It brings its own slot, for its lifetime, and
goes first (the slot is for it alone: no turn of the queue takes it while it waits for
its continuum); its continuum's turns still run one at a time. One asking its own
continuum, or that of a turn waiting on it (its caller's caller...), would wait for
itself: it is refused at once (`Busy`).

Each turn's ticket is owned by its `TurnStream`: taken at the door (`enter`, where a
continuum's own bound, `turns.max_queued`, is checked too), given up when the stream
closes, however it ends. The stream waits for its slot (`wait`) before it starts the
continuum's actors and hands them the turn, so a waiting turn costs its ticket and its
connection alone (a thousand lanes spawned at the door for turns then abandoned had
left the daemon's RSS some 55 MB higher: bench/abandon.py --fresh). The conversation actor
gives the slot back as soon as the turn is over, before its last event is read.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from ._exceptions import Busy, Overloaded

__all__ = ["Admission"]

_QUEUED, _GRANTED, _DONE = 0, 1, 2
# How quickly the measure of a turn's time follows a change (an exponential average):
# about the last twenty turns weigh in.
_SMOOTHING = 0.05


@dataclass(eq=False, slots=True)
class _Ticket:
    continuum: _Continuum
    queued_at: float
    state: int = _QUEUED
    granted_at: float = 0.0
    waiter: asyncio.Future[None] | None = None  # set while the actor waits for the slot
    nested: bool = False  # started inside a turn holding a slot: brings a slot of its own
    within: _Ticket | None = None  # that turn's ticket (a nested one's)


@dataclass(eq=False, slots=True)
class _Continuum:
    user: _User
    key: str
    tickets: deque[_Ticket] = field(default_factory=deque)  # waiting, in arrival order
    running: _Ticket | None = None  # the turn holding a slot
    nested: int = 0  # of `tickets`, nested ones (first, each with the slot it brought)


@dataclass(eq=False, slots=True)
class _User:
    name: str
    waiting: int = 0  # tickets waiting for a shared slot (not nested), over all continuums
    ready: deque[_Continuum] = field(default_factory=deque)  # waiting, none running
    continuums: dict[str, _Continuum] = field(default_factory=dict)
    # at_least[k]: how many of the user's continuums have more than k tickets waiting
    # for a shared slot (nested ones left out: see `_ahead`).
    at_least: list[int] = field(default_factory=list)


def _busy_slots(slots: int, waiting: int) -> str:
    """What holds a refused turn up, in words: every slot taken, and the queue if any
    ("0 turns are waiting for one of 1 slots" read as if nothing stood in the way)."""
    taken = f"all {slots} turn slots are taken" if slots != 1 else "the one turn slot is taken"
    if waiting == 0:
        return taken
    queue = f"{waiting} turns wait" if waiting != 1 else "1 turn waits"
    return f"{taken} and {queue} for them"


def _raise(counts: list[int], level: int) -> None:
    """One more member now has `level + 1` (it had `level`)."""
    if level == len(counts):
        counts.append(0)
    counts[level] += 1


def _lower(counts: list[int], level: int) -> None:
    """One member now has `level - 1` (it had `level`)."""
    counts[level - 1] -= 1
    while counts and not counts[-1]:
        counts.pop()


class Admission:
    """The process's turn slots and its fair queue (see the module's docstring)."""

    def __init__(
        self,
        max_active: int,
        max_wait_s: float,
        max_queued: int,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_active = max_active
        self.max_wait_s = max_wait_s
        self.max_queued = max_queued  # per continuum, beside its running turn
        self._clock = clock
        self.active = 0  # slots held
        self.waiting = 0  # tickets waiting for one
        self.refused = 0  # turns (and previews) refused at the door, since the start
        self.admitted = 0  # turns given a slot, since the start
        self.nested = 0  # nested turns alive, each with the slot it brought
        self._nested_active = 0  # of `active`, nested turns (on the slots they brought)
        self.turn_seconds: float | None = None  # recent turns' slot time; None: none ended yet
        self.on_wait: Callable[[float], None] | None = None  # told each admitted turn's wait
        self._tickets: dict[str, _Ticket] = {}
        self._users: dict[str, _User] = {}
        self._ready: deque[_User] = deque()  # users with a ready continuum, round robin
        # at_least[k]: how many users have more than k tickets waiting for a shared slot.
        self._at_least: list[int] = []
        self._draining = False
        self._emptied: asyncio.Future[None] | None = None  # `settled()`'s wait

    # -- the door ------------------------------------------------------------------------

    def expected_wait(self, user: str, continuum: str) -> float:
        """Seconds a turn arriving now would wait for its slot (0 if one is free)."""
        free = self.max_active - (self.active - self._nested_active)
        beyond = self._ahead(user, continuum) + 1 - free
        if beyond <= 0 or self.turn_seconds is None:
            return 0.0  # a slot is free, or nothing is measured yet: no ground to refuse
        # Slots free at max_active / turn_seconds a second; this turn needs the ones that
        # go to the turns ahead of it and then its own.
        return beyond / self.max_active * self.turn_seconds

    def queued(self, user: str, continuum: str) -> int:
        """The continuum's turns waiting or holding a slot."""
        account = self._users.get(user)
        cont = None if account is None else account.continuums.get(continuum)
        return 0 if cont is None else len(cont.tickets) + (cont.running is not None)

    def enter(self, user: str, continuum: str, turn_id: str, *, within: str | None = None) -> None:
        """Take a ticket for the turn `turn_id`, or refuse it (nothing is taken): `Busy`
        when `max_queued` turns of its continuum already wait, `Overloaded` when its
        expected wait passes `max_wait_s`. `within`: the turn it was started from (a
        tool's); if that one holds a slot, this one is nested (see the module's doc)."""
        parent = None if within is None else self._tickets.get(within)
        if parent is not None and parent.state == _GRANTED:
            self._enter_nested(user, continuum, turn_id, parent)
            return
        known = self._users.get(user)
        queued = None if known is None else known.continuums.get(continuum)
        if queued is not None and len(queued.tickets) >= self.max_queued:
            raise self._full(continuum)
        # Its continuum's own turns ahead of it (running or waiting) go one at a time,
        # however many slots are free: the slots' rate (`expected_wait`) alone would
        # promise it far too short a wait. Nothing measured yet: no ground to refuse.
        ahead = self.queued(user, continuum)
        own = 0.0 if self.turn_seconds is None else ahead * self.turn_seconds
        if own > self.max_wait_s:
            self.refused += 1
            retry = max(1, math.ceil(own - self.max_wait_s))
            raise Busy(
                f"continuum {continuum!r} runs its turns one at a time and {ahead} "
                f"{'is' if ahead == 1 else 'are'} ahead of this one: about {own:.0f} s, over "
                f"turns.max_wait_s ({self.max_wait_s:g} s); retry in {retry} s",
                retry_after=retry,
            )
        wait = self.expected_wait(user, continuum)
        if wait > self.max_wait_s:
            self.refused += 1
            retry = max(1, math.ceil(wait - self.max_wait_s))
            shared = self.waiting - (self.nested - self._nested_active)  # not nested ones
            raise Overloaded(
                f"{_busy_slots(self.max_active, shared)}: about {wait:.0f} s, over "
                f"turns.max_wait_s ({self.max_wait_s:g} s); retry in {retry} s",
                retry_after=retry,
            )
        self._queue(turn_id, _Ticket(self._continuum(user, continuum), self._clock()))
        self._dispatch()

    def _enter_nested(self, user: str, continuum: str, turn_id: str, parent: _Ticket) -> None:
        """A turn started inside `parent`'s: its own slot, first in the queue."""
        caller: _Ticket | None = parent
        while caller is not None and not (
            caller.continuum.user.name == user and caller.continuum.key == continuum
        ):
            # The turns waiting on this one: its caller, the caller's own caller...
            caller = caller.within if caller.within and caller.within.state == _GRANTED else None
        if caller is not None:
            self.refused += 1
            raise Busy(
                f"continuum {continuum!r} is running the turn that started this one (from a "
                "tool): its turns run one at a time, so this one would wait for itself; "
                "start it in another continuum",
                retry_after=None,
            )
        cont = self._continuum(user, continuum)
        if len(cont.tickets) >= self.max_queued:
            raise self._full(continuum)
        ticket = _Ticket(cont, self._clock(), nested=True, within=parent)
        self._queue(turn_id, ticket)
        # First of its continuum's waiting turns, and its continuum first of all: the
        # slot it brings is for it, not for whoever the fair order names next.
        cont.tickets.rotate(1)
        if cont in cont.user.ready:
            cont.user.ready.remove(cont)
            self._make_ready(cont)
        self.nested += 1
        self._dispatch()

    def _full(self, continuum: str) -> Busy:
        """The refusal of a turn whose continuum has `max_queued` turns waiting (counted:
        its record says so, cancelled and busy, as the others' do)."""
        self.refused += 1
        n = self.max_queued
        # One of them is done in about a turn's time (1 s until one is measured).
        return Busy(
            f"continuum {continuum!r} already has {n} turn{'s' if n != 1 else ''} "
            "waiting; retry when one has finished",
            retry_after=self.turn_seconds,
        )

    def _continuum(self, user: str, continuum: str) -> _Continuum:
        account = self._users.get(user)
        if account is None:
            account = self._users[user] = _User(user)
        cont = account.continuums.get(continuum)
        if cont is None:
            cont = account.continuums[continuum] = _Continuum(account, continuum)
        return cont

    def _queue(self, turn_id: str, ticket: _Ticket) -> None:
        """The ticket joins its continuum's queue (last), ready if nothing runs there."""
        cont = ticket.continuum
        account = cont.user
        self._tickets[turn_id] = ticket
        if ticket.nested:
            cont.nested += 1
        else:
            _raise(account.at_least, len(cont.tickets) - cont.nested)
            _raise(self._at_least, account.waiting)
            account.waiting += 1
        cont.tickets.append(ticket)
        self.waiting += 1
        if cont.running is None and len(cont.tickets) == 1:
            self._make_ready(cont)

    # -- the turn's side -----------------------------------------------------------------

    async def wait(self, turn_id: str) -> None:
        """Until the turn holds its slot (at once if it does, or has no ticket any more).
        Draining: at once, and the turn ends as shutting down when the actor takes it."""
        ticket = self._tickets.get(turn_id)
        if ticket is None or ticket.state != _QUEUED or self._draining:
            return
        waiter = ticket.waiter = asyncio.get_running_loop().create_future()
        try:
            await waiter
        finally:
            ticket.waiter = None

    def release(self, turn_id: str, *, ended: bool = False) -> None:
        """The turn is over (or its stream closed): its slot, or its place, goes to the
        next. Any number of calls; the first counts. Only a turn that `ended` (its
        actor's last event) is measured: one left by its caller says nothing of how
        long turns take, and a client abandoning turns as soon as they start would
        otherwise bring the measure near 0, and with it every refusal."""
        ticket = self._tickets.pop(turn_id, None)
        if ticket is None:
            return
        if ticket.waiter is not None and not ticket.waiter.done():
            ticket.waiter.set_result(None)  # its stream closed while it waited: it goes on
        if not self._tickets and self._emptied is not None and not self._emptied.done():
            self._emptied.set_result(None)
        cont = ticket.continuum
        if ticket.nested:
            self.nested -= 1  # and the slot it brought
            ticket.within = None
        if ticket.state == _GRANTED:
            self._nested_active -= ticket.nested
            if ended:
                held = self._clock() - ticket.granted_at
                known = self.turn_seconds
                self.turn_seconds = held if known is None else known + _SMOOTHING * (held - known)
            self.active -= 1
            cont.running = None
            if cont.tickets:
                self._make_ready(cont)
        elif ticket.state == _QUEUED:
            self._withdraw(ticket)
        ticket.state = _DONE
        self._forget(cont)
        self._dispatch()

    def drain(self) -> None:
        """Shutting down: every turn waiting goes on at once (to end as shutting down)."""
        self._draining = True
        for ticket in self._tickets.values():
            if ticket.waiter is not None and not ticket.waiter.done():
                ticket.waiter.set_result(None)

    def holds(self, turn_id: str) -> bool:
        """Whether the turn still has its ticket: waiting, or running (a turn gives its
        slot back with its last event, before that is read)."""
        return turn_id in self._tickets

    async def settled(self) -> None:
        """Until no turn holds a ticket: every turn taken in has ended (its stream
        closed). Callers bound the wait."""
        while self._tickets:
            self._emptied = asyncio.get_running_loop().create_future()
            try:
                await self._emptied
            finally:
                self._emptied = None

    # -- the queue -----------------------------------------------------------------------

    def _ahead(self, user: str, continuum: str) -> int:
        """Tickets that the fair order gives a shared slot before a new one of (user,
        continuum).

        Nested tickets waiting are not among them, though they go first: each runs on
        the slot it brought, so none of them takes a shared slot, and the rate at which
        shared slots free (`expected_wait`'s) is the same with them or without. What a
        nested turn does cost: its continuum's later turns wait for it, one at a time
        (`enter` counts it there, through `queued`), and while it runs the loop serves
        one turn more than `max_active`, which slows every turn a little instead of
        keeping any in the queue."""
        account = self._users.get(user)
        mine = waiting = 0
        if account is not None:
            cont = account.continuums.get(continuum)
            # Its round in the continuum, among the tickets there waiting for a shared slot.
            place = 0 if cont is None else len(cont.tickets) - cont.nested
            # Round robin over the user's continuums: each serves min(its waiting,
            # place + 1) first, at worst (its own: `place`). Summed by levels:
            # sum of min(w, m) over members = sum of at_least[k] for k < m.
            mine = sum(account.at_least[: place + 1])
            waiting = account.waiting
        # Round robin over the users the same way: each other user serves min(its
        # waiting, mine + 1) before this one.
        others = sum(self._at_least[: mine + 1]) - min(waiting, mine + 1)
        return mine + others

    def _make_ready(self, cont: _Continuum) -> None:
        account = cont.user
        if cont.tickets and cont.tickets[0].nested:  # first: it brought its own slot
            account.ready.appendleft(cont)
            if account in self._ready:
                self._ready.remove(account)
            self._ready.appendleft(account)
            return
        account.ready.append(cont)
        if len(account.ready) == 1:
            self._ready.append(account)

    def _dispatch(self) -> None:
        """Give free slots to the fair order's next tickets: a nested one has its own
        (they lead the order), the others share `max_active`."""
        now = None
        while self._ready:
            account = self._ready[0]
            cont = account.ready[0]
            ticket = cont.tickets[0]
            if not ticket.nested and self.active - self._nested_active >= self.max_active:
                break
            self._ready.popleft()
            account.ready.popleft()
            cont.tickets.popleft()
            self._took(account, cont, ticket)
            cont.running = ticket
            ticket.state = _GRANTED
            ticket.granted_at = now = self._clock() if now is None else now
            self.active += 1
            self._nested_active += ticket.nested
            self.admitted += 1
            if account.ready and account.ready[0].tickets[0].nested:
                self._ready.appendleft(account)  # another nested one: still first
            elif account.ready:
                self._ready.append(account)  # its next continuum, after the others
            if self.on_wait is not None:
                self.on_wait(now - ticket.queued_at)
            if ticket.waiter is not None and not ticket.waiter.done():
                ticket.waiter.set_result(None)

    def _took(self, account: _User, cont: _Continuum, ticket: _Ticket) -> None:
        """`ticket`, of `cont`, left the waiting (given a slot, or withdrawn)."""
        if ticket.nested:
            cont.nested -= 1
        else:
            _lower(account.at_least, len(cont.tickets) - cont.nested + 1)
            _lower(self._at_least, account.waiting)
            account.waiting -= 1
        self.waiting -= 1

    def _withdraw(self, ticket: _Ticket) -> None:
        """A waiting ticket leaves the queue (its stream closed before its slot came)."""
        cont = ticket.continuum
        account = cont.user
        cont.tickets.remove(ticket)
        self._took(account, cont, ticket)
        if not cont.tickets and cont.running is None:
            account.ready.remove(cont)
            if not account.ready:
                self._ready.remove(account)

    def _forget(self, cont: _Continuum) -> None:
        """Drop the bookkeeping of a continuum (and user) with nothing waiting or running."""
        if cont.tickets or cont.running is not None:
            return
        account = cont.user
        del account.continuums[cont.key]
        if not account.continuums:
            del self._users[account.name]
