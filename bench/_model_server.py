"""The local Messages API in a process of its own, for benchmarks that must not count the
simulated model's work as Frontmind's. Prints its base URL, serves until terminated.

    python -m bench._model_server [--ttft-ms 100] [--tokens-per-second 400]
"""

from __future__ import annotations

import argparse
import gc
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream

from bench._common import run
from frontmind.localapi import Latency, LocalMessagesAPI

ROOT = Path(__file__).resolve().parent.parent


@asynccontextmanager
async def model_server(
    ttft_ms: float, tokens_per_second: float
) -> AsyncIterator[tuple[str, Process]]:
    """Start the server as a child process; yields its base URL and the process."""
    command = [
        sys.executable,
        "-m",
        "bench._model_server",
        "--ttft-ms",
        str(ttft_ms),
        "--tokens-per-second",
        str(tokens_per_second),
    ]
    process = await anyio.open_process(command, cwd=ROOT)
    assert process.stdout is not None
    async with process:
        with anyio.fail_after(30):
            line = await BufferedByteReceiveStream(process.stdout).receive_until(b"\n", 200)
        try:
            yield line.decode(), process
        finally:
            process.terminate()
            await process.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ttft-ms", type=float, default=100.0)
    parser.add_argument("--tokens-per-second", type=float, default=400.0)
    args = parser.parse_args()
    latency = Latency(args.ttft_ms / 1000, args.tokens_per_second)

    async def body() -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async with LocalMessagesAPI(latency=latency) as api:
                # The simulated model must not stall the benchmarks: its startup objects
                # (some 180,000) made each of its full collections 270–510 ms under load,
                # landing in whichever side of a pair was streaming; frozen, 0.3 ms.
                gc.collect()
                gc.freeze()
                print(api.base_url, flush=True)
                async for _ in signals:
                    break

    run(body)


if __name__ == "__main__":
    main()
