"""Tool definitions generated from code: a msgspec Struct or a function's signature.

One source of truth: the Struct a tool's input is decoded into is also what its JSON
schema is generated from (`msgspec.json.schema`), for the built-in tools and for the
user's own (`@tool`). A user tool is a plain function, sync or async; its parameters'
type hints (or a single msgspec Struct parameter) give the schema, its docstring the
description. Definitions are built once, when the tool is declared, so the `tools`
array, the first part of every cached prefix, is byte-identical on every turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import inspect
import logging
import re
import threading
import types
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import (
    Annotated,
    Any,
    Generic,
    ParamSpec,
    TypeVar,
    Union,
    get_args,
    get_origin,
    get_type_hints,
    overload,
)

import anyio
import msgspec

from storage import MAX_MESSAGE_CHARS, InvalidInput, MessageTooLarge, RawBlock, storable, visible

from ._content import block_fields, budget_result_blocks, user_content
from ._exceptions import ToolDefinitionError
from ._messages import Turn

__all__ = [
    "MAX_STRAGGLERS",
    "ThreadCalls",
    "Tool",
    "ToolDefinition",
    "ToolOutcome",
    "as_tool",
    "blocks_outcome",
    "capped",
    "described",
    "input_schema",
    "is_content_blocks",
    "tool",
]

log = logging.getLogger("frontmind.tools")

# The Messages API's rule for `tools[].name` (API reference, "tools": name must match
# ^[a-zA-Z0-9_-]{1,64}$); a name that breaks it would fail every request, so refuse it here.
TOOL_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")

# A text result's length past which it is cut, with a note (as an MCP server's
# `max_result_chars`); a tool may set its own, down to MIN_RESULT_CHARS.
MAX_RESULT_CHARS = 100_000
MIN_RESULT_CHARS = 1_000

_UNIONS = (Union, types.UnionType)

P = ParamSpec("P")
R = TypeVar("R")


class ToolDefinition(msgspec.Struct, frozen=True):
    name: str
    description: str
    input_schema: msgspec.Raw
    guidance: str


class ToolOutcome(msgspec.Struct, frozen=True):
    content: str  # the result's text (all of it, for a plain result)
    is_error: bool = False
    update: str | None = None  # a change the notification center would show next turn
    # A result made of content blocks (text, image, document): their exact JSON array,
    # sent and stored as the tool_result's content; `content` then holds only the text.
    blocks_json: str = ""


def blocks_outcome(
    blocks: Sequence[Mapping[str, Any] | msgspec.Raw],
    name: str,
    max_chars: int = MAX_RESULT_CHARS,
) -> ToolOutcome:
    """A result of content blocks, checked as a user message's blocks are (text, image,
    document; the same limits); a bad block is an error result naming it. Images and
    documents over one result's share are left out, with a note (`ResultBudget`). Its
    text is held as a text result is: cut at `max_chars` with a note (and within a
    message's text limit), a NUL or a lone surrogate made U+FFFD, an empty text block
    left out, so that text never costs the result its images."""
    kept = _budget_texts(blocks, min(max_chars, MAX_MESSAGE_CHARS - _ROOM))
    if not kept:
        return ToolOutcome("(the tool returned nothing)")
    try:
        stored, text = user_content(budget_result_blocks(kept))
    except (InvalidInput, MessageTooLarge) as exc:
        return ToolOutcome(f"{name} returned unusable content: {exc}", is_error=True)
    parts = [block.json if isinstance(block, RawBlock) else _block_json(block) for block in stored]
    return ToolOutcome(text, blocks_json="[" + ",".join(parts) + "]")


# Of a message's text limit, what a result's text blocks leave for the rest: the
# "[image]" markers of its images and the notes saying what was left out.
_ROOM = 2_000


def _budget_texts(
    blocks: Sequence[Mapping[str, Any] | msgspec.Raw], limit: int
) -> list[Mapping[str, Any] | msgspec.Raw]:
    """The blocks with their plain text blocks held to `limit` characters in all (see
    `blocks_outcome`); other blocks, and text blocks with more than a text, as given."""
    kept: list[Mapping[str, Any] | msgspec.Raw] = []
    left, cut = limit, 0
    for item in blocks:
        fields = block_fields(item)
        if not (
            isinstance(fields, Mapping)
            and fields.get("type") == "text"
            and set(fields) == {"type", "text"}
            and isinstance(fields["text"], str)
        ):
            kept.append(item)
            continue
        text = storable(fields["text"])
        if len(text) > left:
            cut += len(text) - left
            text = text[:left]
        left -= len(text)
        if not visible(text):
            continue
        kept.append(item if text == fields["text"] else {"type": "text", "text": text})
    if cut:
        kept.append(
            {
                "type": "text",
                "text": f"[truncated: {cut:,} more characters of this result were left out; "
                f"its text is held to {limit:,} characters (max_result_chars)]",
            }
        )
    return kept


def _block_json(block: object) -> str:
    return msgspec.json.encode(block).decode()


def is_content_blocks(value: object) -> bool:
    """A tool's return value that is a list of content blocks: every item a mapping (or
    raw JSON) whose "type" is text, image or document."""
    if not isinstance(value, list | tuple) or not value:
        return False
    for item in value:
        if isinstance(item, msgspec.Raw):
            continue
        if not isinstance(item, Mapping) or item.get("type") not in _RESULT_BLOCKS:
            return False
    return True


_RESULT_BLOCKS = frozenset({"text", "image", "document"})


def _inline(node: Any, defs: Mapping[str, Any], seen: tuple[str, ...]) -> Any:
    """`node` with every `$ref` replaced by its definition (one self-contained object)."""
    if isinstance(node, list):
        return [_inline(item, defs, seen) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str):
        name = ref.rsplit("/", 1)[-1]
        if name in seen:
            raise ToolDefinitionError(f"{name} refers to itself; a tool input cannot be recursive")
        return _inline(defs[name], defs, (*seen, name))
    inlined = {key: _inline(value, defs, seen) for key, value in node.items()}
    default = inlined.get("default")
    if inlined.get("uniqueItems") is True and isinstance(default, list):
        # A set's default comes in its iteration order, which string hashing changes
        # from one process to the next: the tools array, which leads every cached
        # prefix, would differ after each restart. Sorted, it is the same every time.
        inlined["default"] = sorted(default, key=msgspec.json.encode)
    return inlined


def input_schema(struct: type[msgspec.Struct]) -> dict[str, Any]:
    """The JSON schema of `struct` as a tool's `input_schema`: an object at the root,
    references inlined, without the root's title and description (the tool's own
    description says what it does; repeating it would only cost tokens)."""
    try:
        generated = msgspec.json.schema(struct)
    except TypeError as exc:
        raise ToolDefinitionError(f"{struct.__name__}: {exc}") from None
    defs = generated.get("$defs", {})
    root = _inline(generated, defs, ())
    if root.get("type") != "object":  # pragma: no cover - a Struct is always an object
        raise ToolDefinitionError(f"{struct.__name__}: a tool input must be an object")
    root.pop("title", None)
    root.pop("description", None)
    return dict(root)


def _encode_schema(struct: type[msgspec.Struct]) -> msgspec.Raw:
    return msgspec.Raw(msgspec.json.encode(input_schema(struct)))


def builtin_definition(name: str, struct: type[msgspec.Struct], guidance: str) -> ToolDefinition:
    """A built-in tool's definition: its description is the Struct's docstring."""
    description = inspect.getdoc(struct)
    if not description:  # pragma: no cover - every built-in struct has one
        raise ToolDefinitionError(f"{name}: the input struct needs a docstring")
    return ToolDefinition(name, description, _encode_schema(struct), guidance)


class Tool(Generic[P, R]):
    """A function the model may call, with its definition generated from the signature.

    Build one with `@tool` (or `tool(fn, name=…)`); call it like the function it wraps:
    `Tool[P, R]` keeps the function's parameters and return type for type checkers.
    A parameter annotated `Turn` (or `Turn | None`) is not part of the schema: it
    receives the current turn (continuum id, user, time, timezone).
    """

    def __init__(
        self,
        fn: Callable[P, R],
        *,
        name: str | None = None,
        description: str | None = None,
        guidance: str | None = None,
        timeout_s: float | None = None,
        max_result_chars: int | None = None,
    ) -> None:
        self.fn = fn
        self.name = name if name is not None else getattr(fn, "__name__", "")
        where = f"tool {self.name!r}"
        if not TOOL_NAME.fullmatch(self.name):
            raise ToolDefinitionError(
                f"{where}: a tool name must be 1-64 of A-Z a-z 0-9 _ - (pass name=…)"
            )
        text = description if description is not None else inspect.getdoc(fn)
        if not text or not text.strip():
            raise ToolDefinitionError(
                f"{where}: needs a description (a docstring, or description=…)"
            )
        self.description = text.strip()
        if timeout_s is not None and not timeout_s > 0:
            raise ToolDefinitionError(f"{where}: timeout_s must be greater than 0, got {timeout_s}")
        self.timeout_s = timeout_s
        limit = MAX_RESULT_CHARS if max_result_chars is None else max_result_chars
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < MIN_RESULT_CHARS:
            raise ToolDefinitionError(
                f"{where}: max_result_chars must be an int of at least {MIN_RESULT_CHARS}, "
                f"got {max_result_chars!r}"
            )
        self.max_result_chars = limit
        self._options = {
            "name": name,
            "description": description,
            "guidance": guidance,
            "timeout_s": timeout_s,
            "max_result_chars": max_result_chars,
        }
        self._input, self._struct_param, self._turn_params = _signature(fn, where)
        try:
            schema = _encode_schema(self._input)
        except ToolDefinitionError as exc:
            raise ToolDefinitionError(f"{where}: {exc}") from None
        first_line = self.description.splitlines()[0]
        self.definition = ToolDefinition(
            self.name,
            self.description,
            schema,
            guidance.strip() if guidance else f"{self.name}: {first_line}",
        )
        self._is_async = inspect.iscoroutinefunction(fn)
        self.threads = ThreadCalls()
        functools.update_wrapper(self, fn)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"Tool({self.name!r}, timeout_s={self.timeout_s})"

    def with_options(self, **options: Any) -> Tool[P, R]:
        """This tool with some of name/description/guidance/timeout_s replaced (None keeps)."""
        merged = {**self._options, **{k: v for k, v in options.items() if v is not None}}
        return Tool(self.fn, **merged)

    async def invoke(self, raw_input: msgspec.Raw, turn: Turn) -> ToolOutcome:
        """Run the tool on the model's input. Bad input and failures become error
        results for the model; cancellation (the caller's timeout) propagates."""
        try:
            arguments = msgspec.json.decode(raw_input, type=self._input)
        except msgspec.DecodeError as exc:
            return ToolOutcome(f"invalid input for {self.name}: {exc}", is_error=True)
        if self._struct_param is not None:
            kwargs: dict[str, Any] = {self._struct_param: arguments}
        else:
            kwargs = msgspec.structs.asdict(arguments)
        kwargs.update(dict.fromkeys(self._turn_params, turn))
        fn: Callable[..., Any] = self.fn  # called with the decoded input, by name
        if not self._is_async and self.threads.stragglers >= MAX_STRAGGLERS:
            return ToolOutcome(
                f"{self.name} was not started: {self.threads.stragglers} of its earlier calls "
                "are still running after their time ran out",
                is_error=True,
            )
        try:
            if self._is_async:
                result = await fn(**kwargs)
            else:
                result = await self.threads.run(functools.partial(fn, **kwargs), self.name)
            if inspect.isawaitable(result):
                result = await result
            if is_content_blocks(result):
                return blocks_outcome(result, self.name, self.max_result_chars)
            content = _render(result)
        except Exception as exc:  # the user's code: any failure goes back to the model
            log.warning("tool %s failed", self.name, exc_info=True)
            # An exception's message may carry megabytes (a response body, a dump): it is
            # held to the tool's limit as a result is.
            failed = f"{self.name} failed: {described(exc)}"
            return ToolOutcome(capped(failed, self.max_result_chars), is_error=True)
        return ToolOutcome(capped(content, self.max_result_chars))


# A sync tool's thread cannot be stopped: at its timeout the turn moves on and the thread
# runs on alone. A tool that hangs (a network call with no timeout of its own) would leave
# one more thread behind at every call, without bound, until the process could start no
# thread at all (no tool, no SQLite read, no DNS lookup). Past this many calls still
# running after their turn gave up on them, the tool is refused at once, for the model to
# hear, until one of them returns.
MAX_STRAGGLERS = 8
# The threads the users' sync tools may hold at once in a process (threads of their own,
# apart from anyio's default 40 worker threads that the storage's own thread work takes:
# the SQLite vector cache's first pass, a backup's copy): a reply of fifty slow calls
# waits for these, not the recall of every other turn for a thread.
TOOL_THREADS = 32
_LIMITERS: weakref.WeakKeyDictionary[object, anyio.CapacityLimiter] = weakref.WeakKeyDictionary()


def _tool_threads() -> anyio.CapacityLimiter:
    """This event loop's limiter of tool threads (a limiter belongs to its loop)."""
    loop = asyncio.get_running_loop()
    limiter = _LIMITERS.get(loop)
    if limiter is None:
        limiter = _LIMITERS[loop] = anyio.CapacityLimiter(TOOL_THREADS)
    return limiter


async def _in_daemon_thread(call: Callable[[], Any]) -> Any:
    """`call()` in a daemon thread of its own, with the caller's context (the turn id
    its log lines carry); a cancel stops the waiting, not the thread. Not anyio's worker
    threads: the interpreter joins those at exit, so one tool call that never returns
    kept a shut-down daemon (or any program embedding Frontmind) from exiting at all."""
    loop = asyncio.get_running_loop()
    answer: asyncio.Future[Any] = loop.create_future()
    context = contextvars.copy_context()

    def settle(result: Any, error: BaseException | None) -> None:
        if answer.done():  # its caller stopped waiting: nobody reads it
            return
        if error is not None:
            answer.set_exception(error)
        else:
            answer.set_result(result)

    def work() -> None:
        result, error = None, None
        try:
            result = context.run(call)
        # Whatever it raises (a SystemExit too) is handed to the caller, as anyio's
        # worker threads do: a thread that ended unsettled would leave the call waiting.
        except BaseException as exc:  # noqa: BLE001 - handed to the caller, who re-raises it
            error = exc
        with contextlib.suppress(RuntimeError):  # the loop has closed: nobody waits
            loop.call_soon_threadsafe(settle, result, error)

    threading.Thread(target=work, name="frontmind tool", daemon=True).start()
    return await answer


class ThreadCalls:
    """A sync tool's calls in worker threads, counting the stragglers: calls still
    running after their caller stopped waiting (its timeout, or its turn cancelled)."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self.stragglers = 0

    async def run(self, call: Callable[[], Any], name: str) -> Any:
        """`call()` in a worker thread; a cancel leaves the thread to finish alone."""
        state = {"started": False, "given_up": False, "abandoned": False, "done": False}

        def tracked() -> Any:
            with self._changed:
                if state["given_up"]:
                    return None  # its caller left before it started: nobody waits for it
                state["started"] = True
            try:
                return call()
            finally:
                with self._changed:
                    state["done"] = True
                    if state["abandoned"]:
                        self.stragglers -= 1
                        self._changed.notify_all()

        try:
            async with _tool_threads():  # released when its caller leaves, as anyio's was
                return await _in_daemon_thread(tracked)
        except anyio.get_cancelled_exc_class():
            with self._changed:
                # Only a call whose thread runs it is a straggler: one cancelled while it
                # waited for a thread (the tools' TOOL_THREADS, or the worker's queue) may
                # never run at all, and counted, it would never be counted off again.
                if not state["started"]:
                    state["given_up"] = True
                elif not state["done"]:
                    state["abandoned"] = True
                    self.stragglers += 1
            if state["abandoned"]:
                log.warning(
                    "tool %s is still running in its thread after its call was given up"
                    " (%d such calls)",
                    name,
                    self.stragglers,
                )
            raise

    def wait_for_stragglers(self, fewer_than: int, timeout: float) -> bool:
        """Block (a thread, not the loop) until fewer than `fewer_than` stragglers run."""
        with self._changed:
            return self._changed.wait_for(lambda: self.stragglers < fewer_than, timeout)


def described(exc: BaseException) -> str:
    """An exception as an error result says it: its type and message. A message that
    cannot be read (a `__str__` that raises) is said to be so, instead of failing the
    turn that reports it."""
    try:
        message = str(exc)
    except Exception as broken:  # noqa: BLE001 - the tool's own exception class
        message = f"(its message could not be read: {type(broken).__name__})"
    return f"{type(exc).__name__}: {message}"


def capped(text: str, limit: int) -> str:
    """A text result cut at `limit` characters, with a note saying so: a tool that
    returns megabytes costs the model a bounded result, not a turn the API refuses as
    too large (413)."""
    if len(text) <= limit:
        return text
    return (
        f"{text[:limit]}\n[truncated: {len(text) - limit:,} more characters of this result "
        f"were left out; the tool's limit is max_result_chars = {limit:,}]"
    )


def _render(result: Any) -> str:
    """A tool's return value as the text of its tool_result (a list of content blocks
    is the tool_result's content instead: see `blocks_outcome`)."""
    if isinstance(result, str):
        return result
    if result is None:
        return "done"
    return msgspec.json.encode(result).decode()


def _signature(
    fn: Callable[..., Any], where: str
) -> tuple[type[msgspec.Struct], str | None, tuple[str, ...]]:
    """The Struct the model's input decodes into, the name of the parameter that takes it
    whole (if the function has a single Struct parameter), and the `Turn` parameters."""
    if not callable(fn):
        raise ToolDefinitionError(f"{where}: {fn!r} is not callable")
    try:
        signature = inspect.signature(fn)
        hints = get_type_hints(fn, include_extras=True)
    except (NameError, TypeError, ValueError) as exc:
        raise ToolDefinitionError(f"{where}: cannot read the signature: {exc}") from None
    fields: list[tuple[str, Any] | tuple[str, Any, Any]] = []
    turn_params: list[str] = []
    for param in signature.parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY):
            raise ToolDefinitionError(
                f"{where}: parameter {param.name!r} must be an ordinary named parameter"
            )
        if param.name not in hints:
            raise ToolDefinitionError(f"{where}: parameter {param.name!r} needs a type hint")
        hint = hints[param.name]
        if _is_turn(hint):
            turn_params.append(param.name)
        elif _mentions_turn(hint):
            raise ToolDefinitionError(
                f"{where}: parameter {param.name!r}: a parameter that receives the turn is "
                "annotated Turn (or Turn | None), a parameter of its own (a Turn inside "
                "another type would be the model's to fill in)"
            )
        elif param.default is param.empty:
            fields.append((param.name, hint))
        else:
            fields.append((param.name, hint, param.default))
    if len(fields) == 1 and len(fields[0]) == 2:
        only, hint = fields[0][0], fields[0][1]
        if isinstance(hint, type) and issubclass(hint, msgspec.Struct):
            return hint, only, tuple(turn_params)
    try:
        struct = msgspec.defstruct(
            f"{getattr(fn, '__name__', 'tool')}_input",
            fields,
            kw_only=True,
            frozen=True,
            forbid_unknown_fields=True,
        )
    except TypeError as exc:  # a default msgspec refuses: a non-empty list, say
        raise ToolDefinitionError(f"{where}: {exc}") from None
    return struct, None, tuple(turn_params)


