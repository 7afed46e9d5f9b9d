"""OpenTelemetry: a turn, each model call in it, and the store's retain, recall, reflect and
consolidate are spans (read here with the SDK's in-memory exporter); with OTEL_EXPORTER_OTLP_ENDPOINT
set a process sends them over OTLP/HTTP (to a local collector here), and without it sets nothing up."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from django.urls import reverse
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from chronicle.simulation.control import services
from chronicle.simulation.control.tasks import run_turn_task
from chronicle.simulation.run.models import Simulation
from devtools.fake_llm import FakeLLM, ok, tool_call
from memory.living.consolidation import consolidate_matching
from memory.services.store import reflect_on, retain
from memory.services import bank_create
from tests.factories import make_dinner

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def spans():
    """Every span the test makes, finished ones, from the SDK's in-memory exporter."""
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):  # the first test of the process: nothing exports otherwise
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield exporter
    exporter.shutdown()  # a provider keeps its processors: this one drops what later tests make


@pytest.fixture
def server():
    fake = FakeLLM().start()
    yield fake
    fake.stop()


@pytest.mark.django_db
def test_a_turn_is_a_span_with_its_model_calls_and_memory_work_inside(spans, user, server, client_for):
    client = client_for(user)
    response = client.post(reverse("simulation_create"), {
        "scenario": make_dinner(user).pk, "max_turns": 2, "speaking_order": "round_robin", "retrieval_mode": "tools",
        "scoring": "similarity", "provider": "openai", "base_url": server.base_url, "model": "fake-model",
        "timeout_s": 5, "max_tool_calls": 3, "tool_set": ["query_memory"], "temperature": 0.7, "max_tokens": 200,
        "pace_s": 0})
    assert response.status_code == 302, response.context["form"].errors
    simulation = Simulation.objects.owned_by(user).get()
    services.simulation_seed(simulation_id=simulation.pk)
    spans.clear()
    server.script(ok(tool_calls=[tool_call("query_memory", {"query": "where should we eat?"})],
                     prompt_tokens=700, completion_tokens=12),
                  ok("Bella's closed in May, Jordan.", prompt_tokens=800, completion_tokens=9))
    assert run_turn_task.apply(args=(simulation.pk, 0)).get() == "done"

    finished = spans.get_finished_spans()
    turn = next(s for s in finished if s.name == "wonda.turn")
    assert turn.attributes["wonda.simulation_id"] == simulation.pk and turn.attributes["wonda.turn"] == 1
    assert turn.attributes["wonda.turn.result"] == "done"
    inside = [s for s in finished if s.context.trace_id == turn.context.trace_id and s is not turn]
    calls = [s for s in inside if s.attributes.get("gen_ai.operation.name") == "chat"]
    # The speaker's two calls (a tool round, then the line) and the judgement of the line after it.
    assert len(calls) == 3 and all(s.name == "chat fake-model" for s in calls)
    assert [(s.attributes["gen_ai.usage.input_tokens"], s.attributes["gen_ai.usage.output_tokens"])
            for s in calls[:2]] == [(700, 12), (800, 9)]
    names = {s.name for s in inside}
    assert {"memory.recall", "memory.retain"} <= names  # the query_memory call, and the line kept
    recall_span = next(s for s in inside if s.name == "memory.recall")
    assert recall_span.attributes["memory.results"] >= 1


@pytest.mark.django_db
def test_the_stores_verbs_are_spans(spans, user):
    bank = bank_create(name="Flat", owner=user)
    for line in ("The ferry leaves at six.", "The ferry left late at six today.", "The ferry is always at six."):
        retain(bank=bank, agent="Ann", content=line, tags=["ferry"])
    reflect_on(bank, "Ann", "when does the ferry leave?")
    consolidate_matching(bank, "Ann", tags=["ferry"], threshold=0.5)
    by_name = {}
    for s in spans.get_finished_spans():
        by_name.setdefault(s.name, []).append(s)
    # The three lines, then the consolidation's summary.
    assert [s.attributes["memory.memories"] for s in by_name["memory.retain"]] == [1, 1, 1, 1]
    assert "memory.reflect" in by_name and "memory.recall" in by_name
    assert by_name["memory.consolidate"][0].attributes["memory.groups"] == 1


class _Collector(BaseHTTPRequestHandler):
    received: list[tuple[str, bytes]] = []

    def do_POST(self):
        self.received.append((self.path, self.rfile.read(int(self.headers.get("Content-Length") or 0))))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


SCRIPT = """
import django
django.setup()
from opentelemetry import trace
from core import tracing
with tracing.span("wonda.turn", **{"wonda.turn": 1}):
    tracing.record("memory.recall", 0.01, **{"memory.results": 3})
provider = trace.get_tracer_provider()
print(type(provider).__name__)
getattr(provider, "shutdown", lambda: None)()
"""


def _child(env: dict) -> str:
    run = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "DJANGO_SETTINGS_MODULE": "wonda_site.settings", **env})
    assert run.returncode == 0, run.stderr
    return run.stdout.strip().splitlines()[-1]


def test_spans_go_over_otlp_when_an_endpoint_is_set_and_nowhere_otherwise():
    collector = ThreadingHTTPServer(("127.0.0.1", 0), _Collector)
    threading.Thread(target=collector.serve_forever, daemon=True).start()
    try:
        endpoint = f"http://127.0.0.1:{collector.server_address[1]}"
        assert _child({"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_SERVICE_NAME": "wonda-test"}) == "TracerProvider"
        paths = [path for path, _body in _Collector.received]
        body = b"".join(body for _path, body in _Collector.received)
        assert paths and set(paths) == {"/v1/traces"}
        assert b"wonda.turn" in body and b"memory.recall" in body and b"wonda-test" in body
        _Collector.received.clear()
        env = {k: "" for k in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")}
        assert _child(env) == "ProxyTracerProvider" and _Collector.received == []  # off: the API's no-op
    finally:
        collector.shutdown()
        collector.server_close()
