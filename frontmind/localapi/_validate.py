"""Request validation with the API's error shapes and messages."""

from __future__ import annotations

import re
from collections.abc import Container, Iterator, Mapping, Sequence
from typing import Any, ClassVar, TypeVar

import msgspec

from ._images import MAX_EDGE_MANY, MAX_IMAGE_BYTES, ImageError, decode_image, max_edge
from ._models import MODELS, ModelInfo
from ._pdf import PdfError, pdf_pages, pdf_tokens
from ._schema import (
    ASSISTANT_BLOCKS,
    BETA_BLOCKS,
    BETA_ONLY_FIELDS,
    SERVER_RESULT_BLOCKS,
    SERVER_TOOL_BLOCKS,
    USER_ONLY_BLOCKS,
    Block,
    CacheControl,
    CompactionBlock,
    CountTokensRequest,
    DocumentBlock,
    ImageBlock,
    MessageParam,
    MessagesRequest,
    RedactedThinkingBlock,
    ServerToolUseBlock,
    TextBlock,
    ThinkingBlock,
    ToolReferenceBlock,
    ToolResultBlock,
    ToolUseBlock,
    blocks_of,
    has_thinking,
)
from ._thinking import MIN_BUDGET_TOKENS, effective_thinking

__all__ = [
    "VERSIONS",
    "ApiError",
    "blocks_of",
    "cache_controls",
    "decode_request",
    "merge_consecutive",
    "require_model",
    "validate",
    "validation_message",
]

VERSIONS = frozenset({"2023-06-01", "2026-10-21"})
_SAMPLING_REJECTED_FROM = "2026-10-21"
MAX_BREAKPOINTS = 4
MAX_BODY_BYTES = 32 * 1024 * 1024
# A client tool's name, as the live API's 400 quotes it ("tools.16.custom.name: String
# should match pattern '^[a-zA-Z0-9_-]{1,128}$'", modelcontextprotocol#1345; the tool-use
# docs give {1,64}, which older reports quote, and which Frontmind keeps to itself).
_TOOL_NAME = re.compile(r"[a-zA-Z0-9_-]{1,128}")
# A client tool's top-level property names, as the live API's 400 quotes it ("tools.22.
# custom.input_schema.properties: Property keys should match pattern
# '^[a-zA-Z0-9_.-]{1,64}$'", twilio-labs/mcp#49 and #56, freee/freee-mcp#15: MCP servers
# whose parameters are named after an HTTP API's, as `StartTime<`). Only the top level is
# checked (decocms/studio#6874).
_PROPERTY_KEY = re.compile(r"[a-zA-Z0-9_.-]{1,64}")
# Tool input schemas found valid JSON Schema, by their JSON (`_check_json_schema`).
_VALID_SCHEMAS: set[bytes] = set()
_VALID_SCHEMAS_KEPT = 4096
# A tool_use block's id, as the live API's 400 quotes its pattern (`_check_tool_pairs`).
_TOOL_USE_ID = re.compile(r"[a-zA-Z0-9_-]+")
_USER_ID_MAX = 256
# Something shaped like an email address (the user_id check in `validate`).
_EMAIL = re.compile(r"[^\s@]+@[^\s@]+\.[^\s@]+")
_IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})

_R = TypeVar("_R", MessagesRequest, CountTokensRequest)


