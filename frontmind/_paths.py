"""Where Frontmind keeps its data when not told: read by the config and by the command
line, whose `--help` shows it without loading the config's settings (and the actors
behind them)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["default_data_dir"]


def default_data_dir() -> Path:
    configured = os.environ.get("FRONTMIND_DATA_DIR")
    return Path(configured) if configured else Path.home() / ".frontmind"
