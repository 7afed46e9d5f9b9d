"""OpenTelemetry spans: a turn, each model call, and the memory store's retain, recall, reflect and
consolidate. Exported over OTLP (HTTP) when ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) is set; otherwise nothing is set up and every span is the
API's no-op, which costs a function call.

`configure` runs once per process (wonda_site's AppConfig.ready: the web server, each worker, the MCP
server, a command); the SDK's batch processor starts its thread again in a forked pool process. The
exporter reads the other standard variables itself (``OTEL_EXPORTER_OTLP_HEADERS``, …), and
``OTEL_SERVICE_NAME`` names the service (``wonda`` by default).
"""

from __future__ import annotations

import functools
import os
import time
from contextlib import contextmanager

from opentelemetry import trace

_configured = False


def configure(service_name: str = "wonda") -> bool:
    """Export spans over OTLP if an endpoint is set (once per process); True if it was set up."""
    global _configured
    endpoint = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    if _configured or not endpoint or os.environ.get("OTEL_SDK_DISABLED", "").lower() == "true":
        return False
    # Imported only here: a deployment without an endpoint never loads the SDK.
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME", service_name)}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    _configured = True
    return True


def _tracer():
    return trace.get_tracer("wonda")


@contextmanager
def span(name: str, **attributes):
    """A span around the block, a child of the current one; None-valued attributes are left out."""
    with _tracer().start_as_current_span(name, attributes=_clean(attributes)) as current:
        yield current


def traced(name: str, **attributes):
    """A span around each call of the decorated function."""
    def decorate(function):
        @functools.wraps(function)
        def call(*args, **kwargs):
            with span(name, **attributes):
                return function(*args, **kwargs)
        return call
    return decorate


def record(name: str, seconds: float, **attributes) -> None:
    """A span for work that has just ended and took `seconds` (the store's operations, timed where
    they are counted for /metrics), a child of the current span."""
    end = time.time_ns()
    current = _tracer().start_span(name, start_time=end - int(seconds * 1e9), attributes=_clean(attributes))
    current.end(end_time=end)


def _clean(attributes: dict) -> dict:
    return {key: value for key, value in attributes.items() if value is not None}
