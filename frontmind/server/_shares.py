"""Who holds the server's connections, so that no client can starve the rest.

A client is its peer address (an IPv6 address by its /64, which one host commonly
owns whole) and, within an address, the bearer token its latest request carried (none
until a request head names one). Counting tokens inside addresses, never instead of
them, keeps a client that invents a new token per connection inside its address's count.

The rules, applied when a connection arrives (`admit`) and when a request head names a
token (`set_token`):

- no address and no token holds more than `per_client` connections (an address at its
  cap may still swap one of its heaviest token's for a newcomer, as below);
- while fewer than `limit` are held, anyone may take one: a lone client can use all of
  them;
- when all are held, a newcomer takes the place of one of the heaviest client's, if
  that one holds at least two more than the newcomer's address (max-min fairness, so a
  flood from one address cannot keep another out): an idle connection (waiting for a
  request head) first, else one whose request body is still arriving, else one whose
  client has stopped taking its response (its writes are paused: the socket's buffers
  are full), else one whose turn waits for its slot (it ends with an `overloaded`
  error event: turns queued by one client must not hold every connection). A response
  the client is taking as it comes is never taken. Otherwise
  the newcomer is refused.

Within an address the heaviest token loses first, so behind one proxy (or on loopback)
the user holding the most gives way, not the one who holds little.

`Backlogs` counts, by address, the bytes waiting in the write buffers of connections
whose client is not taking them, so that one address cannot pin the process's memory
with responses it never reads.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Generic, Literal, Protocol, TypeVar

__all__ = ["Backlogs", "Held", "Shares", "address_key"]

Holding = Literal["idle", "body", "stalled", "queued", "busy"]


class Held(Hashable, Protocol):
    def holding(self) -> Holding:
        """`idle` (waiting for a request head), `body` (its request body still
        arriving, no answer begun), `stalled` (its writes paused: the client is not
        taking its response as fast as it comes), `queued` (a turn waiting for its
        slot: nothing of it started) or `busy` (being answered): what eviction may
        take, in that order (never `busy`)."""
        ...


C = TypeVar("C", bound=Held)
K = TypeVar("K", str, bytes)


def address_key(peer: object) -> str:
    """The share key of a transport's `peername`: the address, an IPv6 one by its /64."""
    if not isinstance(peer, tuple) or not peer or not isinstance(peer[0], str):
        return "local"  # a Unix socket, or a transport that does not say
    try:
        address = ipaddress.ip_address(peer[0].partition("%")[0])
    except ValueError:
        return peer[0]
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address)


@dataclass
class _Place:
    address: str
    token: bytes | None


class Shares(Generic[C]):
    """The connections held, by address and token, and the admission decisions."""

    def __init__(self, limit: int, per_client: int) -> None:
        self.limit = limit
        self.per_client = per_client
        # address -> token -> connections, oldest first (a dict keeps insertion order)
        self._groups: dict[str, dict[bytes | None, dict[C, None]]] = {}
        self._by_address: dict[str, int] = {}
        self._by_token: dict[bytes, int] = {}
        self._places: dict[C, _Place] = {}

    def __len__(self) -> int:
        return len(self._places)

    def held_by(self, address: str) -> int:
        return self._by_address.get(address, 0)

    def admit(self, address: str) -> tuple[bool, C | None]:
        """(admitted, the connection to close to make room). Not yet added: `add` it."""
        mine = self._by_address.get(address, 0)
        if mine >= self.per_client:
            victim = self._within(address)  # its count stays as it is
        elif len(self._places) < self.limit:
            return True, None
        else:
            victim = self._victim(address, mine)
        return victim is not None, victim

    def add(self, conn: C, address: str) -> None:
        self._join(conn, _Place(address, None))

    def set_token(self, conn: C, token: bytes | None) -> bool:
        """Count `conn` under `token` from now on; False if that token holds its cap
        already (the connection stays counted under its address alone)."""
        place = self._places.get(conn)
        if place is None or place.token == token:
            return True
        if token is not None and self._by_token.get(token, 0) >= self.per_client:
            self.remove(conn)
            self._join(conn, _Place(place.address, None))
            return False
        self.remove(conn)
        self._join(conn, _Place(place.address, token))
        return True

    def remove(self, conn: C) -> None:
        place = self._places.pop(conn, None)
        if place is None:
            return
        tokens = self._groups[place.address]
        group = tokens[place.token]
        del group[conn]
        if not group:
            del tokens[place.token]
        if not tokens:
            del self._groups[place.address]
        _decrement(self._by_address, place.address)
        if place.token is not None:
            _decrement(self._by_token, place.token)

    def _join(self, conn: C, place: _Place) -> None:
        self._places[conn] = place
        self._groups.setdefault(place.address, {}).setdefault(place.token, {})[conn] = None
        self._by_address[place.address] = self._by_address.get(place.address, 0) + 1
        if place.token is not None:
            self._by_token[place.token] = self._by_token.get(place.token, 0) + 1

    def _victim(self, address: str, mine: int) -> C | None:
        heaviest = max(self._by_address, key=self._by_address.__getitem__)
        if heaviest != address and self._by_address[heaviest] > mine + 1:
            return self._take(self._groups[heaviest], floor=0)
        return self._within(address)

    def _within(self, address: str) -> C | None:
        """The newcomer's own address holds the most: only a token within it that holds
        at least two more than the address's connections without one gives way (the
        newcomer names its token, if any, only in its head)."""
        tokens = self._groups.get(address, {})
        return self._take(tokens, floor=len(tokens.get(None, {})) + 1, tokens_only=True)

    def _take(
        self, tokens: dict[bytes | None, dict[C, None]], *, floor: int, tokens_only: bool = False
    ) -> C | None:
        groups = sorted(
            (group for token, group in tokens.items() if token is not None or not tokens_only),
            key=len,
            reverse=True,
        )
        for wanted in ("idle", "body", "stalled", "queued"):
            for group in groups:
                if len(group) <= floor:
                    break
                for conn in group:
                    if conn.holding() == wanted:
                        return conn
        return None


class Backlogs:
    """Bytes waiting to be sent on connections whose writes are paused, by address.

    A connection counts from the moment its transport pauses writing (its buffer is
    over the high-water mark) until it resumes or is lost; what it counts is its buffer
    when it paused, brought up to date as it is watched. An address over `cap` with
    more than one such connection is `over`: the connection that took it over is
    dropped (one response alone is never refused for its size).
    """

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self._bytes: dict[str, int] = {}
        self._conns: dict[str, int] = {}

    def total(self) -> int:
        return sum(self._bytes.values())

    def of(self, address: str) -> int:
        return self._bytes.get(address, 0)

    def change(self, address: str, delta: int, conns: int = 0) -> None:
        """Count `delta` more bytes (and `conns` more connections) for `address`."""
        left = self._bytes.get(address, 0) + delta
        held = self._conns.get(address, 0) + conns
        if held > 0:
            self._bytes[address] = max(0, left)
            self._conns[address] = held
        else:
            self._bytes.pop(address, None)
            self._conns.pop(address, None)

    def over(self, address: str) -> bool:
        return self._conns.get(address, 0) > 1 and self._bytes.get(address, 0) > self.cap


def _decrement(counts: dict[K, int], key: K) -> None:
    left = counts[key] - 1
    if left:
        counts[key] = left
    else:
        del counts[key]
