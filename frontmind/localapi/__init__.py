"""A local Anthropic Messages API server with a faithful prompt-cache simulator.

Part of the product: the tests, the offline demo, `frontmind serve --offline` and the
benchmarks all talk to it through the real `anthropic` SDK, and users run it
(`frontmind local-api`) to try Frontmind and test their own trinkets offline.
"""

from ._app import RecordedRequest
from ._cache import LOOKBACK, min_cacheable_tokens
from ._clock import Clock, ManualClock, MonotonicClock
from ._faults import DropConnection, Fault, Latency, MidStreamError, Stall, StatusFault
from ._models import MODELS, ModelInfo, find_model
from ._responder import (
    DefaultResponder,
    Reply,
    ReplyRawBlock,
    ReplyText,
    ReplyThinking,
    ReplyToolUse,
    Responder,
    ScriptedResponder,
)
from ._schema import MessagesRequest, TextBlock, ToolResultBlock
from ._server import LocalMessagesAPI
from ._thinking import REDACTED_TRIGGER, ThinkingSigner
from ._tokens import BLOCK_FRAMING_TOKENS, IMAGE_TOKENS, estimate_text_tokens

__all__ = [
    "BLOCK_FRAMING_TOKENS",
    "IMAGE_TOKENS",
    "LOOKBACK",
    "MODELS",
    "REDACTED_TRIGGER",
    "Clock",
    "DefaultResponder",
    "DropConnection",
    "Fault",
    "Latency",
    "LocalMessagesAPI",
    "ManualClock",
    "MessagesRequest",
    "MidStreamError",
    "ModelInfo",
    "MonotonicClock",
    "RecordedRequest",
    "Reply",
    "ReplyRawBlock",
    "ReplyText",
    "ReplyThinking",
    "ReplyToolUse",
    "Responder",
    "ScriptedResponder",
    "Stall",
    "StatusFault",
    "TextBlock",
    "ThinkingSigner",
    "ToolResultBlock",
    "estimate_text_tokens",
    "find_model",
    "min_cacheable_tokens",
]
