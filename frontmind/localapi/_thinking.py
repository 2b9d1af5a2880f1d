"""Extended thinking: the thinking configuration and the signatures on thinking blocks.

A thinking block's `signature` is base64 of a marker, an HMAC-SHA256 tag (keyed by the
server's secret), the block's binding and the thinking text, so the server can tell a
block it wrote from an altered one, even when the text was omitted from the reply
(`display: "omitted"`). The binding records what the block was written after (its
prefix's digest and the thinking block before it: `_binding.py`, preserved thinking's
prefix check). A `redacted_thinking` block's `data` is built the same way; so is a
`compaction` block's `signature`. A thinking or redacted_thinking block also records
the model that wrote it (marker `FMLA3`): preserved thinking's model check drops a block
the requested model cannot read (`_prepare.py`). Signatures of the earlier formats (no
model, marker `FMLA2`; no binding either, `FMLA1`) still verify: stored conversations
from earlier releases replay. A signature
with none of these markers was made elsewhere (the live API signs with keys no one else
holds): by default it is taken as opaque, as the API takes its own, so a recorded live
conversation replays offline; `verify_foreign_signatures` refuses it instead
("Invalid `signature`").
The default secret is a fixed constant, so signatures survive a restart of the local
API (a stored conversation with thinking replays after `frontmind serve --offline`
restarts), as the API's do.

Thinking is on when the request says `enabled` (with `budget_tokens`) or `adaptive`, or
when it says nothing and the model thinks by default. Docs: extended thinking,
adaptive thinking.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from typing import Any

__all__ = [
    "BINDING_BYTES",
    "DEFAULT_SECRET",
    "MIN_BUDGET_TOKENS",
    "REDACTED_TRIGGER",
    "ThinkingSigner",
    "effective_thinking",
]

DEFAULT_SECRET = b"frontmind-localapi-thinking-v1"
MIN_BUDGET_TOKENS = 1024
# The documented test string that makes the API answer with a redacted_thinking block.
REDACTED_TRIGGER = (
    "ANTHROPIC_MAGIC_STRING_TRIGGER_REDACTED_THINKING_"
    "46C9A13E193C177646C7398A98432ECCCE4C1253D5E2D82641AC0E52CC2876CB"
)
_TAG = 32
_MARK = b"FMLA1"  # what started every signature this server made before bindings
_MARK2 = b"FMLA2"  # a signature with a binding: marker, tag, binding, text
_MARK3 = b"FMLA3"  # and the model: marker, tag, model's length (a byte), model, binding, text
BINDING_BYTES = 32


def effective_thinking(thinking: dict[str, Any] | None, thinks_by_default: bool) -> dict[str, Any]:
    """The thinking configuration in force, as a small canonical dict."""
    if thinking is None:
        return {"type": "adaptive"} if thinks_by_default else {"type": "disabled"}
    kind = thinking.get("type")
    if kind == "enabled":
        return {"type": "enabled", "budget_tokens": thinking.get("budget_tokens")}
    if kind == "adaptive":
        return {"type": "adaptive"}
    return {"type": "disabled"}


class ThinkingSigner:
    def __init__(self, secret: bytes = DEFAULT_SECRET) -> None:
        self._secret = secret

    def _tag(self, kind: bytes, text: bytes) -> bytes:
        return hmac.new(self._secret, kind + b"\0" + text, hashlib.sha256).digest()

    def _seal(self, kind: bytes, text: str, binding: bytes, model: str = "") -> str:
        if not model:
            body = binding + text.encode()
            return base64.b64encode(_MARK2 + self._tag(kind, body) + body).decode()
        name = model.encode()[:255]
        body = bytes([len(name)]) + name + binding + text.encode()
        return base64.b64encode(_MARK3 + self._tag(kind, body) + body).decode()

    def sign(self, thinking: str, binding: bytes = bytes(BINDING_BYTES), model: str = "") -> str:
        """A thinking block's signature; `model`: the model that wrote it."""
        return self._seal(b"thinking", thinking, binding, model)

    def redact(self, thinking: str, binding: bytes = bytes(BINDING_BYTES), model: str = "") -> str:
        return self._seal(b"redacted", thinking, binding, model)

    def sign_compaction(self, content: str) -> str:
        return self._seal(b"compaction", content, bytes(BINDING_BYTES))

    @staticmethod
    def made_here(encoded: str) -> bool:
        """Whether a signature (or redacted data) carries this server's marker."""
        try:
            raw = base64.b64decode(encoded[:12], validate=True)
        except (binascii.Error, ValueError):
            return False
        return raw.startswith((_MARK, _MARK2, _MARK3))

    def _open(self, kind: bytes, encoded: str) -> tuple[str, bytes | None, str | None] | None:
        """(text, binding, model; None where the format has none), or None when the
        signature is not intact."""
        try:
            raw = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            return None
        mark = raw[: len(_MARK)]
        if mark not in (_MARK, _MARK2, _MARK3):
            return None
        raw = raw[len(_MARK) :]
        tag, body = raw[:_TAG], raw[_TAG:]
        if len(tag) < _TAG or not hmac.compare_digest(tag, self._tag(kind, body)):
            return None
        model: str | None = None
        if mark == _MARK3:
            if not body or len(body) < 1 + body[0]:
                return None
            named, body = body[1 : 1 + body[0]], body[1 + body[0] :]
            try:
                model = named.decode()
            except UnicodeDecodeError:
                return None
        binding: bytes | None = None
        if mark != _MARK:
            if len(body) < BINDING_BYTES:
                return None
            binding, body = body[:BINDING_BYTES], body[BINDING_BYTES:]
        try:
            return body.decode(), binding, model
        except UnicodeDecodeError:
            return None

    def thinking_text(self, thinking: str, signature: str) -> str | None:
        """The signed text when the block is unaltered (its text as signed, or omitted)."""
        opened = self._open(b"thinking", signature)
        if opened is None or thinking not in ("", opened[0]):
            return None
        return opened[0]

    def redacted_text(self, data: str) -> str | None:
        opened = self._open(b"redacted", data)
        return None if opened is None else opened[0]

    def compaction_intact(self, content: str | None, signature: str) -> bool:
        opened = self._open(b"compaction", signature)
        return opened is not None and opened[0] == (content or "")

    def binding(self, kind: str, encoded: str) -> bytes | None:
        """The binding a block of ours records (`kind`: "thinking" or "redacted"), or
        None (another server's block, or one of the first format)."""
        opened = self._open(kind.encode(), encoded)
        return None if opened is None else opened[1]

    def producer(self, kind: str, encoded: str) -> str | None:
        """The model that wrote a block of ours, or None (another server's block, or one
        of a format before models were recorded)."""
        opened = self._open(kind.encode(), encoded)
        return None if opened is None else opened[2]
