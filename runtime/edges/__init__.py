"""The process edges: configuration, the daemon, the CLI, the local Messages API.

This layer sits on top of everything else (kernel, storage, actors); nothing imports it.
"""

from __future__ import annotations

__all__ = ["main"]


def main() -> None:
    """The `frontmind` console script."""
    from ._cli import main as cli_main

    cli_main()
