"""Token counts: the local API's count beside the input figures the live API reported.

Each sample is a request body and the live API's total input for it (`input_tokens +
cache_creation_input_tokens + cache_read_input_tokens` of its response, or a
`count_tokens` answer). Samples come from two places:

- `DOC_SAMPLES` below: requests whose live counts are published (the docs' examples and
  public reports), small enough to state here;
- recorded traffic: VCR cassettes (YAML with `interactions`, as pydantic-ai's tests keep
  them) in a directory given with `--cassettes DIR`. This repository ships none of them:
  point it at a checkout of a project that publishes its recordings, e.g.
  `--cassettes ../pydantic-ai/tests`. Requests to api.anthropic.com/v1/messages (and
  count_tokens) answered 200 are taken; requests with server tools or MCP servers are
  left out (the live API counts what their tools fetched, which the request does not
  hold) or context management (the server edits them before it counts), and so are
  requests with images or documents by URL or file (their size is not
  in the request) and retired models.

Per sample: source, live count, local count, error; then the median and 90th-percentile
absolute error (goal: 10% and 25%), overall and per model. Needs PyYAML for cassettes.

    .venv/bin/python -m bench.token_calibration --cassettes PATH
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import statistics
from pathlib import Path
from typing import Any

import msgspec

from bench._common import write_results
from frontmind.localapi import MODELS, MessagesRequest, ThinkingSigner
from frontmind.localapi._app import count_request_tokens
from frontmind.localapi._validate import ApiError

# (source, request body, live input tokens)
DOC_SAMPLES: list[tuple[str, dict[str, Any], int]] = [
    (
        "public report (curl against claude-sonnet-4-20250514): 'Hello, world'",
        {
            "model": "claude-sonnet-4-5",
            "max_tokens": 1024,
            "messages": [{"role": "user", "content": "Hello, world"}],
        },
        10,
    ),
]

_MESSAGE_START = re.compile(r'data: (\{"type":\s*"message_start".*)')


def _total(usage: dict[str, Any]) -> int:
    keys = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    return sum(int(usage.get(k) or 0) for k in keys)


def _live_count(uri: str, response: dict[str, Any]) -> int | None:
    body = response.get("parsed_body")
    if isinstance(body, dict):
        if "count_tokens" in uri:
            value = body.get("input_tokens")
            return int(value) if isinstance(value, int) else None
        if isinstance(body.get("usage"), dict):
            return _total(body["usage"])
    if isinstance(body, list):
        for event in body:
            if isinstance(event, dict) and event.get("type") == "message_start":
                return _total(event["message"]["usage"])
    raw = body if isinstance(body, str) else (response.get("body") or {})
    if isinstance(raw, dict):
        raw = raw.get("string")
    if isinstance(raw, str):
        match = _MESSAGE_START.search(raw)
        if match is not None:
            return _total(json.loads(match.group(1))["message"]["usage"])
    return None


def _countable(body: dict[str, Any]) -> bool:
    """No server tools, MCP servers, unsized media or retired models (see above)."""
    if body.get("mcp_servers") or body.get("model") not in MODELS:
        return False
    if body.get("context_management"):  # the server edits (compacts) before counting
        return False
    if any(tool.get("type") not in (None, "custom") for tool in body.get("tools") or ()):
        return False

    def unsized(block: Any) -> bool:
        if not isinstance(block, dict):
            return False
        source = block.get("source")
        if block.get("type") in ("image", "document") and isinstance(source, dict):
            return source.get("type") in ("url", "file")
        content = block.get("content")
        return isinstance(content, list) and any(unsized(part) for part in content)

    for message in body.get("messages") or ():
        content = message.get("content")
        if isinstance(content, list) and any(unsized(block) for block in content):
            return False
    return True


def cassette_samples(root: Path) -> list[tuple[str, dict[str, Any], int]]:
    import yaml  # type: ignore[import-untyped]

    samples: list[tuple[str, dict[str, Any], int]] = []
    seen: set[str] = set()
    for path in sorted(root.rglob("*.yaml")):
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (yaml.YAMLError, UnicodeDecodeError):
            continue
        if not isinstance(data, dict):
            continue
        for index, interaction in enumerate(data.get("interactions") or ()):
            request, response = interaction.get("request", {}), interaction.get("response", {})
            uri = str(request.get("uri", ""))
            if "api.anthropic.com/v1/messages" not in uri:
                continue
            if (response.get("status") or {}).get("code") != 200:
                continue
            body = request.get("parsed_body")
            if not isinstance(body, dict) or not _countable(body):
                continue
            live = _live_count(uri, response)
            digest = hashlib.sha1(json.dumps(body, sort_keys=True).encode()).hexdigest()
            if live is None or digest in seen:
                continue
            seen.add(digest)
            samples.append((f"{path.relative_to(root)}#{index}", body, live))
    return samples


def local_count(body: dict[str, Any]) -> int | str:
    """The local API's count, or why it refused the request."""
    body = {k: v for k, v in body.items() if k not in ("stream",)}
    body.setdefault("max_tokens", MODELS[body["model"]].max_output)
    try:
        request = msgspec.json.decode(json.dumps(body).encode(), type=MessagesRequest)
        return count_request_tokens(request, "2023-06-01", True, ThinkingSigner())
    except (ApiError, msgspec.ValidationError) as exc:
        return f"refused: {exc}"


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(int(q * len(ordered)), len(ordered) - 1)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cassettes", type=Path, help="a directory of VCR cassettes")
    args = parser.parse_args()
    samples = list(DOC_SAMPLES)
    if args.cassettes is not None:
        samples += cassette_samples(args.cassettes)
    rows: list[dict[str, Any]] = []
    for source, body, live in samples:
        local = local_count(body)
        row: dict[str, Any] = {"source": source, "model": body["model"], "live": live}
        if isinstance(local, str):
            row["refused"] = local
        else:
            row.update(local=local, error=(local - live) / live)
        rows.append(row)
    counted = [r for r in rows if "error" in r]
    print("| source | model | live | local | error |")
    print("|---|---|---|---|---|")
    for r in counted:
        print(f"| {r['source']} | {r['model']} | {r['live']} | {r['local']} | {r['error']:+.1%} |")
    for r in rows:
        if "refused" in r:
            print(f"refused: {r['source']}: {r['refused']}")
    errors = [abs(r["error"]) for r in counted]
    summary: dict[str, Any] = {
        "samples": len(counted),
        "refused": len(rows) - len(counted),
        "median_abs_error": statistics.median(errors),
        "p90_abs_error": _percentile(errors, 0.9),
        "by_model": {},
    }
    for model in sorted({r["model"] for r in counted}):
        errs = [abs(r["error"]) for r in counted if r["model"] == model]
        summary["by_model"][model] = {
            "samples": len(errs),
            "median_abs_error": statistics.median(errs),
            "p90_abs_error": _percentile(errs, 0.9),
        }
    print(json.dumps(summary, indent=2))
    write_results("token_calibration", {"summary": summary, "rows": rows})


if __name__ == "__main__":
    main()
