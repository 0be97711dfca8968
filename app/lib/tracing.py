"""Optional OpenTelemetry traces: Litestar's OpenTelemetry plugin exporting over OTLP/HTTP
when `OTEL_EXPORTER_OTLP_ENDPOINT` is set (docs/operations.md, "Traces").

The SDK and exporter are the optional `otel` extra (`pip install -e '.[otel]'`): they are
imported only when tracing is asked for, so a service without the extra (or without the
setting) loads none of it. That is why the imports below sit inside the function.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from app.lib.settings import SettingsError

#: Spans for these would only repeat themselves every few seconds.
UNTRACED_PATHS = ["/metrics", "/health"]


def tracing_plugin(endpoint: str, service: str) -> tuple[Any, Callable[[], None]] | None:
    """(the Litestar plugin, the provider's shutdown: flushes the last spans), or None
    when `endpoint` is empty."""
    if not endpoint:
        return None
    try:
        from litestar.plugins.opentelemetry import OpenTelemetryConfig, OpenTelemetryPlugin
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as exc:
        raise SettingsError(
            f"OTEL_EXPORTER_OTLP_ENDPOINT is set but the `otel` extra is not installed "
            f"({exc.name}): pip install -e '.[otel]', or unset it"
        ) from exc
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    # An explicit endpoint is used as given: the traces path is ours to add.
    exporter = OTLPSpanExporter(endpoint=f"{endpoint.rstrip('/')}/v1/traces", timeout=10)
    provider.add_span_processor(BatchSpanProcessor(exporter, max_queue_size=2048))
    config = OpenTelemetryConfig(tracer_provider=provider, exclude=UNTRACED_PATHS)
    return OpenTelemetryPlugin(config), provider.shutdown
