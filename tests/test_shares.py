"""The fair-share rules of the connection cap (frontmind/server/_shares.py), on their own;
tests/test_connection_shares.py drives them through a real daemon and real sockets."""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import count

import pytest

from frontmind.server._shares import Holding, Shares, address_key

_ids = count()


@dataclass(eq=False)
class Conn:
    state: Holding = "idle"
    id: int = field(default_factory=lambda: next(_ids))

    def holding(self) -> Holding:
        return self.state


def fill(shares: Shares[Conn], address: str, n: int, state: Holding = "idle") -> list[Conn]:
    made = []
    for _ in range(n):
        admitted, victim = shares.admit(address)
        assert admitted, address
        assert victim is None
        conn = Conn(state)
        shares.add(conn, address)
        made.append(conn)
    return made


def test_a_lone_client_may_take_every_connection() -> None:
    shares: Shares[Conn] = Shares(limit=10, per_client=10)
    fill(shares, "10.0.0.1", 10)
    assert shares.admit("10.0.0.1") == (False, None), "full, and it holds them all"


def test_a_newcomer_takes_the_heaviest_clients_idle_then_body_never_busy() -> None:
    shares: Shares[Conn] = Shares(limit=6, per_client=6)
    fill(shares, "10.0.0.1", 2, "busy")
    body = fill(shares, "10.0.0.1", 2, "body")
    idle = fill(shares, "10.0.0.1", 2, "idle")

    def take(address: str) -> Conn | None:
        admitted, victim = shares.admit(address)
        assert admitted == (victim is not None)
        if victim is not None:
            shares.remove(victim)
            shares.add(Conn("busy"), address)
        return victim

    # Idle first (oldest first), then a body still arriving.
    assert [take("10.0.0.2") for _ in range(3)] == [idle[0], idle[1], body[0]]
    assert take("10.0.0.2") is None, "3 against 3: no one holds two more"
    assert take("10.0.0.3") is body[1]
    # Left: 10.0.0.1 holds 2 busy, 10.0.0.2 holds 3 busy; a response is never cut.
    assert take("10.0.0.3") is None
    assert shares.held_by("10.0.0.1") == 2


def test_max_min_fairness_with_three_clients() -> None:
    shares: Shares[Conn] = Shares(limit=9, per_client=9)
    fill(shares, "a", 9)
    for address in ["b", "c"] * 3:
        admitted, victim = shares.admit(address)
        assert admitted
        assert victim is not None
        shares.remove(victim)
        shares.add(Conn(), address)
    assert [shares.held_by(a) for a in "abc"] == [3, 3, 3]
    assert shares.admit("a") == (False, None)
    assert shares.admit("b") == (False, None)


def test_tokens_share_inside_their_address_and_cannot_escape_it() -> None:
    shares: Shares[Conn] = Shares(limit=12, per_client=4)
    # A client inventing a token per connection still counts under its address.
    for i, conn in enumerate(fill(shares, "proxy", 4)):
        assert shares.set_token(conn, f"random-{i}".encode())
    assert shares.admit("proxy") == (False, None), "the address holds its cap"
    # The cap applies to one token across addresses as well.
    for conn in fill(shares, "elsewhere", 4):
        assert shares.set_token(conn, b"heavy")
    late = fill(shares, "third", 1)[0]
    assert not shares.set_token(late, b"heavy")
    assert shares.held_by("third") == 1, "still counted, under its address"
    assert shares.set_token(late, b"other")


def test_within_one_address_the_heaviest_token_gives_way() -> None:
    shares: Shares[Conn] = Shares(limit=6, per_client=6)
    heavy = fill(shares, "127.0.0.1", 5, "body")
    light = fill(shares, "127.0.0.1", 1, "idle")
    for conn in heavy:
        shares.set_token(conn, b"heavy")
    shares.set_token(light[0], b"light")
    admitted, victim = shares.admit("127.0.0.1")
    assert admitted
    assert victim is heavy[0], "the heavy token's oldest body, not the light one's idle"
    shares.remove(victim)
    newcomer = Conn("busy")
    shares.add(newcomer, "127.0.0.1")
    assert shares.set_token(newcomer, b"light")
    # Connections without a token yet (fresh ones) never make room for each other.
    shares = Shares(limit=3, per_client=3)
    fill(shares, "127.0.0.1", 3)
    assert shares.admit("127.0.0.1") == (False, None)


def test_a_fixed_cap_per_client_and_removal() -> None:
    shares: Shares[Conn] = Shares(limit=100, per_client=2)
    first = fill(shares, "a", 2)
    assert shares.admit("a") == (False, None)
    shares.remove(first[0])
    shares.remove(first[0])  # twice is harmless: a connection is closed once or more
    assert shares.admit("a") == (True, None)
    assert len(shares) == 1


@pytest.mark.parametrize(
    ("peer", "key"),
    [
        (("127.0.0.2", 5000), "127.0.0.2"),
        (("2001:db8::1", 5000, 0, 0), "2001:db8::/64"),
        (("2001:db8::ffff:1", 5000, 0, 0), "2001:db8::/64"),
        (("::ffff:10.1.2.3", 5000, 0, 0), "10.1.2.3"),
        (("fe80::1%eth0", 5000, 0, 2), "fe80::/64"),
        ("", "local"),
        (None, "local"),
    ],
)
def test_address_keys(peer: object, key: str) -> None:
    assert address_key(peer) == key
