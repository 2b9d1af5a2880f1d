"""Errors of the process edges (config, daemon, CLI), under one root."""

from __future__ import annotations

__all__ = ["ConfigError", "EdgeError"]


class EdgeError(Exception):
    """Root of every error raised by the process edges."""


class ConfigError(EdgeError):
    """The configuration file or environment is wrong; the message names the key."""
