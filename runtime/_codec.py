"""The msgpack codec behind encoded-mode mailboxes.

Encoded mode pushes every message and reply through msgpack bytes, exactly as it would
travel between processes; running the test suite in both modes proves that every
message type round-trips. Decoders are cached per type because building one costs far
more than using it.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import msgspec

from ._exceptions import CodecError

__all__ = ["decode", "encode"]

_encoder = msgspec.msgpack.Encoder()


@lru_cache(maxsize=256)
def _decoder(type_: Any) -> msgspec.msgpack.Decoder[Any]:
    return msgspec.msgpack.Decoder(type_)


def encode(value: object) -> bytes:
    try:
        return _encoder.encode(value)
    except (TypeError, msgspec.EncodeError) as exc:
        raise CodecError(f"cannot encode {type(value).__name__}: {exc}") from exc


def decode(data: bytes, type_: Any) -> Any:
    try:
        return _decoder(type_).decode(data)
    except msgspec.DecodeError as exc:
        raise CodecError(f"cannot decode a {type_!r}: {exc}") from exc
