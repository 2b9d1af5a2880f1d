"""Where Frontmind keeps its data when not told: read by the config and by the command
line, whose `--help` shows it without loading the config's settings (and the actors
behind them)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["data_dir_path", "default_data_dir"]


def default_data_dir() -> Path:
    configured = os.environ.get("FRONTMIND_DATA_DIR")
    return data_dir_path(configured) if configured else Path.home() / ".frontmind"


def data_dir_path(given: str) -> Path:
    """A data directory as given, with a leading `~` taken as the home directory: no
    shell expands it in a service's environment (systemd's `Environment=`, an env
    file) or after `--data-dir=`, and the store went to a directory named `~` in the
    working directory instead, with nothing said."""
    try:
        return Path(given).expanduser()
    except RuntimeError:  # `~name` of no such user, or no home: the path as it was given
        return Path(given)
