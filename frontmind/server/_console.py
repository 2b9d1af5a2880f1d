"""The console: a single-page web app served by the daemon itself at /ui/.

Its files ship inside the package (frontmind/server/console/static/, package data), plain ES
modules with no build step. The page holds no data: it asks for the token and reads
everything through the token-guarded API, so the files themselves are public. Any
/ui/ path that names no file (a deep link such as /ui/continuums/c1) is answered with
index.html, and the page's router draws the view.
"""

from __future__ import annotations

from pathlib import Path

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Match, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import Receive, Scope, Send

__all__ = ["CONSOLE_PREFIX", "console_routes", "is_console_path"]

CONSOLE_PREFIX = "/ui"
STATIC_DIR = Path(__file__).resolve().parent / "console" / "static"

# Scripts, styles and API calls only from the daemon itself; SVG is drawn through the DOM.
_HEADERS = {
    "content-security-policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:;"
        " connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-cache",
}


def is_console_path(path: str) -> bool:
    """True for the console's files, which need no token (they hold no data)."""
    return path == CONSOLE_PREFIX or path.startswith(CONSOLE_PREFIX + "/")


def _below(scope: Scope) -> str:
    """The request's path below the mount that answers it (`root_path`, a prefix the
    browser's URL has too)."""
    path: str = scope["path"]
    return path.removeprefix(scope.get("root_path", ""))


class _ConsoleFiles(StaticFiles):
    """StaticFiles that answers an extensionless path it has no file for with the page."""

    def __init__(self) -> None:
        super().__init__(directory=STATIC_DIR, html=True)
        self._page = (STATIC_DIR / "index.html").read_text()

    async def get_response(self, path: str, scope: Scope) -> Response:
        if path in (".", "index.html") and scope["method"] in ("GET", "HEAD"):
            return self._page_at(scope)
        try:
            response = await super().get_response(path, scope)
        except HTTPException as exc:
            if exc.status_code != 404 or "." in path.rsplit("/", 1)[-1]:
                raise
            return self._page_at(scope)
        response.headers.update(_HEADERS)
        return response

    def _page_at(self, scope: Scope) -> Response:
        """The page, its files named relative to the path it answers: behind a proxy
        that serves the daemon under a prefix of its own (/fm/ui/continuums/c1 for
        /ui/continuums/c1), an absolute /ui/app.js would name the proxy's root. The
        path below the console's mount is the browser's too, whatever the prefix."""
        up = "../" * _below(scope).removeprefix("/").count("/")
        return HTMLResponse(
            self._page.replace("{ui}", up or "./"),
            headers=_HEADERS,
            media_type="text/html",
        )


class _ToThePage(BaseRoute):
    """/ui itself, redirected to /ui/ by a relative Location, `ui/` (RFC 9110 §10.2.2:
    resolved against the URL the browser asked for). The router's own redirect was an
    absolute URL built from the request the daemon saw: behind a proxy that serves the
    daemon under a prefix of its own (https://host/fm/, the prefix stripped), it named
    the host's /ui/, outside the prefix. The browser's /fm/ui resolves `ui/` to /fm/ui/,
    whatever the prefix. A route of its own, not a `Route`: it is none of the API's."""

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        if scope["type"] != "http" or _below(scope) != CONSOLE_PREFIX:
            return Match.NONE, {}
        return (Match.FULL if scope["method"] in ("GET", "HEAD") else Match.PARTIAL), {}

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] not in ("GET", "HEAD"):
            raise HTTPException(405)  # the daemon's answer names the methods allowed
        query = scope["query_string"].decode("latin-1")
        target = f"ui/?{query}" if query else "ui/"
        await RedirectResponse(target, headers=_HEADERS)(scope, receive, send)


def console_routes(*, token_required: bool) -> list[BaseRoute]:
    """The routes to add to the daemon's app: a mount at /ui, and /ui itself redirected
    to it, so the console stays out of the API's routes and their description.

    /ui/settings.json tells the page whether to ask for a token before its first call,
    so a daemon with a token never has to refuse the page's requests to say so.
    """
    settings = {"token_required": token_required}

    async def settings_route(request: Request) -> Response:
        return JSONResponse(settings, headers=_HEADERS)

    files = _ConsoleFiles()
    return [
        _ToThePage(),
        Mount(
            CONSOLE_PREFIX,
            routes=[
                Route("/settings.json", settings_route, methods=["GET"]),
                Mount("", app=files),
            ],
        ),
    ]
