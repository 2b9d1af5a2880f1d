"""The `frontmind` command: serve, chat, demo, inspect, stats, simulate, users, export,
import, migrate, backup, local-api.

`main()` is the console script's entry point (and `python -m frontmind`'s). Each command
loads only what it needs, so `frontmind --version` loads neither the model client nor
the server.
"""

from ._main import main

__all__ = ["main"]
