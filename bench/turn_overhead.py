"""Turn overhead: Frontmind's own time around a model call, apart from the model's.

Against the local Messages API with a configured time to first token: from the turn
request to the request reaching the server (compose, layout, SDK, HTTP), and from the
model's last event to the turn committed and completed (parse, tool check, shielded
commit, event). The simulated model time is reported separately.

    .venv/bin/python -m bench.turn_overhead [--turns 100] [--ttft-ms 150]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from actors import AnthropicModel, TurnCompleted
from bench._common import run, summary, write_results
from frontmind import Config, Frontmind
from frontmind.localapi import Latency, LocalMessagesAPI


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=100)
    parser.add_argument("--ttft-ms", type=float, default=150.0)
    args = parser.parse_args()

    async def body() -> None:
        before: list[float] = []
        after: list[float] = []
        model_time: list[float] = []
        total: list[float] = []
        latency = Latency(time_to_first_token=args.ttft_ms / 1000, tokens_per_second=2000)
        with tempfile.TemporaryDirectory() as tmp:
            async with LocalMessagesAPI(latency=latency) as api:
                model = AnthropicModel(
                    api_key="bench", base_url=api.base_url, max_retries=0, timeout=30
                )
                async with Frontmind.open(Path(tmp), Config(), model=model) as fm:
                    for i in range(args.turns):
                        requests_before = len(api.state.requests)
                        started = time.perf_counter()
                        completed_at = None
                        async for event in fm.turn("bench", f"Turn {i}: how is the work going?"):
                            if isinstance(event, TurnCompleted):
                                completed_at = time.perf_counter()
                        assert completed_at is not None, f"turn {i} did not complete"
                        assert len(api.state.requests) == requests_before + 1
                        received = api.state.requests[-1].received_at
                        finished = api.state.finished_at[-1]
                        if i >= 5:  # warm-up: connection set-up, first compilation
                            before.append(received - started)
                            after.append(completed_at - finished)
                            model_time.append(finished - received)
                            total.append(completed_at - started)
                await model.aclose()
        results = {
            "to_request_sent": summary(before),
            "after_last_event": summary(after),
            "model": summary(model_time),
            "total": summary(total),
        }
        own = [b + a for b, a in zip(before, after, strict=True)]
        results["frontmind_overhead"] = summary(own)
        print(f"configured time to first token: {args.ttft_ms:.0f} ms, {len(total)} turns")
        for name, label in (
            ("to_request_sent", "turn request -> request at the model"),
            ("after_last_event", "model's last event -> turn committed"),
            ("frontmind_overhead", "Frontmind's own overhead (sum)"),
            ("model", "simulated model time"),
            ("total", "whole turn"),
        ):
            r = results[name]
            print(
                f"  {label:<40} median {r['median_us'] / 1000:7.2f} ms  "
                f"p99 {r['p99_us'] / 1000:7.2f} ms"
            )
        write_results("turn_overhead", {"ttft_ms": args.ttft_ms, **results})

    run(body)


if __name__ == "__main__":
    main()
