"""Daemon metrics with prometheus_client: durations in seconds, histograms, process metrics.

Each daemon app has its own registry (so several apps in one process, as in tests, never
share counters); the process and platform collectors are registered on it too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import get_args

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from actors import Admission, TurnCompleted
from storage import TurnOutcome, TurnUsage

from .._gc import full_collections

__all__ = ["CONTENT_TYPE", "Metrics"]

CONTENT_TYPE = CONTENT_TYPE_LATEST
_OUTCOMES: tuple[TurnOutcome, ...] = get_args(TurnOutcome)
_SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)


class Metrics:
    def __init__(self) -> None:
        self.registry = registry = CollectorRegistry()
        ProcessCollector(registry=registry)
        PlatformCollector(registry=registry)
        GCCollector(registry=registry)  # python_gc_collections_total by generation
        registry.register(_FullCollections())
        self.turn_errors = Counter(
            "frontmind_turn_errors",
            "Turns that ended with an error event, by its type.",
            ["type"],
            registry=registry,
        )
        self.responses = Counter(
            "frontmind_http_responses",
            "HTTP responses by status code (429: busy, 5xx: failures; 499: the client "
            "closed the connection before an answer, none was sent).",
            ["code"],
            registry=registry,
        )
        self.compose = Histogram(
            "frontmind_compose_seconds",
            "Time to compose a turn's context.",
            buckets=_SECONDS,
            registry=registry,
        )
        self.first_token = Histogram(
            "frontmind_first_token_seconds",
            "Time from the turn's start to its first text.",
            buckets=_SECONDS,
            registry=registry,
        )
        self.turn_time = Histogram(
            "frontmind_turn_seconds",
            "Time from the turn's start to its commit.",
            buckets=_SECONDS,
            registry=registry,
        )
        self.queue_wait = Histogram(
            "frontmind_turn_queue_wait_seconds",
            "Time a turn (or a preview) waited for its slot ([turns] max_active) before it "
            "started.",
            buckets=_SECONDS,
            registry=registry,
        )

    def completed(self, event: TurnCompleted) -> None:
        timings = event.timings_ms
        self.compose.observe(timings.compose / 1000)
        if timings.first_token is not None:
            self.first_token.observe(timings.first_token / 1000)
        self.turn_time.observe(timings.total / 1000)

    def error(self, kind: str) -> None:
        self.turn_errors.labels(kind).inc()

    def response(self, status: int) -> None:
        self.responses.labels(str(status)).inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)

    def watch_admission(self, admission: Admission) -> None:
        """The turn queue: its depth, the slots in use, refusals and each turn's wait."""
        admission.on_wait = self.queue_wait.observe
        self.registry.register(_Queue(admission))

    def watch_warm_ups(self, source: Callable[[], tuple[int, TurnUsage]]) -> None:
        """Count the cache warm-ups `source` reports (`Frontmind.warm_ups`)."""
        self.registry.register(_WarmUps(source))

    def watch_turns(
        self, source: Callable[[], tuple[Mapping[TurnOutcome, int], TurnUsage]]
    ) -> None:
        """The turns by outcome and their tokens as `source` counts them
        (`Frontmind.turn_totals`): from the records the engine wrote, not the streams'
        last events. A reader that leaves may leave after its turn committed (then it
        is completed), and a failed or cancelled turn's error event has no usage though
        its calls were paid for."""
        self.registry.register(_Turns(source))


def _by_kind(family: CounterMetricFamily, usage: TurnUsage) -> CounterMetricFamily:
    family.add_metric(["cache_read"], usage.cache_read_input_tokens)
    family.add_metric(["cache_write"], usage.cache_creation_input_tokens)
    family.add_metric(["uncached_input"], usage.input_tokens)
    family.add_metric(["output"], usage.output_tokens)
    return family


class _Turns(Collector):
    """The turns by outcome and every turn's tokens by kind, as their records say."""

    def __init__(self, source: Callable[[], tuple[Mapping[TurnOutcome, int], TurnUsage]]) -> None:
        self._source = source

    def collect(self) -> Iterator[Metric]:
        outcomes, usage = self._source()
        turns = CounterMetricFamily("frontmind_turns", "Turns by outcome.", labels=["outcome"])
        for outcome in _OUTCOMES:  # each present, at 0 at first
            turns.add_metric([outcome], outcomes.get(outcome, 0))
        yield turns
        yield _by_kind(
            CounterMetricFamily(
                "frontmind_tokens",
                "Tokens by kind, of every turn the instance ran (completed or not).",
                labels=["kind"],
            ),
            usage,
        )


class _WarmUps(Collector):
    """The cache warm-ups sent and their tokens: costs beside the turns' own."""

    def __init__(self, source: Callable[[], tuple[int, TurnUsage]]) -> None:
        self._source = source

    def collect(self) -> Iterator[Metric]:
        count, usage = self._source()
        yield CounterMetricFamily(
            "frontmind_cache_warm_ups", "Cache warm-up requests sent.", value=count
        )
        yield _by_kind(
            CounterMetricFamily(
                "frontmind_cache_warm_up_tokens", "Cache warm-up tokens by kind.", labels=["kind"]
            ),
            usage,
        )


class _Queue(Collector):
    """The turn queue as it is now, read when scraped (the engine keeps the numbers)."""

    def __init__(self, admission: Admission) -> None:
        self._admission = admission

    def collect(self) -> Iterator[Metric]:
        a = self._admission
        yield GaugeMetricFamily(
            "frontmind_turn_queue_depth",
            "Turns (and previews) waiting for a slot.",
            value=a.waiting,
        )
        yield GaugeMetricFamily(
            "frontmind_turns_active",
            "Turns (and previews) holding a slot (composing or streaming).",
            value=a.active,
        )
        yield GaugeMetricFamily(
            "frontmind_turns_max_active", "Turn slots ([turns] max_active).", value=a.max_active
        )
        yield GaugeMetricFamily(
            "frontmind_turns_nested",
            "Turns started from a running turn's tool (sub-agents), each with a slot of its "
            "own beyond [turns] max_active (counted in frontmind_turns_active once running).",
            value=a.nested,
        )
        yield CounterMetricFamily(
            "frontmind_turns_refused",
            "Turns (and previews) refused at the door: their continuum's queue full "
            "([turns] max_queued) or their wait past [turns] max_wait_s.",
            value=a.refused,
        )


class _FullCollections(Collector):
    """Full garbage collections under the `idle` policy, by when they ran: `turn` (with a
    turn in flight: the tail latency the policy exists to avoid), `idle`, `other`."""

    def collect(self) -> Iterator[Metric]:
        counts = full_collections()
        if counts is None:
            return
        family = CounterMetricFamily(
            "frontmind_gc_full_collections",
            "Full garbage collections under [runtime] gc = idle, by when they ran.",
            labels=["when"],
        )
        for when, count in counts.items():
            family.add_metric([when], count)
        yield family
