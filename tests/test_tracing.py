"""OpenTelemetry spans for a turn and its parts, recorded by the SDK's in-memory exporter."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from frontmind import Frontmind, TurnCompleted, TurnError, tool
from frontmind.localapi import LocalMessagesAPI, Reply, ReplyToolUse, ScriptedResponder
from tests._daemon import ROOT, child_env
from tests._harness import config, frontmind

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def exporter() -> Iterator[InMemorySpanExporter]:
    # The global provider can be set once per process; these are the only tests that
    # set it, and spans recorded after them go nowhere once it is shut down.
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    yield exporter
    provider.shutdown()


def named(spans: tuple[ReadableSpan, ...], name: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name]


async def test_a_turn_has_spans_for_compose_trinkets_model_calls_and_tools(
    tmp_path: Path, exporter: InMemorySpanExporter
) -> None:
    exporter.clear()
    async with Frontmind.open(tmp_path, offline=True) as fm:
        events = [e async for e in fm.turn("ada", "remind me to water the plants in 10 minutes")]
    done = events[-1]
    assert isinstance(done, TurnCompleted)
    spans = tuple(s for s in exporter.get_finished_spans() if s.attributes)
    mine = tuple(s for s in spans if (s.attributes or {}).get("frontmind.turn_id") == done.turn_id)
    (turn,) = named(mine, "frontmind.turn")
    assert turn.attributes is not None
    assert turn.attributes["frontmind.continuum_id"] == "ada"
    assert turn.status.status_code != StatusCode.ERROR
    assert len(named(mine, "frontmind.compose")) == 1
    trinkets = named(mine, "frontmind.trinket")
    assert {(s.attributes or {})["frontmind.section"] for s in trinkets} == {
        s.name for s in done.sections
    }
    calls = named(mine, "frontmind.model_call")
    assert len(calls) == done.model_calls == 2
    # Each call carries its tokens: input (all of it), read, written, uncached, output.

    def tokens(call: ReadableSpan, key: str) -> int:
        value = (call.attributes or {})[key]
        assert isinstance(value, int)
        return value

    for key, total in (
        ("gen_ai.usage.cache_read.input_tokens", done.usage.cache_read_input_tokens),
        ("gen_ai.usage.cache_creation.input_tokens", done.usage.cache_creation_input_tokens),
        ("frontmind.uncached_input_tokens", done.usage.input_tokens),
        ("gen_ai.usage.input_tokens", done.usage.total_input),
        ("gen_ai.usage.output_tokens", done.usage.output_tokens),
    ):
        assert sum(tokens(c, key) for c in calls) == total, key
    assert tokens(calls[0], "gen_ai.usage.cache_creation.input_tokens") > 0  # the first write
    assert tokens(calls[1], "gen_ai.usage.cache_read.input_tokens") > 0  # the loop reads it
    (tool,) = named(mine, "frontmind.tool")
    assert (tool.attributes or {})["frontmind.tool"] == "add_reminder"
    assert turn.context is not None
    for child in mine:
        if child is turn:
            continue
        assert child.parent is not None
        assert child.parent.span_id == turn.context.span_id, child.name
        assert child.context is not None
        assert child.context.trace_id == turn.context.trace_id


async def test_calls_side_by_side_each_have_their_span_and_a_failed_one_says_so(
    tmp_path: Path, exporter: InMemorySpanExporter
) -> None:
    """Two calls of one tool in one reply run side by side: each span names its call,
    and the one whose result is an error is marked failed (it raised nothing: the
    model heard of the failure, the turn went on)."""
    exporter.clear()

    @tool
    def lookup(sku: str) -> str:
        """Looks up a SKU."""
        if sku == "bad":
            raise ValueError("no such sku")
        return "in stock"

    responder = ScriptedResponder()
    responder.push(
        Reply(
            (
                ReplyToolUse("lookup", {"sku": "ok"}, "toolu_ok"),
                ReplyToolUse("lookup", {"sku": "bad"}, "toolu_bad"),
            )
        ),
        "One of two.",
    )
    async with (
        LocalMessagesAPI(responder=responder) as api,
        frontmind(api, tmp_path, tools=[lookup]) as fm,
    ):
        events = [e async for e in fm.turn("ada", "look both up")]
    assert isinstance(events[-1], TurnCompleted)
    calls = named(exporter.get_finished_spans(), "frontmind.tool")
    by_id = {(c.attributes or {})["gen_ai.tool.call.id"]: c for c in calls}
    assert set(by_id) == {"toolu_ok", "toolu_bad"}
    assert by_id["toolu_ok"].status.status_code != StatusCode.ERROR
    assert by_id["toolu_bad"].status.status_code == StatusCode.ERROR
    assert "no such sku" in (by_id["toolu_bad"].status.description or "")


async def test_a_failed_turn_marks_its_span(tmp_path: Path, exporter: InMemorySpanExporter) -> None:
    exporter.clear()
    # Nothing listens on the discard port: every model call fails, and so does the turn.
    cfg = config(model={"max_retries": 0})
    async with Frontmind.open(tmp_path, cfg, api_key="k", base_url="http://127.0.0.1:9") as fm:
        events = [e async for e in fm.turn("ada", "hello")]
    assert isinstance(events[-1], TurnError)
    (turn,) = named(exporter.get_finished_spans(), "frontmind.turn")
    assert turn.status.status_code == StatusCode.ERROR
    calls = named(exporter.get_finished_spans(), "frontmind.model_call")
    assert calls
    assert all(c.status.status_code == StatusCode.ERROR for c in calls)


@pytest.mark.slow
async def test_without_an_sdk_provider_the_hooks_record_nothing(tmp_path: Path) -> None:
    script = (
        "import sys; sys.modules['opentelemetry.sdk'] = None\n"
        "import anyio\n"
        "from frontmind import Frontmind\n"
        "from actors._observe import _start\n"
        "async def main():\n"
        f"    async with Frontmind.open({str(tmp_path)!r}, offline=True) as fm:\n"
        "        events = [e async for e in fm.turn('ada', 'hello')]\n"
        "    assert type(events[-1]).__name__ == 'TurnCompleted', events[-1]\n"
        "    assert not _start('probe', None, None, {}).is_recording()\n"
        "    print('ok')\n"
        "anyio.run(main)\n"
    )
    result = await anyio.run_process(
        [sys.executable, "-c", script], cwd=ROOT, env=child_env(), check=False
    )
    assert result.returncode == 0, result.stderr.decode()
    assert result.stdout.decode().strip() == "ok"


@pytest.mark.slow
async def test_serve_otel_exports_spans_over_otlp(tmp_path: Path) -> None:
    """`frontmind serve --otel` sends its spans to the OTLP endpoint the standard
    variables name, the model calls with their token counts."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    from frontmind import Client
    from frontmind.server._asgi import serve_app
    from tests._daemon import daemon

    received: list[ExportTraceServiceRequest] = []

    async def traces(request: Request) -> Response:
        export = ExportTraceServiceRequest()
        export.ParseFromString(await request.body())
        received.append(export)
        return Response(b"", media_type="application/x-protobuf")

    collector = Starlette(routes=[Route("/v1/traces", traces, methods=["POST"])])
    async with serve_app(collector) as served:
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": served.url, "OTEL_SERVICE_NAME": "shop-agent"}
        async with daemon(tmp_path, "--otel", **env) as d:
            async with Client(d.url) as client:
                events = [e async for e in client.turn("ada", "remind me to call Bo in 5 minutes")]
            assert await d.stop() == 0  # the batch is flushed on the way out
    done = events[-1]
    assert isinstance(done, TurnCompleted)
    spans = [
        (resource.resource, span)
        for export in received
        for resource in export.resource_spans
        for scope in resource.scope_spans
        for span in scope.spans
    ]
    services = {
        a.value.string_value
        for resource, _ in spans
        for a in resource.attributes
        if a.key == "service.name"
    }
    assert services == {"shop-agent"}

    def attributes(span: Any) -> dict[str, int | str]:
        return {a.key: a.value.string_value or a.value.int_value for a in span.attributes}

    turn = [(s.name, attributes(s)) for _, s in spans]
    turn = [(name, a) for name, a in turn if a.get("frontmind.turn_id") == done.turn_id]
    names = [name for name, _ in turn]
    assert names.count("frontmind.turn") == 1
    assert names.count("frontmind.model_call") == done.model_calls == 2
    calls = [a for name, a in turn if name == "frontmind.model_call"]
    for key, total in (
        ("gen_ai.usage.input_tokens", done.usage.total_input),
        ("gen_ai.usage.cache_read.input_tokens", done.usage.cache_read_input_tokens),
        ("gen_ai.usage.cache_creation.input_tokens", done.usage.cache_creation_input_tokens),
        ("gen_ai.usage.output_tokens", done.usage.output_tokens),
    ):
        assert sum(int(a[key]) for a in calls) == total, key