def _is_turn(hint: Any) -> bool:
    """A hint for the current turn: `Turn`, `Turn | None` (a function also called outside
    a turn), either in `Annotated[...]`. Never part of the schema: the model must not
    choose whose turn it is."""
    hint = _bare(hint)
    if hint is Turn:
        return True
    if get_origin(hint) not in _UNIONS:  # `Callable[[int], str]`'s arguments hold a list
        return False
    return {_bare(arg) for arg in get_args(hint)} == {Turn, type(None)}


def _bare(hint: Any) -> Any:
    return get_args(hint)[0] if get_origin(hint) is Annotated else hint


def _mentions_turn(hint: Any) -> bool:
    """Whether `Turn` is anywhere in the hint: its arguments, and the fields of the
    Structs, dataclasses and typed dicts it names (a Turn there would be the model's to
    fill in, naming another user or continuum)."""
    try:
        info = msgspec.inspect.type_info(hint)
    except (TypeError, ValueError):  # a type msgspec cannot read: refused with its schema
        return hint is Turn or any(_mentions_turn(arg) for arg in get_args(hint))
    seen: set[int] = set()

    def holds(node: object) -> bool:
        if isinstance(node, msgspec.inspect.StructType) and node.cls is Turn:
            return True
        if id(node) in seen:  # a recursive Struct
            return False
        seen.add(id(node))
        if isinstance(node, (tuple, list)):
            return any(holds(item) for item in node)
        if isinstance(node, (msgspec.inspect.Type, msgspec.inspect.Field)):
            return any(holds(getattr(node, name)) for name in node.__struct_fields__)
        return False

    return holds(info)


