"""The process edges: configuration, the library API, the daemon, the CLI, the demo.

This layer sits on top of everything else (kernel, storage, actors); nothing imports it.
The local Messages API server is in `runtime.edges.localapi`.
"""

from __future__ import annotations

from ._config import (
    Config,
    CustomTrinket,
    OfflineConfig,
    ServerConfig,
    default_data_dir,
    load_config,
)
from ._daemon import build_app, serve
from ._demo import run_demo
from ._exceptions import ConfigError, EdgeError
from ._frontmind import Frontmind, NoModel, TurnStream

__all__ = [
    "Config",
    "ConfigError",
    "CustomTrinket",
    "EdgeError",
    "Frontmind",
    "NoModel",
    "OfflineConfig",
    "ServerConfig",
    "TurnStream",
    "build_app",
    "default_data_dir",
    "load_config",
    "main",
    "run_demo",
    "serve",
]


def main() -> None:
    """The `frontmind` console script."""
    from ._cli import main as cli_main

    cli_main()
