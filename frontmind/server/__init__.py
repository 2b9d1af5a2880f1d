"""The daemon: Frontmind over HTTP, for operators.

`frontmind serve` runs it; `build_app(fm)` gives the same routes as an ASGI app over a
`Frontmind` you opened yourself (to mount it in your own server), and `serve(...)` runs
it as the CLI does. Here too live what only the daemon needs: the edge guard, the
hardened uvicorn server, the OpenAPI description, the Prometheus metrics and the console.
Importing `frontmind` does not load any of it.
"""

from ._daemon import build_app, serve

__all__ = ["build_app", "serve"]
