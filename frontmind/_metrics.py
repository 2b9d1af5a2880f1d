"""Daemon metrics in the Prometheus text format (no client library needed)."""

from __future__ import annotations

import bisect
from collections import Counter

from actors import TurnCompleted

__all__ = ["Metrics"]

_LATENCY_BUCKETS_MS = (1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000)


class _Histogram:
    def __init__(self, name: str, help_text: str) -> None:
        self.name = name
        self.help = help_text
        self.counts = [0] * (len(_LATENCY_BUCKETS_MS) + 1)
        self.total = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(_LATENCY_BUCKETS_MS, value)] += 1
        self.total += value
        self.count += 1

    def render(self) -> list[str]:
        lines = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} histogram"]
        running = 0
        for bound, count in zip(_LATENCY_BUCKETS_MS, self.counts, strict=False):
            running += count
            lines.append(f'{self.name}_bucket{{le="{bound:g}"}} {running}')
        lines.append(f'{self.name}_bucket{{le="+Inf"}} {self.count}')
        lines.append(f"{self.name}_sum {self.total:g}")
        lines.append(f"{self.name}_count {self.count}")
        return lines


class Metrics:
    def __init__(self) -> None:
        self.turns: Counter[str] = Counter()
        self.errors: Counter[str] = Counter()
        self.tokens: Counter[str] = Counter()
        self.compose = _Histogram("frontmind_compose_ms", "Time to compose a turn's context.")
        self.first_token = _Histogram("frontmind_first_token_ms", "Time to the first text.")
        self.total = _Histogram("frontmind_turn_ms", "Time from request to turn committed.")

    def completed(self, event: TurnCompleted) -> None:
        self.turns["completed"] += 1
        self.compose.observe(event.timings_ms.compose)
        if event.timings_ms.first_token is not None:
            self.first_token.observe(event.timings_ms.first_token)
        self.total.observe(event.timings_ms.total)
        usage = event.usage
        self.tokens["cache_read"] += usage.cache_read_input_tokens
        self.tokens["cache_write"] += usage.cache_creation_input_tokens
        self.tokens["uncached_input"] += usage.input_tokens
        self.tokens["output"] += usage.output_tokens

    def error(self, kind: str) -> None:
        self.turns["failed"] += 1
        self.errors[kind] += 1

    def render(self) -> str:
        lines = [
            "# HELP frontmind_turns_total Turns by outcome.",
            "# TYPE frontmind_turns_total counter",
        ]
        for status in ("completed", "failed"):
            lines.append(f'frontmind_turns_total{{status="{status}"}} {self.turns[status]}')
        lines += [
            "# HELP frontmind_turn_errors_total Turn errors by type.",
            "# TYPE frontmind_turn_errors_total counter",
        ]
        lines += [
            f'frontmind_turn_errors_total{{type="{k}"}} {v}' for k, v in sorted(self.errors.items())
        ]
        lines += [
            "# HELP frontmind_tokens_total Tokens by kind.",
            "# TYPE frontmind_tokens_total counter",
        ]
        for kind in ("cache_read", "cache_write", "uncached_input", "output"):
            lines.append(f'frontmind_tokens_total{{kind="{kind}"}} {self.tokens[kind]}')
        for histogram in (self.compose, self.first_token, self.total):
            lines += histogram.render()
        return "\n".join(lines) + "\n"