class ApiError(Exception):
    """An error answered with the API's shape: {"type": "error", "error": {...}}."""

    # Docs: API errors, "HTTP errors" (https://platform.claude.com/docs/en/api/errors):
    # each status's error.type; invalid_request_error "may also be used for other 4XX
    # status codes not listed".
    _TYPES: ClassVar[dict[int, str]] = {
        400: "invalid_request_error",
        401: "authentication_error",
        402: "billing_error",
        403: "permission_error",
        404: "not_found_error",
        405: "invalid_request_error",
        409: "conflict_error",
        413: "request_too_large",
        429: "rate_limit_error",
        500: "api_error",
        504: "timeout_error",
        529: "overloaded_error",
    }

    def __init__(
        self,
        status: int,
        message: str,
        headers: dict[str, str] | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        fallback = "invalid_request_error" if 400 <= status < 500 else "api_error"
        self.type = self._TYPES.get(status, fallback)
        self.message = message
        self.headers = headers or {}
        self.details = details


_AT = re.compile(r"^(?P<what>.*?)(?: - at `\$(?P<path>[^`]*)`)?$")
_UNKNOWN = re.compile(r"^Object contains unknown field `(?P<field>[^`]+)`$")
_MISSING = re.compile(r"^Object missing required field `(?P<field>[^`]+)`$")


def _api_path(path: str) -> str:
    """msgspec's `$.messages[0].content` as the API writes it: `messages.0.content`."""
    return re.sub(r"\[(\d+)\]", r".\1", path).lstrip(".")


def validation_message(error: str) -> str:
    """msgspec's message in the API's words: `<field path>: <what is wrong>`."""
    match = _AT.match(error)
    assert match is not None
    what, path = match.group("what"), _api_path(match.group("path") or "")
    unknown, missing = _UNKNOWN.match(what), _MISSING.match(what)
    if unknown is not None:
        field = ".".join(p for p in (path, unknown.group("field")) if p)
        return f"{field}: Extra inputs are not permitted"
    if missing is not None:
        field = ".".join(p for p in (path, missing.group("field")) if p)
        return f"{field}: Field required"
    return f"{path}: {what}" if path else what


def decode_request(body: bytes, type_: type[_R]) -> _R:
    if len(body) > MAX_BODY_BYTES:
        # Docs: API errors (https://platform.claude.com/docs/en/api/errors), "413 -
        # request_too_large: Request exceeds the maximum allowed number of bytes", the
        # message the live 413 carries (its body as benchr.org's error page quotes it).
        raise ApiError(413, "Request exceeds the maximum allowed number of bytes.")
    try:
        return msgspec.json.decode(body, type=type_)
    except msgspec.ValidationError as invalid:
        # Malformed JSON is reported first, wherever it is, as the API parses before it
        # validates (and a typed decode stops at the first field of the wrong type).
        try:
            msgspec.json.decode(body)
        except msgspec.DecodeError as exc:
            raise ApiError(400, f"Malformed JSON in the request body: {exc}") from None
        raise ApiError(400, validation_message(str(invalid))) from None
    except msgspec.DecodeError as exc:
        raise ApiError(400, f"Malformed JSON in the request body: {exc}") from None


def require_model(name: str, models: Mapping[str, ModelInfo] = MODELS) -> ModelInfo:
    """The served model of this name (`models`: the rows this server serves)."""
    if not name:
        raise ApiError(400, "model: Field required")
    model = models.get(name)
    if model is None:  # unknown or retired: the API's 404
        raise ApiError(404, f"model: {name}")
    return model


def merge_consecutive(messages: list[MessageParam]) -> list[MessageParam]:
    """Consecutive same-role messages become one turn, as the API does first of all."""
    merged: list[MessageParam] = []
    for message in messages:
        if merged and merged[-1].role == message.role:
            merged[-1] = MessageParam(message.role, [*blocks_of(merged[-1]), *blocks_of(message)])
        else:
            merged.append(message)
    return merged


def cache_controls(request: MessagesRequest) -> Iterator[tuple[str, CacheControl]]:
    """(field path, control) for every explicit breakpoint, in processing order."""
    for i, tool in enumerate(request.tools or ()):
        if tool.cache_control is not None:
            yield f"tools.{i}.cache_control", tool.cache_control
    if isinstance(request.system, list):
        for i, block in enumerate(request.system):
            if block.cache_control is not None:
                yield f"system.{i}.cache_control", block.cache_control
    for i, message in enumerate(request.messages):
        if isinstance(message.content, list):
            for j, part in enumerate(message.content):
                control = getattr(part, "cache_control", None)
                if control is not None:
                    yield f"messages.{i}.content.{j}.cache_control", control


def _text_passes(text: str) -> bool:
    return bool(text) and not text.isspace()


def _check_text(text: str, where: str, cached: bool = False) -> None:
    if _text_passes(text):
        return
    if not text and cached:
        # The live API's words for an empty text block with a breakpoint, which it names
        # before the emptiness itself ("messages.29.content.0.text: cache_control cannot
        # be set for empty text blocks", NousResearch/hermes-agent#1216; anthropics/
        # claude-code#50082 and #54013).
        raise ApiError(400, f"{where}.text: cache_control cannot be set for empty text blocks")
    if not text:
        raise ApiError(400, f"{where}: text content blocks must be non-empty")
    raise ApiError(400, f"{where}: text content blocks must contain non-whitespace text")


def _check_source(block: ImageBlock | DocumentBlock, where: str, images: int) -> None:
    """Image and document sources: base64, URL or file (documents also text/content)."""
    source = block.source
    kind = source.get("type")
    allowed = {"base64", "url", "file"}
    if isinstance(block, DocumentBlock):
        allowed |= {"text", "content"}
    if kind not in allowed:
        expected = ", ".join(sorted(allowed))
        raise ApiError(400, f"{where}.source.type: Input should be one of {expected}")
    required = {
        "base64": ("media_type", "data"),
        "url": ("url",),
        "file": ("file_id",),
        "text": ("media_type", "data"),
        "content": ("content",),
    }[kind]
    for name in required:
        if source.get(name) in (None, ""):
            raise ApiError(400, f"{where}.source.{name}: Field required")
    if isinstance(block, DocumentBlock) and kind in ("base64", "text"):
        # Docs: PDF support and Citations ("Plain text documents": media_type "text/plain");
        # the API reference's Base64PDFSource and PlainTextSource each take one media_type
        # (the SDK's Base64PDFSourceParam and PlainTextSourceParam). The wording is the
        # image check's, chosen (no public report quotes this one).
        expected = "application/pdf" if kind == "base64" else "text/plain"
        if source.get("media_type") != expected:
            raise ApiError(400, f"{where}.source.media_type: Input should be '{expected}'")
    if isinstance(block, ImageBlock) and kind == "base64":
        media = source.get("media_type")
        if media not in _IMAGE_TYPES:
            raise ApiError(
                400,
                f"{where}.source.media_type: Input should be 'image/jpeg', 'image/png', "
                "'image/gif' or 'image/webp'",
            )
        # Docs: vision, "Image size" and "FAQ" (5 MB per image, 8000 px a side, 2000 px
        # when a request holds more than 20 images; the data must be the format named).
        data = str(source.get("data"))
        if len(data) > MAX_IMAGE_BYTES:
            # The 5 MB are of the base64 text, not of the image it decodes to: Claude
            # Code's constants ("API_IMAGE_MAX_BASE64_SIZE", sourced from the API's own
            # schemas): "The API rejects images where the base64 string length exceeds
            # this value. Note: This is the base64 length, NOT raw bytes" (a public copy:
            # huggingface.co/chenbhao/codev, src/constants/apiLimits.ts). The live 400's
            # words: "messages.168.content.0.tool_result.content.1.image.source.base64:
            # image exceeds 5 MB maximum: 5649924 bytes > 5242880 bytes" (earendil-works/
            # pi#424, gptme/gptme#185). An image of 4 MB is some 5.3 MB of base64.
            raise ApiError(
                400,
                f"{where}.source.base64: image exceeds 5 MB maximum: {len(data)} bytes > "
                f"{MAX_IMAGE_BYTES} bytes",
            )
        try:
            width, height = decode_image(data, str(media))
        except ImageError as exc:
            raise ApiError(400, f"{where}.source.base64.data: {exc}") from None
        limit = max_edge(images)
        if max(width, height) > limit:
            # The live 400's words: "messages.7.content.2.image.source.base64.data: At
            # least one of the image dimensions exceed max allowed size: 8000 pixels"
            # (microsoft/vscode-copilot-chat#4688) and, past 20 images, "... exceed max
            # allowed size for many-image requests: 2000 pixels" (quoted alike by many
            # public clients that match it, e.g. in their tests of error classifiers).
            many = " for many-image requests" if limit == MAX_EDGE_MANY else ""
            raise ApiError(
                400,
                f"{where}.source.base64.data: At least one of the image dimensions exceed max "
                f"allowed size{many}: {limit} pixels",
            )
    if (
        isinstance(block, DocumentBlock)
        and kind == "base64"
        and source.get("media_type") == "application/pdf"
    ):
        try:  # docs: PDF support (a valid PDF; 32 MB per request, 100 pages)
            pdf_tokens(str(source.get("data")))
        except PdfError as exc:
            raise ApiError(400, f"{where}.source.base64.data: {exc}") from None


def _check_block(
    block: Block | ToolReferenceBlock, role: str, where: str, images: int, beta: bool
) -> None:
    if isinstance(block, TextBlock):
        _check_text(block.text, where, block.cache_control is not None)
    elif isinstance(block, ImageBlock | DocumentBlock):
        _check_source(block, where, images)
    elif isinstance(block, ToolResultBlock) and isinstance(block.content, list):
        for k, part in enumerate(block.content):
            _check_block(part, role, f"{where}.content.{k}", images, beta)
    elif isinstance(block, ThinkingBlock | RedactedThinkingBlock) and block.cache_control:
        # Docs: prompt caching, "Caching with thinking blocks": thinking blocks cannot
        # be marked with cache_control (they are cached as part of the turn).
        raise ApiError(
            400,
            f"{where}.cache_control: thinking blocks cannot be marked with cache_control",
        )
    if not beta and isinstance(block, BETA_BLOCKS):
        # The non-beta Messages API has no such block type (the beta client's types do).
        raise ApiError(
            400,
            f"{where}: Input tag '{_type_of(block)}' found using 'type' does not match any of "
            "the expected tags; it is a beta block type: send it with the beta client "
            "(`client.beta.messages`)",
        )
    if role == "assistant" and isinstance(block, USER_ONLY_BLOCKS):
        raise ApiError(400, f"{where}: {_type_of(block)} blocks belong to user turns")
    if role != "assistant" and isinstance(block, ASSISTANT_BLOCKS):
        raise ApiError(400, f"{where}: {_type_of(block)} blocks belong to assistant turns")


def _images_in(block: Block) -> int:
    if isinstance(block, ImageBlock):
        return 1
    if isinstance(block, ToolResultBlock) and isinstance(block.content, list):
        return sum(isinstance(part, ImageBlock) for part in block.content)
    return 0


def _pages_in(block: Block | ToolReferenceBlock) -> int:
    """A block's PDF pages as the media count takes them: a base64 PDF's pages; one for
    a PDF by URL or file (its pages are not read here)."""
    if isinstance(block, ToolResultBlock) and isinstance(block.content, list):
        return sum(_pages_in(part) for part in block.content)
    if not isinstance(block, DocumentBlock):
        return 0
    source = block.source
    if source.get("type") in ("url", "file"):
        return 1
    if source.get("type") != "base64" or source.get("media_type") != "application/pdf":
        return 0
    try:
        return pdf_pages(str(source.get("data")))
    except PdfError:
        return 0  # refused as it is checked


def _check_media(messages: list[MessageParam], images: int, model: ModelInfo) -> None:
    """Docs: vision, "General limits": 100 images a request for a model of a 200k-token
    window, 600 for the others (`max_media` in models.toml). The live 400 counts a PDF's
    pages with the images: "Too much media: 0 document pages + 103 images > 100"
    (reported in anthropics/claude-code#3397 and #19822)."""
    pages = sum(_pages_in(block) for message in messages for block in blocks_of(message))
    if images + pages > model.max_media:
        raise ApiError(
            400,
            f"Too much media: {pages} document pages + {images} images > {model.max_media}",
        )


def _type_of(block: Block | ToolReferenceBlock) -> str:
    return str(type(block).__struct_config__.tag)


# Docs: extended thinking, "Interleaved thinking": with this beta, budget_tokens "can
# exceed the max_tokens parameter, as it represents the total budget across all thinking
# blocks within one assistant turn"; "when using interleaved thinking with tools ... the
# token limit becomes your entire context window"
# (https://docs.anthropic.com/en/docs/build-with-claude/extended-thinking#interleaved-thinking).
INTERLEAVED_BETA = "interleaved-thinking-2025-05-14"


def _check_thinking_config(
    request: MessagesRequest, model: ModelInfo, betas: frozenset[str]
) -> None:
    thinking = request.thinking
    if thinking is None:
        return
    kind = thinking.get("type")
    if kind not in ("enabled", "disabled", "adaptive", "between_tools"):
        raise ApiError(
            400,
            "thinking.type: Input should be 'enabled', 'disabled', 'adaptive' or 'between_tools'",
        )
    # Docs: thinking, "Controlling thinking display" (https://platform.claude.com/docs/en/
    # build-with-claude/thinking#controlling-thinking-display): display is "summarized" or
    # "omitted" (the SDK's ThinkingConfigEnabledParam and ThinkingConfigAdaptiveParam type
    # it so); pydantic's words for a literal.
    display = thinking.get("display")
    if kind in ("enabled", "adaptive") and display not in (None, "summarized", "omitted"):
        raise ApiError(400, f"thinking.{kind}.display: Input should be 'summarized' or 'omitted'")
    if kind == "enabled":
        budget = thinking.get("budget_tokens")
        if not isinstance(budget, int):
            raise ApiError(400, "thinking.enabled.budget_tokens: Field required")
        if budget < MIN_BUDGET_TOKENS:
            raise ApiError(
                400,
                f"thinking.enabled.budget_tokens: Input should be greater than or equal to "
                f"{MIN_BUDGET_TOKENS}",
            )
        if INTERLEAVED_BETA in betas and request.tools:
            if budget >= model.context_window:
                raise ApiError(
                    400,
                    f"thinking.enabled.budget_tokens: {budget} must be less than the model's "
                    f"context window ({model.context_window}) with interleaved thinking",
                )
        elif budget >= request.max_tokens:
            raise ApiError(400, "`max_tokens` must be greater than `thinking.budget_tokens`.")


def _effort(request: MessagesRequest) -> str | None:
    effort = (request.output_config or {}).get("effort")
    return str(effort) if effort is not None else None


def _check_model_rules(request: MessagesRequest, model: ModelInfo) -> None:
    """What this model accepts, from its row in models.toml (each rule's docs page is in
    the row's sources): thinking types, effort levels, forced tool choice, max_tokens."""
    # Docs: "Troubleshooting thinking", table "Thinking support, defaults, and rejected
    # configurations by model".
    kind = (request.thinking or {}).get("type")
    effort = _effort(request)
    if kind is not None and kind not in model.thinking_types:
        if kind == "enabled" or (kind == "disabled" and model.thinking_default == "always"):
            # The API's words, as "What's new in Claude Opus 5.5", "Thinking can't be
            # disabled" quotes them for both (https://platform.claude.com/docs/en/models/
            # opus-5-5/whats-new-opus-5-5#thinking-cant-be-disabled).
            hint = (
                'Use "thinking.type.adaptive" and "output_config.effort" to control '
                "thinking behavior."
            )
        elif kind == "adaptive":
            hint = 'Use "thinking.type.enabled" with "budget_tokens".'
        else:
            hint = "Accepted: " + ", ".join(sorted(model.thinking_types)) + "."
        raise ApiError(400, f'"thinking.type.{kind}" is not supported for this model. {hint}')
    if kind is not None and effort in model.thinking_refused_at_effort.get(kind, ()):
        raise ApiError(
            400,
            f'"thinking.type.{kind}" is not supported with effort "{effort}" for this model. '
            'Use effort "high" or lower, or "thinking.type.adaptive".',
        )
    # Migration guide, "Migrating to Claude Opus 4.7": sampling parameters at a non-default
    # value are a 400 on Claude 4.7 and later, whatever the anthropic-version (the row's
    # sampling_params; its source says what "non-default" was taken to mean).
    if not model.sampling_params:
        for name, default in (("temperature", 1.0), ("top_p", 1.0), ("top_k", None)):
            value = getattr(request, name)
            if value is not None and value != default:
                raise ApiError(400, f"`{name}` is deprecated for this model.")
    # Docs: extended thinking, "Feature compatibility": thinking "isn't compatible with
    # temperature or top_k modifications"; with thinking on, top_p may be 0.95 to 1. The
    # messages are chosen (the docs quote none).
    if kind in ("enabled", "adaptive"):
        if request.temperature is not None and request.temperature != 1.0:
            raise ApiError(400, "`temperature` may only be set to 1 when thinking is enabled.")
        if request.top_k is not None:
            raise ApiError(400, "`top_k` is not supported when thinking is enabled.")
        if request.top_p is not None and not 0.95 <= request.top_p <= 1.0:
            raise ApiError(400, "`top_p` must be between 0.95 and 1 when thinking is enabled.")
    # Docs: effort, "Supported models" (Haiku 4.5 has none; xhigh and max per model).
    if effort is not None and effort not in model.effort_levels:
        if not model.effort_levels:
            # The live API's words, which clients match to retry without the effort (public
            # reports quoting Haiku 4.5's 400).
            raise ApiError(400, "This model does not support the effort parameter.")
        levels = ", ".join(f"'{e}'" for e in _EFFORT_ORDER if e in model.effort_levels)
        raise ApiError(
            400, f"output_config.effort: '{effort}' is not supported for this model ({levels})"
        )
    # Docs: Fable 5.1 migration guide and Opus 5.5 "Forced tool use is not supported".
    forced = (request.tool_choice or {}).get("type") in ("any", "tool")
    if forced and not model.forced_tool_choice:
        # The docs' words (What's new in Claude Opus 5.5, "Forced tool use is not
        # supported"), which clients match to fall back to auto.
        raise ApiError(400, 'tool_choice: type "tool" and "any" are not supported for this model.')
    # Docs: extended thinking, "Extended thinking with tool use": only auto and none.
    if forced and kind in ("enabled", "adaptive"):
        raise ApiError(400, "Thinking may not be enabled when tool_choice forces tool use.")
    # Docs: models overview, "Max output" per model.
    if model.max_output and request.max_tokens > model.max_output:
        raise ApiError(
            400,
            f"max_tokens: {request.max_tokens} > {model.max_output}, which is the maximum "
            f"allowed number of output tokens for {model.name}",
        )


_EFFORT_ORDER = ("low", "medium", "high", "xhigh", "max")
_TOOL_CHOICES = ("auto", "any", "tool", "none")


def _check_tool_loop_thinking(
    messages: list[MessageParam], request: MessagesRequest, model: ModelInfo
) -> None:
    """Docs: extended thinking, "Preserving thinking blocks": with thinking on, the
    assistant turn of the current tool loop (the last one, answered by tool results) must
    begin with its thinking block; and so must a final assistant turn (no prefill)."""
    thinking = effective_thinking(request.thinking, model.thinks_by_default)
    if thinking["type"] == "disabled" or (request.thinking or {}).get("type") is None:
        return
    spoken = [i for i, m in enumerate(messages) if m.role != "system"]
    final = messages[spoken[-1]] if spoken else None
    if final is not None and final.role == "assistant":
        # Docs: extended thinking, "Feature compatibility": "You cannot pre-fill responses
        # when thinking is enabled" (https://platform.claude.com/docs/en/build-with-claude/
        # extended-thinking#feature-compatibility). The live API answers a prefill with
        # the message below, naming the final assistant message (n8n-io/n8n#22550: a
        # text prefill, "messages.1.content.0.type: Expected thinking or
        # redacted_thinking, but found text"). A turn sent back to continue (pause_turn)
        # begins with its thinking, as the model wrote it.
        _require_opening_thinking(spoken[-1], final)
    for i in range(len(messages) - 1, 0, -1):
        message = messages[i]
        if message.role != "user":
            continue
        blocks = blocks_of(message)
        if not blocks or not all(isinstance(b, ToolResultBlock) for b in blocks):
            return  # the turn began with the user's own words: no tool loop open
        turn = messages[i - 1]
        if turn.role == "assistant":
            _require_opening_thinking(i - 1, turn)
        return


def _check_thinking_places(
    messages: list[MessageParam], request: MessagesRequest, model: ModelInfo
) -> None:
    """Where thinking blocks may stand in the history, in the live API's words (public
    reports quote each 400; the docs state the rules as the model writes its turns: a
    reply's thinking comes first, and a turn does not end on it):
    - an assistant message holding thinking begins with it: "messages.51.content.0: If an
      assistant message contains any thinking blocks, the first block must be thinking or
      redacted_thinking. Found text." (anthropics/claude-code#20705);
    - with thinking off, the final assistant message holds none: "messages.1.content.0:
      When thinking is disabled, an `assistant` message in the final position cannot
      contain `thinking`. To use thinking blocks, enable `thinking` in your request."
      (tailcallhq/forgecode#1853, on claude-sonnet-4-5);
    - the final assistant message does not end on one: "messages.1: The final block in an
      assistant message cannot be `thinking`." (tailcallhq/forgecode#2107; measured on
      claude-haiku-4-5 and claude-opus-5 in router-for-me/CLIProxyAPI#5322, where a
      thinking-only assistant turn before a user turn passes).
    A compaction block may open a turn (the context starts there), as elsewhere here."""
    thinking_types = ThinkingBlock | RedactedThinkingBlock
    for i, message in enumerate(messages):
        if message.role != "assistant":
            continue
        blocks = [b for b in blocks_of(message) if not isinstance(b, CompactionBlock)]
        if (
            blocks
            and not isinstance(blocks[0], thinking_types)
            and any(isinstance(b, thinking_types) for b in blocks)
        ):
            raise ApiError(
                400,
                f"messages.{i}.content.0: If an assistant message contains any thinking "
                f"blocks, the first block must be thinking or redacted_thinking. Found "
                f"{_type_of(blocks[0])}.",
            )
    spoken = [i for i, m in enumerate(messages) if m.role != "system"]
    index = spoken[-1]
    final = messages[index]
    if final.role != "assistant":
        return
    ending = blocks_of(final)
    marked = [j for j, b in enumerate(ending) if isinstance(b, thinking_types)]
    if not marked:
        return
    if effective_thinking(request.thinking, model.thinks_by_default)["type"] == "disabled":
        raise ApiError(
            400,
            f"messages.{index}.content.{marked[0]}: When thinking is disabled, an `assistant` "
            "message in the final position cannot contain `thinking`. To use thinking "
            "blocks, enable `thinking` in your request.",
        )
    if isinstance(ending[-1], thinking_types):
        raise ApiError(
            400, f"messages.{index}: The final block in an assistant message cannot be `thinking`."
        )


def _require_opening_thinking(index: int, turn: MessageParam) -> None:
    """The assistant turn at `index` begins with a thinking block, or the live API's 400.
    A compaction block may open the turn: the context starts there (compaction docs), and
    the thinking follows it."""
    opening = [b for b in blocks_of(turn) if not isinstance(b, CompactionBlock)]
    first = opening[0] if opening else None
    if first is None or isinstance(first, ThinkingBlock | RedactedThinkingBlock):
        return
    raise ApiError(
        400,
        f"messages.{index}.content.0.type: Expected `thinking` or `redacted_thinking`, "
        f"but found `{_type_of(first)}`. When `thinking` is enabled, a final `assistant` "
        "message must start with a thinking block (preceeding the lastmost set of "
        "`tool_use` and `tool_result` blocks). We recommend you include thinking blocks "
        "from previous turns. To avoid this requirement, disable `thinking`.",
    )


def _check_stop_sequences(sequences: Sequence[str]) -> None:
    """A stop sequence holds something besides whitespace. The API reference states no rule;
    the live API's 400s do, as public reports quote them: "stop_sequences: each stop
    sequence must be non-empty" (MegaGrindStone/mcp-web-ui#5, `["", "\\n"]`) and
    "stop_sequences: each stop sequence must contain non-whitespace" (BerriAI/litellm#3286,
    `["\\n"]`). An empty one is named first, wherever it stands (as in #5's request)."""
    for sequence in sequences:
        if not sequence:
            raise ApiError(400, "stop_sequences: each stop sequence must be non-empty")
    for sequence in sequences:
        if sequence.isspace():
            raise ApiError(400, "stop_sequences: each stop sequence must contain non-whitespace")


def _check_tools(request: MessagesRequest, model: ModelInfo) -> None:
    names: set[str] = set()
    for i, tool in enumerate(request.tools or ()):
        custom = tool.type in (None, "custom")
        if custom and _TOOL_NAME.fullmatch(tool.name) is None:
            raise ApiError(
                400, f"tools.{i}.custom.name: String should match pattern '^{_TOOL_NAME.pattern}$'"
            )
        if custom and tool.input_schema is None:
            raise ApiError(400, f"tools.{i}.custom.input_schema: Field required")
        if custom and tool.input_schema is not None:
            _check_input_schema(i, tool.input_schema)
        # A server tool version the model does not take (models.toml's server_tools; the
        # docs: "Supported models vary by tool and by tool version"). The wording is
        # chosen: the docs quote no message for it.
        kind = tool.type or ""
        if model.server_tool_family(kind) is not None and not model.takes_server_tool(kind):
            raise ApiError(
                400,
                f"tools.{i}: the tool type '{kind}' is not supported by the model '{model.name}'",
            )
        names.add(tool.name)
    if len(names) < len(request.tools or ()):
        # The live API's words (anthropics/claude-code#10687): a model could not tell
        # two tools of one name apart, so the request is refused, whatever their types.
        raise ApiError(400, "tools: Tool names must be unique.")
    # A forcing tool_choice needs something to force; auto and none pass without tools
    # (the live API's answers, probed in aakshintala/fiber, "tool_choice with no tools").
    choice = request.tool_choice or {}
    if request.tool_choice is not None and choice.get("type") not in _TOOL_CHOICES:
        # The API reference's tool_choice: an object of type auto, any, tool or none (the
        # SDK's ToolChoiceParam); the wording is pydantic's for a tagged union, as the
        # API's other schema messages are (chosen: no public report quotes this one).
        if choice.get("type") is None:
            raise ApiError(400, "tool_choice: Unable to extract tag using discriminator 'type'")
        expected = ", ".join(f"'{kind}'" for kind in _TOOL_CHOICES)
        raise ApiError(
            400,
            f"tool_choice: Input tag '{choice.get('type')}' found using 'type' does not match "
            f"any of the expected tags: {expected}",
        )
    if choice.get("type") == "tool" and not isinstance(choice.get("name"), str):
        raise ApiError(400, "tool_choice.tool.name: Field required")
    single = choice.get("disable_parallel_tool_use")
    if single is not None and not isinstance(single, bool):
        # The live API's schema: a boolean (tool_choice's auto, any and tool types).
        raise ApiError(
            400,
            f"tool_choice.{choice.get('type')}.disable_parallel_tool_use: "
            "Input should be a valid boolean",
        )
    if choice.get("type") == "any" and not names:
        raise ApiError(400, "tool_choice.any may only be specified while providing tools")
    if choice.get("type") == "tool" and choice.get("name") not in names:
        raise ApiError(400, f"Tool '{choice.get('name')}' not found in provided tools")


def _check_input_schema(index: int, schema: dict[str, Any]) -> None:
    """A client tool's schema is a JSON Schema object: its `type` is "object", no
    `oneOf`, `allOf` or `anyOf` stands at its top, and its property names keep to
    `_PROPERTY_KEY` (the API's own messages, as public reports quote them; the SDK's
    `InputSchema` types `type` as a required "object")."""
    where = f"tools.{index}.custom.input_schema"
    if "type" not in schema:
        raise ApiError(400, f"{where}.type: Field required")
    if schema["type"] != "object":
        raise ApiError(400, f"{where}.type: Input should be 'object'")
    if any(key in schema for key in ("oneOf", "allOf", "anyOf")):
        raise ApiError(
            400, f"{where}: input_schema does not support oneOf, allOf, or anyOf at the top level"
        )
    properties = schema.get("properties")
    if isinstance(properties, dict) and any(
        _PROPERTY_KEY.fullmatch(key) is None for key in properties
    ):
        raise ApiError(
            400,
            f"{where}.properties: Property keys should match pattern '^{_PROPERTY_KEY.pattern}$'",
        )
    _check_json_schema(where, schema)


def _check_json_schema(where: str, schema: dict[str, Any]) -> None:
    """The schema must be a valid JSON Schema 2020-12 (the SDKs' `Tool.input_schema`:
    "JSON schema (json-schema.org/draft/2020-12) for this tool's input"); the live
    API's words for one that is not, as reported in acomagu/vscode-as-mcp-server#6.
    The local API took any object schema, a `"type": "strnig"` among its properties."""
    from jsonschema import Draft202012Validator  # type: ignore[import-untyped]
    from jsonschema.exceptions import SchemaError  # type: ignore[import-untyped]

    # A check costs a millisecond, and every request of a conversation sends the same
    # tools: the valid schemas are remembered by their JSON.
    key = msgspec.json.encode(schema)
    if key in _VALID_SCHEMAS:
        return
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError:
        raise ApiError(
            400,
            f"{where}: JSON schema is invalid. It must match JSON Schema draft 2020-12 "
            "(https://json-schema.org/draft/2020-12). Learn more about tool use at "
            "https://docs.anthropic.com/en/docs/tool-use.",
        ) from None
    if len(_VALID_SCHEMAS) >= _VALID_SCHEMAS_KEPT:
        _VALID_SCHEMAS.clear()
    _VALID_SCHEMAS.add(key)


def _check_system_messages(messages: list[MessageParam], model: ModelInfo) -> None:
    """Role-system messages: only on models that take them, after a user turn, and either
    last or followed by an assistant turn (facts file; "system messages" in the docs)."""
    for i, message in enumerate(messages):
        if message.role != "system":
            continue
        if not model.system_messages:
            raise ApiError(
                400,
                f"messages.{i}.role: system messages are not supported by {model.name}; "
                "use the top-level `system` parameter",
            )
        if i == 0 or messages[i - 1].role != "user":
            raise ApiError(400, f"messages.{i}: a system message must follow a user message")
        if i + 1 < len(messages) and messages[i + 1].role != "assistant":
            raise ApiError(
                400,
                f"messages.{i}: a system message must be the last message or be followed by "
                "an assistant message",
            )
        for j, block in enumerate(blocks_of(message)):
            if not isinstance(block, TextBlock):
                raise ApiError(400, f"messages.{i}.content.{j}: system messages hold text only")


def _check_breakpoints(request: MessagesRequest) -> None:
    controls = list(cache_controls(request))
    if request.cache_control is not None:
        # Automatic caching puts the last breakpoint on the last cacheable block: it takes
        # a slot and comes last in processing order (docs: prompt caching, automatic).
        controls.append(("cache_control", request.cache_control))
    if len(controls) > MAX_BREAKPOINTS:
        raise ApiError(
            400,
            f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. "
            f"Found {len(controls)}.",
        )
    seen_short = False
    for path, control in controls:
        if control.ttl == "5m":
            seen_short = True
        elif seen_short:
            raise ApiError(
                400,
                f"{path}: a ttl='1h' cache_control block must not come after a ttl='5m' "
                "cache_control block. Note that blocks are processed in the following order: "
                "`tools`, `system`, `messages`.",
            )


# The API reference (Messages, create: https://platform.claude.com/docs/en/api/messages/
# create): `thinking` and `tool_choice` are objects tagged by `type`, each variant with its
# own keys (the SDK's ThinkingConfig*Param and ToolChoice*Param). The live API refuses any
# other key as it refuses every unknown field, naming the variant in the path: "thinking.
# adaptive.effort: Extra inputs are not permitted" (immersive-translate#3818), "thinking.
# disabled.display" (anthropics/claude-code#69618). `block_binding` (the beta's) is
# `_prepare._binding_setting`'s to check: it refuses it without its beta header and
# with a type other than adaptive or enabled.
_THINKING_KEYS: dict[str, frozenset[str]] = {
    "enabled": frozenset({"type", "budget_tokens", "display", "block_binding"}),
    "adaptive": frozenset({"type", "display", "block_binding"}),
    "disabled": frozenset({"type", "block_binding"}),
    "between_tools": frozenset({"type", "block_binding"}),
}
_TOOL_CHOICE_KEYS: dict[str, frozenset[str]] = {
    "auto": frozenset({"type", "disable_parallel_tool_use"}),
    "any": frozenset({"type", "disable_parallel_tool_use"}),
    "tool": frozenset({"type", "name", "disable_parallel_tool_use"}),
    "none": frozenset({"type"}),
}


def _refuse_extra_inputs(where: str, value: Mapping[str, Any], known: Container[str]) -> None:
    """A 400 for the first key of `value` not in `known`, in the API's words."""
    for key in value:
        if key not in known:
            raise ApiError(400, f"{where}.{key}: Extra inputs are not permitted")


def _refuse_extra_variant_inputs(
    where: str, value: Mapping[str, Any] | None, variants: Mapping[str, frozenset[str]]
) -> None:
    """Refuses the keys of a tagged object that its variant does not take; an unknown or
    missing `type` is left to the check of the type itself."""
    kind = (value or {}).get("type")
    if value is not None and isinstance(kind, str) and kind in variants:
        _refuse_extra_inputs(f"{where}.{kind}", value, variants[kind])


def validate(
    request: MessagesRequest,
    version: str,
    *,
    beta: bool = False,
    models: Mapping[str, ModelInfo] = MODELS,
    betas: frozenset[str] = frozenset(),
) -> tuple[MessagesRequest, ModelInfo]:
    """Return the request with its messages merged and its model, or raise `ApiError`
    (`betas`: the `anthropic-beta` header's values)."""
    if not beta:
        for name in BETA_ONLY_FIELDS:
            if getattr(request, name) is not None:
                raise ApiError(400, f"{name}: Extra inputs are not permitted")
    # The API reference's output_config: effort and format; the beta one adds task_budget
    # (the SDK's OutputConfigParam and BetaOutputConfigParam). Another key is refused as
    # every unknown field is ("<field>: Extra inputs are not permitted").
    known = ("effort", "format", "task_budget") if beta else ("effort", "format")
    _refuse_extra_inputs("output_config", request.output_config or {}, known)
    _refuse_extra_variant_inputs("thinking", request.thinking, _THINKING_KEYS)
    _refuse_extra_variant_inputs("tool_choice", request.tool_choice, _TOOL_CHOICE_KEYS)
    model = require_model(request.model, models)
    if request.max_tokens < 1:
        raise ApiError(400, "max_tokens: must be greater than or equal to 1")
    _check_model_rules(request, model)
    if version >= _SAMPLING_REJECTED_FROM:
        for name in ("temperature", "top_p", "top_k"):
            if getattr(request, name) is not None:
                raise ApiError(
                    400, f"{name}: not supported with anthropic-version {version}; remove it"
                )
    _check_thinking_config(request, model, betas)
    _check_stop_sequences(request.stop_sequences or ())
    user_id = request.metadata.user_id if request.metadata is not None else None
    if user_id is not None and len(user_id) > _USER_ID_MAX:
        # The API reference (metadata.user_id, https://platform.claude.com/docs/en/api/
        # messages#metadata): "maxLength 256". The words are pydantic's for a string's
        # length, as the API's other schema messages are (chosen: no public report
        # quotes this one).
        raise ApiError(
            400, f"metadata.user_id: String should have at most {_USER_ID_MAX} characters"
        )
    if user_id is not None and _EMAIL.search(user_id) is not None:
        # The API reference (metadata.user_id): "This should be a uuid, hash value, or
        # other opaque identifier ... Do not include any identifying information such as
        # name, email address, or phone number." The live 400, as BerriAI/litellm#10106
        # quotes it: "metadata.user_id: user_id appears to contain an email address.
        # Please send a uuid or hash value in" (cut there; the end is chosen).
        raise ApiError(
            400,
            "metadata.user_id: user_id appears to contain an email address. "
            "Please send a uuid or hash value instead.",
        )
    _check_tools(request, model)
    if isinstance(request.system, list):
        for i, system_block in enumerate(request.system):
            _check_text(system_block.text, f"system.{i}", system_block.cache_control is not None)
    messages = merge_consecutive(request.messages)
    if not messages:
        raise ApiError(400, "messages: at least one message is required")
    kinds = {type(block) for message in messages for block in blocks_of(message)}
    images = 0
    if ImageBlock in kinds or ToolResultBlock in kinds:
        images = sum(_images_in(block) for message in messages for block in blocks_of(message))
    for i, message in enumerate(messages):
        # The live API's words: "messages.1: all messages must have non-empty content
        # except for the optional final assistant message" (tidyverse/ellmer#709, an empty
        # assistant turn before a user turn; anthropics/claude-code#6774): a final
        # assistant message may be empty (a prefill of nothing).
        optional = i == len(messages) - 1 and message.role == "assistant"
        if isinstance(message.content, list) and not message.content and not optional:
            raise ApiError(
                400,
                f"messages.{i}: all messages must have non-empty content except for the "
                "optional final assistant message",
            )
        for j, block in enumerate(blocks_of(message)):
            if type(block) is TextBlock and _text_passes(block.text):
                continue  # most of a history (text has no rule of role or beta to check)
            _check_block(block, message.role, f"messages.{i}.content.{j}", images, beta)
    if images or DocumentBlock in kinds or ToolResultBlock in kinds:
        _check_media(messages, images, model)
    _check_system_messages(messages, model)
    if ToolUseBlock in kinds or ToolResultBlock in kinds:
        _check_tool_pairs(messages)
    if ServerToolUseBlock in kinds:
        _check_server_tool_pairs(messages)
    if has_thinking(messages):
        _check_thinking_places(messages, request, model)
    _check_tool_loop_thinking(messages, request, model)
    last = [m for m in messages if m.role != "system"][-1]
    # Sending a `pause_turn` reply back as-is lets the model continue its turn (docs:
    # handling stop reasons, server tools), and so does a reply paused after compaction
    # (compaction docs, "Pausing after compaction"): that is no prefill.
    ending = blocks_of(last)
    paused = (
        last.role == "assistant"
        and bool(ending)
        and isinstance(ending[-1], (*SERVER_TOOL_BLOCKS, CompactionBlock))
    )
    if last.role != "user" and not paused and not model.prefill:
        raise ApiError(
            400,
            "This model does not support assistant message prefill. "
            "The conversation must end with a user message.",
        )
    final = ending[-1] if last.role == "assistant" and ending else None
    if type(final) is TextBlock and final.text != final.text.rstrip():
        # The live API's words (tailcallhq/forgecode#1872, anomalyco/opencode#1295): a
        # prefill the model goes on from may not end on whitespace.
        raise ApiError(400, "messages: final assistant content cannot end with trailing whitespace")
    merged = msgspec.structs.replace(request, messages=messages)
    _check_breakpoints(merged)
    return merged, model


def _check_tool_pairs(messages: list[MessageParam]) -> None:
    # A tool_use id stands once in the whole request: the live API's words, as public
    # reports quote them ("messages.1.content.1: `tool_use` ids must be unique",
    # anthropics/claude-code#21317; "messages.43.content.2", deep in a long history,
    # anthropics/claude-code#28515); every tool_result names one call.
    seen: set[str] = set()
    for i, message in enumerate(messages):
        for j, block in enumerate(blocks_of(message)):
            if isinstance(block, ToolUseBlock):
                if _TOOL_USE_ID.fullmatch(block.id) is None:
                    # The live API's words (anomalyco/opencode#1279, an empty id;
                    # CommandCodeAI/command-code#323): ids the API writes keep to it.
                    raise ApiError(
                        400,
                        f"messages.{i}.content.{j}.tool_use.id: String should match pattern "
                        f"'^{_TOOL_USE_ID.pattern}$'",
                    )
                if block.id in seen:
                    raise ApiError(400, f"messages.{i}.content.{j}: `tool_use` ids must be unique")
                seen.add(block.id)
    for i, message in enumerate(messages):
        if message.role != "assistant":
            continue
        uses = [b.id for b in blocks_of(message) if isinstance(b, ToolUseBlock)]
        if not uses:
            continue
        following = blocks_of(messages[i + 1]) if i + 1 < len(messages) else []
        if i + 1 == len(messages):
            continue  # a prefilled tool call: nothing follows yet
        leading: list[str] = []
        for block in following:
            if not isinstance(block, ToolResultBlock):
                break
            leading.append(block.tool_use_id)
        missing = [u for u in uses if u not in leading]
        if missing:
            raise ApiError(
                400,
                f"messages.{i + 1}: `tool_use` ids were found without `tool_result` blocks "
                f"immediately after: {', '.join(missing)}. Each `tool_use` block must have a "
                "corresponding `tool_result` block in the next message.",
            )
    for i, message in enumerate(messages):
        previous = blocks_of(messages[i - 1]) if i > 0 else []
        known = {b.id for b in previous if isinstance(b, ToolUseBlock)}
        for block in blocks_of(message):
            if isinstance(block, ToolResultBlock) and block.tool_use_id not in known:
                raise ApiError(
                    400,
                    f"messages.{i}: unexpected `tool_use_id` found in `tool_result` blocks: "
                    f"{block.tool_use_id}. Each `tool_result` block must have a corresponding "
                    "`tool_use` block in the previous message.",
                )


def _check_server_tool_pairs(messages: list[MessageParam]) -> None:
    """A server tool's use has its result in the same assistant turn, except in the last
    message: a `pause_turn` reply may end in a use the server has not run yet, sent back
    as-is to continue. Anywhere else the live API refuses it (anthropics/anthropic-sdk-python
    #961, gsd-build/gsd-2#2869: "messages.3: `web_search` tool use with id `srvtoolu_...`
    was found without a corresponding `web_search_tool_result` block")."""
    for i, message in enumerate(messages[:-1]):
        if message.role != "assistant":
            continue
        blocks = blocks_of(message)
        answered = {b.tool_use_id for b in blocks if isinstance(b, SERVER_RESULT_BLOCKS)}
        for block in blocks:
            if isinstance(block, ServerToolUseBlock) and block.id not in answered:
                result = _SERVER_RESULT_NAMES.get(block.name, f"{block.name}_tool_result")
                raise ApiError(
                    400,
                    f"messages.{i}: `{block.name}` tool use with id `{block.id}` was found "
                    f"without a corresponding `{result}` block",
                )


# The result block of each server tool's use, where it is not `{name}_tool_result`.
_SERVER_RESULT_NAMES = {
    "tool_search_tool_regex": "tool_search_tool_result",
    "tool_search_tool_bm25": "tool_search_tool_result",
}


def thinking_blocks(messages: list[MessageParam]) -> Iterator[tuple[str, ThinkingBlock]]:
    for i, message in enumerate(messages):
        for j, block in enumerate(blocks_of(message)):
            if isinstance(block, ThinkingBlock):
                yield f"messages.{i}.content.{j}", block