def as_tool(candidate: Tool[..., Any] | Callable[..., Any]) -> Tool[..., Any]:
    """A `Tool` as it is, or a plain function made into one."""
    return candidate if isinstance(candidate, Tool) else Tool(candidate)


@overload
def tool(fn: Callable[P, R], /) -> Tool[P, R]: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    guidance: str | None = None,
    timeout_s: float | None = None,
    max_result_chars: int | None = None,
) -> Callable[[Callable[P, R]], Tool[P, R]]: ...


def tool(
    fn: Callable[P, R] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    guidance: str | None = None,
    timeout_s: float | None = None,
    max_result_chars: int | None = None,
) -> Tool[P, R] | Callable[[Callable[P, R]], Tool[P, R]]:
    """Declare a function as a tool the model may call: `@tool` or `@tool(timeout_s=5)`.

    The schema comes from the type hints (or a single msgspec Struct parameter), the
    description from the docstring. `guidance` is the line the system prompt's tool
    guidance gets (default: the docstring's first line); `timeout_s` overrides
    `tools.timeout_s`; a text result longer than `max_result_chars` (100,000) is cut,
    with a note saying so. Pass the tools to `Frontmind.open(..., tools=[...])` or name
    them in the config (`[[tool]] use = "package.module:function"`).
    """

    def build(function: Callable[P, R]) -> Tool[P, R]:
        return Tool(
            function,
            name=name,
            description=description,
            guidance=guidance,
            timeout_s=timeout_s,
            max_result_chars=max_result_chars,
        )

    return build if fn is None else build(fn)
