"""The fuzz corpus: bad requests generated for every route of the daemon's app.

Data, not logic: `corpus(routes, host)` turns the app's route table into a list of
`Case`s, so a route added later is fuzzed without touching this file. Every case must be
answered below 500, and every error with a JSON `{"error": {"type", "message"}}` body.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable
from dataclasses import dataclass, field

__all__ = ["PAGED", "Case", "RouteInfo", "corpus"]

# The continuum the cursor cases page through: the test gives it a turn before the
# corpus runs (and no case deletes it), so a forged cursor meets a real continuum's
# messages and turns, not a 404.
PAGED = "paged"

METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
JSON = "application/json"


@dataclass(frozen=True)
class RouteInfo:
    path: str  # with {param} placeholders, as Starlette declares it
    methods: frozenset[str]
    query: frozenset[str] = frozenset()  # the query parameters its endpoint describes


@dataclass(frozen=True)
class Case:
    name: str
    method: str
    path: str  # already percent-encoded where needed
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    expect: int | None = None  # an exact status, where the case pins one


# Odd values for path parameters: by parameter name where it means something, else all.
ODD_IDS = [
    "+1",
    "%D9%A1",
    "%EF%BC%91",
    "1_000",
    "-1",
    "0x10",
    "1e3",
    "1.0",
    "%201",
    "1%20",
    "99999999999999999999999",
    "9223372036854775808",
    "18446744073709551616",
    "%00",
    "0",
    "%F0%9F%98%80",
    "%E2%80%AE1",
    "%C2%B2",
    "NaN",
    "null",
]
ODD_CONTINUUMS = [
    "a" * 65,
    "bad.id",
    "%00",
    "%2e%2e",
    "..",
    "%C3%A9",
    "a%20b",
    "%D9%A1",
    "%EF%BD%81",
    "a%E2%80%8Bb",
    "%F0%9F%98%80",
    "CON",
    "a%0Ab",
    "%25",
    "a;b",
    "%E2%80%AEabc",
]
ODD_GENERIC = ODD_IDS + ODD_CONTINUUMS

# Bodies that are not what any route accepts.
BAD_BODIES: list[tuple[str, bytes]] = [
    ("empty", b""),
    ("truncated", b'{"message": "hi'),
    ("not-json", b"hello"),
    ("array", b"[]"),
    ("null", b"null"),
    ("number", b"1"),
    ("string", b'"x"'),
    ("true", b"true"),
    ("empty-object", b"{}"),
    ("unknown-field", b'{"zzz": 1}'),
    ("nested-deep", b"[" * 5000 + b"]" * 5000),
    ("object-deep", b'{"a":' * 3000 + b"1" + b"}" * 3000),
    # An unknown key with a quote of its own: msgspec's message quotes it whole, and the
    # quote defeats pairing its quotes (the message's own cap holds).
    ("key-backtick", b'{"x`' + b"a" * 5000 + b'": 1}'),
    ("huge-number", b'{"text": 1e999999}'),
    ("big-int", b'{"text": 123456789012345678901234567890}'),
    ("nan", b'{"text": NaN}'),
    ("lone-surrogate", b'{"text": "\\ud800", "label": "\\udfff", "message": "\\ud83d"}'),
    ("nul", b'{"text": "\\u0000", "label": "\\u0000", "content": "\\u0000", "message": "\\u0000"}'),
    ("invalid-utf8", b'{"text": "\xff\xfe", "message": "\xc3\x28"}'),
    ("utf16", '{"text": "x"}'.encode("utf-16")),
    ("bom", b'\xef\xbb\xbf{"text": "x"}'),
    ("dup-keys", b'{"text": "a", "text": 5}'),
    ("trailing", b'{"text": "a"} {}'),
    ("comment", b'{"text": "a" /* x */}'),
    ("single-quotes", b"{'text': 'a'}"),
    ("wrong-types", b'{"text": [], "message": {}, "label": 1, "content": false, "name": 2}'),
    (
        "all-null",
        b'{"text": null, "message": null, "label": null, "content": null, "due_at": null}',
    ),
]

# Known routes: field-level cases (the among them).
FIELD_CASES: dict[str, list[tuple[str, bytes]]] = {
    "/v1/continuums/{continuum_id}/turns": [
        ("blank", b'{"message": "   "}'),
        ("too-long", b'{"message": "' + b"x" * 100_001 + b'"}'),
        ("int", b'{"message": 5}'),
        ("extra", b'{"message": "hi", "model": "x"}'),
    ],
    "/v1/reminders": [
        ("far-due", b'{"text": "r", "due_at": "9999-12-31T23:59:59-23:59"}'),
        ("early-due", b'{"text": "r", "due_at": "0001-01-01T00:00:00+23:59"}'),
        ("naive-due", b'{"text": "r", "due_at": "2026-12-01T10:00:00"}'),
        ("bad-month", b'{"text": "r", "due_at": "2026-13-01T00:00:00Z"}'),
        ("int-due", b'{"text": "r", "due_at": 99999999999999999999}'),
        ("float-due", b'{"text": "r", "due_at": 1e308}'),
        ("empty-text", b'{"text": ""}'),
        ("long-text", b'{"text": "' + b"r" * 1001 + b'"}'),
        ("unicode-text", b'{"text": "\\u202eevil\\u2066\\u0301"}'),
    ],
    "/v1/memories": [
        ("importance-3", b'{"text": "m", "importance": 3}'),
        ("importance-neg", b'{"text": "m", "importance": -1e308}'),
        ("importance-str", b'{"text": "m", "importance": "high"}'),
        ("importance-huge", b'{"text": "m", "importance": 1e309}'),
        ("expires-far", b'{"text": "m", "expires_at": "9999-12-31T23:59:59-23:59"}'),
        ("expires-naive", b'{"text": "m", "expires_at": "2026-01-01T00:00:00"}'),
        ("long-text", b'{"text": "' + b"m" * 4001 + b'"}'),
    ],
    "/v1/documents": [
        ("empty-label", b'{"label": "", "content": "c"}'),
        ("long-label", b'{"label": "' + b"l" * 500 + b'", "content": "c"}'),
        ("label-slash", b'{"label": "../../etc", "content": "c"}'),
        ("label-frame", b'{"label": "\\u2550\\u2550\\u2550", "content": "c"}'),
        ("long-content", b'{"label": "x", "content": "' + b"c" * 100_001 + b'"}'),
        ("no-content", b'{"label": "x"}'),
    ],
}

# Field cases every one of which is refused (400) before anything is stored or any model
# is asked: a continuum's settings hold only values the Messages API takes.
_BIG = (2**63, 2**64, 2**70, -(2**63) - 1)
REFUSED_FIELDS: dict[str, list[tuple[str, bytes]]] = {
    # Refused before the stream starts: text of invisible characters alone (which the
    # notification center's neutralizing drops, and the API would refuse, empty), and
    # JSON nested deeper than the decoder recurses.
    "/v1/continuums/{continuum_id}/turns": [
        ("zero-width", b'{"message": "\\u200b\\u200b"}'),
        ("rtl-mark", b'{"message": "\\u202e"}'),
        ("soft-hyphen", b'{"message": "\\u00ad "}'),
        ("bom", b'{"message": "\\ufeff"}'),
        ("block-zero-width", b'{"content": [{"type": "text", "text": "\\u200b"}]}'),
        ("nested-1000", b'{"content": [' + b"[" * 1000 + b"]" * 1000 + b"]}"),
        # Unknown kinds, quoted back as excerpts, never whole.
        ("block-type-long", b'{"content": [{"type": "' + b"t" * 5000 + b'"}]}'),
        ("block-type-list", b'{"content": [{"type": ["' + b"t" * 5000 + b'"]}]}'),
        (
            "source-type-long",
            b'{"content": [{"type": "image", "source": {"type": "' + b"s" * 5000 + b'"}}]}',
        ),
    ],
    # A backup path that names no file the store could write whole.
    "/v1/admin/backup": [
        ("root", b'{"path": "/"}'),
        ("directory", b'{"path": "/tmp"}'),
        ("proc", b'{"path": "/proc/self/mem"}'),
        ("nul", b'{"path": "/tmp/a\\u0000b"}'),
        ("long-name", b'{"path": "/tmp/' + b"x" * 5000 + b'"}'),
        ("long-directory", b'{"path": "/tmp/' + b"x" * 300 + b'/x.db"}'),
        ("long-path", b'{"path": "' + b"/xx" * 2000 + b'/x.db"}'),
        ("no-directory", b'{"path": "/nonexistent/x.db"}'),
    ],
    "/v1/continuums/{continuum_id}/settings": [
        ("model-nul", b'{"model": "a\\u0000b"}'),
        ("model-empty", b'{"model": ""}'),
        ("model-blank", b'{"model": "   "}'),
        ("model-newline", b'{"model": "claude-opus-4-6\\n"}'),
        ("model-slash", b'{"model": "../../v1/messages"}'),
        ("model-space", b'{"model": "claude opus"}'),
        ("model-unicode", b'{"model": "claude\\u2011opus-4-6"}'),
        ("model-rtl", b'{"model": "\\u202eclaude-opus-4-6"}'),
        ("model-257", b'{"model": "' + b"c" * 257 + b'"}'),
        ("model-1e6", b'{"model": "' + b"c" * 1_000_000 + b'"}'),
        ("model-unknown", b'{"model": "claude-nonexistent-9"}'),
        ("model-int", b'{"model": 5}'),
        ("max-tokens-0", b'{"max_tokens": 0}'),
        ("max-tokens-neg", b'{"max_tokens": -1}'),
        ("max-tokens-over-model", b'{"max_tokens": 10000000}'),
        ("max-tokens-float", b'{"max_tokens": 1024.5}'),
        ("max-tokens-bool", b'{"max_tokens": true}'),
        ("max-tokens-1e999", b'{"max_tokens": 1e999}'),
        *((f"max-tokens-{n}", b'{"max_tokens": %d}' % n) for n in _BIG),
        ("budget-neg", b'{"budget_tokens": -1}'),
        ("budget-0", b'{"budget_tokens": 0}'),
        ("budget-1023", b'{"budget_tokens": 1023}'),
        ("budget-neg-off", b'{"thinking": "off", "budget_tokens": -1}'),
        ("budget-neg-adaptive", b'{"thinking": "adaptive", "budget_tokens": -1}'),
        *((f"budget-{n}", b'{"budget_tokens": %d}' % n) for n in _BIG),
        *((f"budget-{n}-off", b'{"thinking": "off", "budget_tokens": %d}' % n) for n in _BIG),
        (
            "budget-not-below-max",
            b'{"thinking": "enabled", "budget_tokens": 4096, "max_tokens": 4096}',
        ),
        ("thinking-odd", b'{"thinking": "sometimes"}'),
        ("effort-long", b'{"effort": "' + b"e" * 100_000 + b'"}'),
        ("display-without-thinking", b'{"thinking": "off", "thinking_display": "omitted"}'),
        ("unknown-field", b'{"temperature": 2}'),
    ],
}


def _cursor(key: bytes) -> str:
    return base64.urlsafe_b64encode(key).decode().rstrip("=")


# Cursors no page gave, each refused (400, naming the cursor) by every route that takes
# one, whatever its sort key (an id, a time and an id, a label): none reaches the store.
BAD_CURSORS: list[tuple[str, str]] = [
    ("issue", "OTk5OTk5OTk5OTk5OTk5OTk5OTk5"),  # 999999999999999999999: past SQLite's range
    ("2^63", _cursor(b"9223372036854775808")),
    ("2^64", _cursor(b"18446744073709551616")),
    ("-2^70", _cursor(b"-1180591620717411303424")),
    ("-2^63-1", _cursor(b"-9223372036854775809")),
    ("-1", _cursor(b"-1")),
    ("1e999", _cursor(b"1e999")),
    ("float", _cursor(b"1.5")),
    ("null", _cursor(b"null")),
    ("object", _cursor(b'{"id": 1}')),
    ("pair-1e999", _cursor(b'[1e999, "a"]')),
    ("pair-big-id", _cursor(b"[1.0, 99999999999999999999]")),
    ("triple", _cursor(b'[1.0, "a", 3]')),
    ("pair-swapped", _cursor(b'["a", 1.0]')),
    ("long-int", _cursor(b"9" * 400)),
    ("too-long", _cursor(b'"' + b"a" * 600 + b'"')),
    ("padded", _cursor(b"5") + "=="),
    ("plus-slash", "%2B%2F%2B%2F"),
    ("space", "MQ%20"),
    ("nul", "MQ%00"),
    ("empty", ""),
    ("not-base64", "@@@@"),
    ("one-char", "A"),
    ("bad-utf8", _cursor(b'"\xff\xfe"')),
    ("nul-string", _cursor(b'"\\u0000"')),  # no label, id or time holds a NUL
    ("not-a-label", _cursor(b'"a b"')),
    # A time cursor's row id holding a NUL: PostgreSQL's text refuses it (a 503 there).
    ("pair-nul-id", _cursor(b'["2026-01-01T00:00:00Z", "a\\u0000"]')),
]

QUERIES: list[str] = [
    "limit=%C2%B2",
    "limit=%EF%BC%91",
    "limit=-1",
    "limit=0",
    "limit=1e3",
    "limit=99999999999",
    "limit=99999999999999999999999",
    "limit=",
    "limit=1&limit=2",
    "limit=%00",
    "q=",
    "q=%22",
    "q=*",
    "q=NEAR(",
    "q=a%20OR",
    "q=%00",
    "q=" + "x" * 5000,
    "q=%E2%80%AE",
    "q=AND",
    "q=(",
    "q=x&cursor=MQ",  # a search is one ranked page: a cursor beside it is refused
    "continuum_id=" + "c" * 5000,
    "message=",
    "message=%00",
    "message=" + "m" * 20_000,
    "message=%ED%A0%80",
    "include_completed=%FF",
    "cursor=%FF%FE",
    "cursor=-1",
    "cursor=OTIyMzM3MjAzNjg1NDc3NTgwNw",  # 2^63 - 1: a valid id, with nothing after it
    "before=zz",
    "after=99999999999999999999999",
]

CONTENT_TYPES = [
    None,
    "text/plain",
    "application/x-www-form-urlencoded",
    "multipart/form-data; boundary=x",
    "application/jsonx",
    "application/json-patch+json",
    "text/json",
    "application/xml",
]


def _fill(path: str, odd: str | None = None, param: str | None = None) -> str:
    """`path` with every {param} given a plain value, or `odd` for `param`."""
    out = path
    while "{" in out:
        start = out.index("{")
        end = out.index("}", start)
        name = out[start + 1 : end].split(":")[0]
        value = (
            odd
            if name == param and odd is not None
            else ("1" if "id" in name and "continuum" not in name else "fuzz")
        )
        out = out[:start] + value + out[end + 1 :]
    return out


def _params(path: str) -> list[str]:
    names = []
    rest = path
    while "{" in rest:
        start = rest.index("{")
        end = rest.index("}", start)
        names.append(rest[start + 1 : end].split(":")[0])
        rest = rest[end + 1 :]
    return names


def corpus(routes: Iterable[RouteInfo], host: str, port: int) -> list[Case]:
    routes = list(routes)
    by_path: dict[str, set[str]] = {}
    query_params: dict[str, set[str]] = {}
    for route in routes:
        by_path.setdefault(route.path, set()).update(route.methods)
        query_params.setdefault(route.path, set()).update(route.query)
    cases: list[Case] = []
    own = {"content-type": JSON}
    for path, methods in sorted(by_path.items()):
        plain = _fill(path)
        # Wrong methods.
        for method in METHODS:
            if method not in methods and not (method == "GET" and "HEAD" in methods):
                cases.append(Case(f"{method} {path}", method, plain, headers=dict(own)))
        # Odd values for every path parameter, with each method.
        for param in _params(path):
            odd_values = (
                ODD_IDS
                if param.endswith("_id") and "continuum" not in param
                else ODD_CONTINUUMS
                if "continuum" in param
                else ODD_GENERIC
            )
            for odd in odd_values:
                for method in sorted(methods - {"HEAD"}):
                    body = b'{"message": "hi"}' if method != "GET" else b""
                    # A valid turn on an odd-but-valid id would run a turn: use a bad body.
                    if path.endswith("/turns") and method == "POST":
                        body = b"{}"
                    cases.append(
                        Case(
                            f"{method} {path} {param}={odd}",
                            method,
                            _fill(path, odd, param),
                            body,
                            dict(own),
                            # No odd id is an id (0 included: ids start at 1): each is a
                            # 400 naming it, on every route alike.
                            400 if odd_values is ODD_IDS else None,
                        )
                    )
        for method in sorted(methods & {"POST", "PUT", "PATCH", "DELETE"}):
            # Bad bodies.
            for name, body in BAD_BODIES:
                cases.append(Case(f"{method} {path} body:{name}", method, plain, body, dict(own)))
            for name, body in FIELD_CASES.get(path, []):
                cases.append(Case(f"{method} {path} field:{name}", method, plain, body, dict(own)))
            for name, body in REFUSED_FIELDS.get(path, []):
                cases.append(
                    Case(f"{method} {path} refused:{name}", method, plain, body, dict(own), 400)
                )
            # Wrong content types (DELETE without a body is allowed without one).
            for ctype in CONTENT_TYPES:
                headers = {} if ctype is None else {"content-type": ctype}
                body = b'{"text": "t", "label": "l", "content": "c", "message": ""}'
                expect = 415 if method != "DELETE" or ctype is not None else None
                cases.append(
                    Case(f"{method} {path} ctype:{ctype}", method, plain, body, headers, expect)
                )
            # Oversize body: refused from Content-Length before it is read.
            cases.append(
                Case(
                    f"{method} {path} oversize",
                    method,
                    plain,
                    b"[" + b" " * (1 << 20) + b"]",
                    dict(own),
                    413,
                )
            )
        if "GET" in methods:
            for query in QUERIES:
                cases.append(
                    Case(f"GET {path}?{query[:20]}", "GET", f"{plain}?{query}", headers={})
                )
        if "GET" in methods and "cursor" in query_params.get(path, ()):
            for name, cursor in BAD_CURSORS:
                target = f"{_fill(path, PAGED, 'continuum_id')}?cursor={cursor}"
                cases.append(Case(f"GET {path} cursor:{name}", "GET", target, expect=400))
        # Foreign Host and Origin, on every method the route has.
        for method in sorted(methods - {"HEAD"}):
            body = b"{}" if method != "GET" else b""
            for headers in (
                {"host": f"evil.example:{port}"},
                {"host": f"{host}.evil.example:{port}"},
                {"host": f"{host}:{port + 1}"},
                {"host": "localhost"},
                {"origin": "http://evil.example"},
                {"origin": "null"},
                {"origin": f"http://{host}:{port}.evil.example"},
                {"sec-fetch-site": "cross-site"},
            ):
                cases.append(
                    Case(
                        f"{method} {path} {sorted(headers.items())}",
                        method,
                        plain,
                        body,
                        {**own, **headers},
                        403,
                    )
                )
    # Paths no route has, and unicode tricks in the path itself.
    for odd_path in [
        "/v1/nowhere",
        "/v1/",
        "/",
        "/v1/continuums",
        "/v1/continuums/",
        "/v1/reminders/",
        "/v1/reminders/1",
        "/v1/reminders/1/complete/x",
        "/%00",
        "/v1/%E2%80%AEsredimer",
        "/v1/%EF%BD%92eminders",
        "//v1//reminders",
        "/v1/continuums/a/turns/../../reminders",
        "/" + "a" * 8000,
        "/v1/" + "b" * 12000,  # answered with an excerpt of the path, not the path
    ]:
        for method in ("GET", "POST", "DELETE"):
            cases.append(
                Case(
                    f"{method} {odd_path[:40]}",
                    method,
                    odd_path,
                    b"{}" if method == "POST" else b"",
                    dict(own),
                )
            )
    return cases
