"""`frontmind serve --otel`: export the daemon's spans with OpenTelemetry's SDK.

The spans themselves are made by `actors._observe` through the OpenTelemetry API; they
are recorded only once an SDK tracer provider is installed. The daemon installs one
when asked (`--otel`) or when the standard variables ask for an exporter
(`OTEL_TRACES_EXPORTER`, `OTEL_EXPORTER_OTLP_ENDPOINT`,
`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`), unless `OTEL_SDK_DISABLED=true`. Everything else
comes from the SDK's own variables (https://opentelemetry.io/docs/specs/otel/configuration/sdk-environment-variables/):
`OTEL_TRACES_EXPORTER` (`otlp`, the default, over HTTP/protobuf; `console`; `none`;
several comma-separated), the OTLP endpoint, headers and timeout, `OTEL_SERVICE_NAME`
(default `frontmind`), `OTEL_RESOURCE_ATTRIBUTES`, and the batch processor's
`OTEL_BSP_*`. A library that embeds Frontmind sets up its own provider instead.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from .._exceptions import ConfigError

__all__ = ["setup_tracing"]

_ASKS_FOR_EXPORT = (
    "OTEL_TRACES_EXPORTER",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
)
_NEEDS_EXTRA = "pip install '.[otel]' in Frontmind's clone"


def setup_tracing(
    asked: bool, environ: Mapping[str, str] | None = None
) -> Callable[[], None] | None:
    """Install an SDK tracer provider with the configured exporters; returns the
    function that flushes and stops it, or None when tracing is not wanted."""
    env = os.environ if environ is None else environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    if not asked and not any(env.get(name) for name in _ASKS_FOR_EXPORT):
        return None
    try:
        from opentelemetry import trace
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter
    except ImportError:
        raise ConfigError(f"tracing needs OpenTelemetry's SDK: {_NEEDS_EXTRA}") from None
    exporters: list[Any] = []
    for name in (n.strip() for n in env.get("OTEL_TRACES_EXPORTER", "otlp").split(",")):
        if name == "otlp":
            try:
                from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
                    OTLPSpanExporter,
                )
            except ImportError:
                raise ConfigError(f"the otlp exporter needs {_NEEDS_EXTRA}") from None
            exporters.append(OTLPSpanExporter())  # endpoint, headers: the OTEL_* variables
        elif name == "console":
            exporters.append(ConsoleSpanExporter())
        elif name != "none":
            raise ConfigError(
                f"OTEL_TRACES_EXPORTER: unknown exporter {name!r} (otlp, console or none)"
            )
    resource = Resource.create(
        {} if env.get("OTEL_SERVICE_NAME") else {"service.name": "frontmind"}
    )
    provider = TracerProvider(resource=resource)
    for exporter in exporters:
        provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    return provider.shutdown
