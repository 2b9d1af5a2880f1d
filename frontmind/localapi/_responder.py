"""What the local "model" says: a deterministic default, and a scripted one for tests.

The default responder answers briefly from what it was given: the notification center
sections it saw and the user's words. When the user plainly asks for one of Frontmind's
built-in tools, and that tool is offered in the request, it answers with `tool_use`:

| the user message contains                       | tool                | input          |
|-------------------------------------------------|---------------------|----------------|
| "remind me to X in N minutes/hours/days"        | add_reminder        | text, due_in_minutes |
| "remind me to X tomorrow" / "remind me to X"    | add_reminder        | text (+1440 min)|
| "list my reminders" / "what are my reminders"   | list_reminders      | {}             |
| "complete reminder N" / "reminder N is done"    | complete_reminder   | id             |
| "remember that X" / "remember: X"               | remember            | text           |
| "search for X" / "what did we say about X"      | search_context      | query          |

Any other tool offered in the request (your own, an MCP server's) is called when the
user's message names it ("use the stock tool for sku 42", "call get_weather with city
Oslo"): its arguments are drawn from the tool's input schema, each property from the
words after its name in the message ("sku 42" gives `{"sku": "42"}`, "SKU-9" the whole
word `{"sku": "SKU-9"}`; typed as the schema says: integer, number, boolean or string),
a required one not found from its default,
its first enum value, or a placeholder of its type. An MCP server's tool
(`mcp__time__get_current_time`) is also named by its last part ("get current time").

After tool results it replies with one line per result.

A user message that begins with `[frontmind:segment-summary]` (Frontmind's background
summary instruction) gets a deterministic summary as one JSON object in a text block:
`{"title", "summary", "memories": [{"text", "importance"}]}`, made from the user's
messages of the segment it names ("messages #a to #b" of the request, or the quoted
`<segment>`): the title is the first message's opening words, the summary lists what
the user brought up, and each sentence that states a fact, a preference, a decision or
a commitment ("my X is Y", "I prefer/like/live/work …", "we decided …", "I will …")
becomes a memory.

When thinking is on (asked for, or the model's default), a reply begins with thinking:
the responder's own `ReplyThinking` blocks, or else one the server writes from the
request (`default_thinking`); a user message holding the documented test string
`REDACTED_TRIGGER` gets `redacted_thinking` instead. With thinking off, `ReplyThinking`
blocks of a scripted reply are dropped, as a model with thinking off does not think.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from ._citations import citations_for
from ._schema import MessagesRequest, TextBlock, ToolDef, ToolResultBlock
from ._thinking import REDACTED_TRIGGER

__all__ = [
    "DefaultResponder",
    "Reply",
    "ReplyRawBlock",
    "ReplyText",
    "ReplyThinking",
    "ReplyToolUse",
    "Responder",
    "ScriptedResponder",
]


@dataclass(frozen=True, slots=True)
class ReplyText:
    text: str
    # Citation objects as the API returns them (docs: "Citations"); not counted as output.
    citations: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True, slots=True)
class ReplyToolUse:
    name: str
    input: dict[str, Any]
    id: str | None = None  # generated when absent


@dataclass(frozen=True, slots=True)
class ReplyThinking:
    """A thinking block (signed by the server), or redacted_thinking when `redacted`."""

    thinking: str
    redacted: bool = False


@dataclass(frozen=True, slots=True)
class ReplyRawBlock:
    """A content block sent as given: server tool use and results (web search, web fetch,
    code execution), text with citations, or anything else a test needs the model to say."""

    block: dict[str, Any]


ReplyBlock = ReplyText | ReplyToolUse | ReplyThinking | ReplyRawBlock


@dataclass(frozen=True, slots=True)
class Reply:
    blocks: tuple[ReplyBlock, ...]
    stop_reason: str | None = None  # derived from the blocks when None


class Responder(Protocol):
    def respond(self, request: MessagesRequest) -> Reply: ...


def one_call_at_most(reply: Reply, request: MessagesRequest) -> Reply:
    """The reply as the model gives it under `tool_choice.disable_parallel_tool_use`: at
    most one tool use (docs: "Parallel tool use", https://platform.claude.com/docs/en/
    agents-and-tools/tool-use/parallel-tool-use: with `auto` "Claude uses at most one
    tool", with `any` or `tool` exactly one). A reply with more (a script's) keeps its
    first; without the flag, the reply as it is."""
    if not (request.tool_choice or {}).get("disable_parallel_tool_use"):
        return reply
    calls = [i for i, b in enumerate(reply.blocks) if isinstance(b, ReplyToolUse)]
    if len(calls) < 2:
        return reply
    dropped = set(calls[1:])
    kept = tuple(b for i, b in enumerate(reply.blocks) if i not in dropped)
    return dataclasses.replace(reply, blocks=kept)


def _last_user_blocks(request: MessagesRequest) -> list[Any]:
    users = [m for m in request.messages if m.role == "user"]
    if not users:
        return []
    content = users[-1].content
    return [TextBlock(text=content)] if isinstance(content, str) else list(content)


def default_thinking(request: MessagesRequest) -> ReplyThinking:
    """The thinking the server writes when the responder wrote none."""
    blocks = _last_user_blocks(request)
    said = " ".join(b.text for b in blocks if isinstance(b, TextBlock)).strip()
    if REDACTED_TRIGGER in said:
        return ReplyThinking("Flagged reasoning, returned encrypted.", redacted=True)
    results = sum(isinstance(b, ToolResultBlock) for b in blocks)
    if results:
        return ReplyThinking(f"{results} tool result(s) came back; I will report them briefly.")
    words = len(said.split())
    return ReplyThinking(f"The user wrote {words} word(s); I will answer briefly and plainly.")


def _notification_sections(request: MessagesRequest) -> list[str]:
    for message in request.messages:
        if message.role != "assistant":
            continue
        content = message.content
        text = (
            content
            if isinstance(content, str)
            else "".join(b.text for b in content if isinstance(b, TextBlock))
        )
        if text.startswith("NOTIFICATION CENTER"):
            return re.findall(r"^<([a-z_]+)>$", text, flags=re.MULTILINE)
    return []


# Frontmind's built-in tools: called only by the phrases above, never by name alone.
_BUILTIN_TOOLS = frozenset(
    {"add_reminder", "list_reminders", "complete_reminder", "remember", "search_context"}
)
_UNITS = {"minute": 1, "minutes": 1, "hour": 60, "hours": 60, "day": 1440, "days": 1440}


def _plain_tool_request(text: str, offered: set[str]) -> ReplyToolUse | None:
    lowered = text.lower()
    rules: list[tuple[str, ReplyToolUse | None]] = []
    m = re.search(r"remind me to (.+?) in (\d+) (minutes?|hours?|days?)\b", text, re.I)
    if m:
        due = int(m.group(2)) * _UNITS[m.group(3).lower()]
        rules.append(
            (
                "add_reminder",
                ReplyToolUse("add_reminder", {"text": m.group(1).strip(), "due_in_minutes": due}),
            )
        )
    m = re.search(r"remind me to (.+?)(?: tomorrow)?[.!]?$", text, re.I)
    if m:
        payload: dict[str, Any] = {"text": m.group(1).strip()}
        if "tomorrow" in lowered:
            payload["due_in_minutes"] = 1440
        rules.append(("add_reminder", ReplyToolUse("add_reminder", payload)))
    if re.search(r"list my reminders|what are my reminders", lowered):
        rules.append(("list_reminders", ReplyToolUse("list_reminders", {})))
    m = re.search(r"complete reminder #?(\d+)|reminder #?(\d+) is done", lowered)
    if m:
        number = int(m.group(1) or m.group(2))
        rules.append(("complete_reminder", ReplyToolUse("complete_reminder", {"id": number})))
    m = re.search(r"remember(?: that|:)\s*(.+?)[.!]?$", text, re.I)
    if m:
        rules.append(("remember", ReplyToolUse("remember", {"text": m.group(1).strip()})))
    m = re.search(r"(?:search (?:my notes )?for|what did we say about)\s+(.+?)[.?!]?$", text, re.I)
    if m:
        rules.append(
            ("search_context", ReplyToolUse("search_context", {"query": m.group(1).strip()}))
        )
    for name, use in rules:
        if name in offered:
            return use
    return None


_PLACEHOLDERS: dict[str, Any] = {
    "string": "example",
    "integer": 1,
    "number": 1,
    "boolean": True,
    "array": [],
    "object": {},
}


def _typed(value: str, schema: dict[str, Any]) -> Any:
    """A word of the message as the property's JSON type."""
    kind = schema.get("type")
    try:
        if kind == "integer":
            return int(value)
        if kind == "number":
            return float(value)
    except ValueError:
        return _placeholder(schema)
    if kind == "boolean":
        return value.lower() in ("true", "yes", "on", "1")
    if kind == "array":
        return [value]
    return value


def _placeholder(schema: dict[str, Any]) -> Any:
    if "default" in schema:
        return schema["default"]
    if schema.get("enum"):
        return schema["enum"][0]
    kind = schema.get("type")
    if kind is None:
        kinds = [s.get("type") for s in schema.get("anyOf", ()) if s.get("type") != "null"]
        kind = kinds[0] if kinds else "string"
    return _PLACEHOLDERS.get(str(kind), "example")


def _spoken(name: str) -> str:
    """A tool's name as a pattern: `get_weather` also matches "get weather"."""
    return r"[\s_-]".join(re.escape(part) for part in re.split(r"[_-]+", name) if part)


_VALUE = r"(\"[^\"]*\"|'[^']*'|[^\s,;!?]+)"


def _value_after(prop: str, text: str) -> str | None:
    """The value the message gives a property: the word after its name ("sku 42", "sku:
    42", "sku is 42"), or a word the name begins ("SKU-9", "sku#9": the whole word). The
    name must end where a separator begins, so "SKU-9" never gives "-9"."""
    spoken = _spoken(prop)
    found = re.search(rf"\b{spoken}(?:\s*[=:]\s*|\s+is\s+|\s+){_VALUE}", text, re.I)
    if found is not None:
        return found.group(1).strip("\"'").rstrip(".")
    joined = re.search(rf"\b({spoken}[-#][^\s,;!?]+)", text, re.I)
    return joined.group(1).rstrip(".") if joined is not None else None


def _call_of(tool: ToolDef, text: str) -> ReplyToolUse:
    """A call of this tool, its arguments drawn from its schema and the message."""
    schema = tool.input_schema or {}
    properties: dict[str, Any] = schema.get("properties") or {}
    arguments: dict[str, Any] = {}
    for prop, prop_schema in properties.items():
        word = _value_after(prop, text)
        if word is not None:
            arguments[prop] = _typed(word, prop_schema if isinstance(prop_schema, dict) else {})
    for prop in schema.get("required") or ():
        if prop not in arguments:
            arguments[prop] = _placeholder(properties.get(prop) or {})
    return ReplyToolUse(tool.name, arguments)


def _named_tool_request(text: str, tools: Iterable[ToolDef]) -> ReplyToolUse | None:
    """A call of the first offered tool whose name the message says, arguments drawn
    from its schema."""
    for tool in tools:
        # An MCP server's tool (`mcp__server__tool`) is named by its own last part too.
        names = {tool.name, tool.name.rsplit("__", 1)[-1]}
        said = any(re.search(rf"\b{_spoken(name)}\b", text, re.I) for name in names)
        if tool.input_schema is not None and said:
            return _call_of(tool, text)
    return None


def _forced_call(request: MessagesRequest, said: str) -> ReplyToolUse | None:
    """The call a forcing tool_choice makes (docs: tool use, "Forcing tool use",
    https://platform.claude.com/docs/en/agents-and-tools/tool-use/implement-tool-use:
    `any` uses one of the tools, `tool` the one named), or None (not forced, or no client
    tool to call)."""
    choice = request.tool_choice or {}
    custom = [t for t in request.tools or () if t.input_schema is not None]
    if choice.get("type") == "tool":
        named = [t for t in custom if t.name == choice.get("name")]
        return _call_of(named[0], said) if named else None
    if choice.get("type") != "any" or not custom:
        return None
    offered = {tool.name for tool in custom}
    use = _plain_tool_request(said, offered) or _named_tool_request(said, custom)
    return use if use is not None else _call_of(custom[0], said)


SUMMARY_MARKER = "[frontmind:segment-summary]"
_RANGE = re.compile(r"messages #(\d+) to #(\d+)")
_QUOTED = re.compile(r"<segment>\n(.*)\n</segment>", re.DOTALL)
_SENTENCE = re.compile(r"[^.!?\n]+[.!?]?")
_MEMORABLE = (
    (re.compile(r"\b(?:my|our) [\w' -]+? (?:is|are|was|were) \S", re.I), 0.6),
    (re.compile(r"\bI (?:prefer|like|love|hate|live|work|always|never|am allergic)\b", re.I), 0.7),
    (re.compile(r"\b(?:we|I) (?:decided|agreed|chose)\b", re.I), 0.8),
    (re.compile(r"\b(?:I will|I'll|I promise|I am going to)\b", re.I), 0.7),
)


def _message_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(b.text for b in content if isinstance(b, TextBlock))


def _segment_user_texts(request: MessagesRequest, instruction: str) -> list[str]:
    quoted = _QUOTED.search(instruction)
    if quoted is not None:
        return [
            line.removeprefix("user: ")
            for line in quoted.group(1).splitlines()
            if line.startswith("user: ")
        ]
    span = _RANGE.search(instruction)
    if span is None:
        return []
    first, last = int(span.group(1)), int(span.group(2))
    return [
        _message_text(m.content)
        for m in request.messages[first - 1 : last]
        if m.role == "user" and _message_text(m.content).strip()
    ]


def summarise_segment(request: MessagesRequest, instruction: str) -> Reply:
    """The deterministic answer to Frontmind's segment summary instruction."""
    said = [" ".join(t.split()) for t in _segment_user_texts(request, instruction)]
    said = [t for t in said if t]
    if not said:
        payload: dict[str, Any] = {
            "title": "An empty stretch",
            "summary": "Nothing was said.",
            "memories": [],
        }
        return Reply((ReplyText(json.dumps(payload)),))
    words = said[0].rstrip(".!?").split()
    title = " ".join(words[:8]) + ("…" if len(words) > 8 else "")
    topics: list[str] = []
    for text in said:
        first = _SENTENCE.match(text)
        topic = (first.group(0) if first else text).strip().rstrip(".!?")
        if topic and topic not in topics:
            topics.append(topic)
    summary = f"In {len(said)} message(s) the user brought up: " + "; ".join(topics[:4])
    if len(topics) > 4:
        summary += f"; and {len(topics) - 4} more"
    memories: list[dict[str, Any]] = []
    notable: list[str] = []
    for text in said:
        for sentence in _SENTENCE.findall(text):
            sentence = sentence.strip().rstrip(".!?")
            for pattern, importance in _MEMORABLE:
                if pattern.search(sentence):
                    memory = f"The user said: {sentence}"
                    if all(m["text"] != memory for m in memories):
                        memories.append({"text": memory, "importance": importance})
                        notable.append(sentence)
                    break
    if notable:
        summary += ". Worth keeping: " + "; ".join(notable[:4])
    payload = {"title": title, "summary": summary[:600] + ".", "memories": memories[:8]}
    return Reply((ReplyText(json.dumps(payload)),))


class DefaultResponder:
    """Deterministic, brief, and visibly shaped by the request it was given."""

    def respond(self, request: MessagesRequest) -> Reply:
        blocks = _last_user_blocks(request)
        instruction = " ".join(b.text for b in blocks if isinstance(b, TextBlock))
        if instruction.startswith(SUMMARY_MARKER):
            return summarise_segment(request, instruction)
        said = instruction.strip()
        forced = _forced_call(request, said)
        if forced is not None:
            # With `any` or `tool` the API prefills the turn: a tool_use and no text before
            # it, tool results or not (docs: tool use, "Forcing tool use").
            return Reply((forced,))
        cited = citations_for(request)
        if cited:
            return Reply(
                (
                    ReplyText("From the sources you gave:\n"),
                    *(ReplyText(text, (citation,)) for text, citation in cited),
                )
            )
        results = [b for b in blocks if isinstance(b, ToolResultBlock)]
        if results:
            lines = []
            for result in results:
                content = result.content
                text = (
                    content
                    if isinstance(content, str)
                    else "\n".join(p.text for p in content or () if isinstance(p, TextBlock))
                )
                status = "failed" if result.is_error else "done"
                lines.append(f"Tool {status}: {text.strip()[:160]}")
            return Reply((ReplyText("\n".join(lines)),))
        offered = {tool.name for tool in request.tools or ()}
        # `none` prevents any tool use (docs: tool use, "Forcing tool use").
        none = (request.tool_choice or {}).get("type") == "none"
        use = None if none else _plain_tool_request(said, offered)
        if use is None and not none:
            own = (t for t in request.tools or () if t.name not in _BUILTIN_TOOLS)
            use = _named_tool_request(said, own)
        if use is not None:
            return Reply((ReplyText("On it."), use))
        sections = _notification_sections(request)
        seen = ", ".join(sections) if sections else "no notification center"
        quoted = said if len(said) <= 120 else said[:117] + "..."
        return Reply((ReplyText(f"You said: \u201c{quoted}\u201d. I can see: {seen}."),))


@dataclass
class ScriptedResponder:
    """Replies from a queue, in order; an exhausted script is a clear 500."""

    replies: deque[Reply] = field(default_factory=deque)
    requests: list[MessagesRequest] = field(default_factory=list)

    def push(self, *replies: Reply | str) -> None:
        """Queue replies; a string is a reply of one text block."""
        for reply in replies:
            self.replies.append(Reply((ReplyText(reply),)) if isinstance(reply, str) else reply)

    def extend(self, replies: Iterable[Reply]) -> None:
        self.replies.extend(replies)

    def respond(self, request: MessagesRequest) -> Reply:
        self.requests.append(request)
        if not self.replies:
            raise LookupError("the scripted responder has no reply left")
        return self.replies.popleft()
