"""User tokens: made here, shown once, stored only as their SHA-256 digest."""

from __future__ import annotations

import hashlib
import secrets

__all__ = ["new_token", "token_digest"]


def new_token() -> str:
    """A fresh bearer token: 32 random bytes, URL-safe (43 characters)."""
    return secrets.token_urlsafe(32)


def token_digest(token: str) -> str:
    """What storage keeps of a token. A plain SHA-256 is enough: the token is 256 random
    bits, so there is nothing to brute-force that a slow hash would protect."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()
