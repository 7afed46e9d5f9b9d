"""Degraded mode: with the embedder unreachable (an HTTP embedding backend on a closed port), a
turn still completes; its searches are keyword-only and say so (tool result, inspector, note); its
line is kept and gets its vector when the embedder is back; a banner and /healthz name the mode."""

from __future__ import annotations

import json
from contextlib import contextmanager

import pytest
from django.test import override_settings
from django.urls import reverse

from chronicle.simulation.run.models import Simulation
from chronicle.simulation.control.tasks import run_turn_task
from memory.embedding.cache import clear_local
from memory.embedding import health
from memory.models import Memory
from memory.tasks import reembed_stale_task
from tests.factories import start

pytestmark = pytest.mark.django_db

UNREACHABLE = {"EMBEDDING_BACKEND": "openai", "EMBEDDING_URL": "http://127.0.0.1:9/v1"}


@contextmanager
def embedder_down():
    """The embedder fails inside (a fresh process would meet it so: nothing cached in memory)."""
    clear_local()
    with override_settings(**UNREACHABLE):
        yield
    clear_local()


@pytest.fixture(autouse=True)
def _healthy_afterwards(monkeypatch):
    caught_up = []  # what a worker would be sent when the embedder is back (run here by hand instead,
    monkeypatch.setattr(reembed_stale_task, "delay", lambda: caught_up.append(1))  # not by the shared worker)
    yield caught_up
    health.mark_up()  # no banner left for the next test


def test_a_turn_completes_on_keywords_and_its_line_catches_up(user, dinner, client_for, _healthy_afterwards):
    simulation = start(user, dinner, max_turns=3, retrieval_mode="both")  # seeded while it worked
    with embedder_down():
        assert run_turn_task.apply(args=(simulation.pk, 0)).get() == "done"
        assert run_turn_task.apply(args=(simulation.pk, 1)).get() == "done"
    simulation.refresh_from_db()
    assert simulation.status == Simulation.Status.RUNNING  # not paused
    turn = simulation.turns.get(index=1)
    assert turn.status == "done" and "found by their words only" in turn.note

    # Searches that needed a new query vector ran on keywords, and say so to the agent.
    keyword = [r for r in turn.retrievals.all() if r.path == "keyword"]
    assert keyword, [(r.tool, r.path) for r in turn.retrievals.all()]
    for retrieval in keyword:
        if retrieval.tool != "prepopulate":
            assert retrieval.response["search_mode"].startswith("keyword only")
    # Each listener kept the line, without its vector for now (out of vector search, not lost).
    lines = Memory.objects.in_bank(simulation.bank).filter(kind="episodic", turn__in=[1, 2])
    assert lines.count() >= 4 and all(m.embedding_stale and m.metadata.get("keyword_only") for m in lines)

    # The writer sees it: the inspector marks the retrievals, a banner says why, /healthz names it.
    page = client_for(user).get(reverse("turn_inspect", args=[simulation.pk, 1])).content.decode()
    assert "keyword only" in page
    home = client_for(user).get("/").content.decode()
    assert 'id="degraded-banner"' in home and "The embedding model is unavailable." in home
    body = json.loads(client_for(user).get("/healthz").content)
    assert body["parts"]["embedding"]["mode"] == "keyword only"
    assert "127.0.0.1:9" in body["parts"]["embedding"]["error"]

    # The embedder is back: the lines get their vectors (and their reply keys) and are found by meaning.
    assert reembed_stale_task() >= lines.count()
    assert not lines.filter(embedding_stale=True).exists()
    assert health.down() is None  # the first success cleared it, and asked a worker to catch up
    assert _healthy_afterwards == [1]


def test_a_search_tool_answers_on_keywords_when_the_embedder_is_down(user, dinner):
    from memory.recalling.tools import ToolContext, call_tool

    simulation = start(user, dinner, max_turns=1)
    Memory.objects.create(bank=simulation.bank, agent="Alex", kind="episodic", content="Jordan said: the lasagne "
                          "at Bella's is the best in town.", turn=1, speaker="Jordan", embedding=[1.0] + [0.0] * 383)
    with embedder_down():
        result = call_tool("query_memory", {"query": "which lasagne is best?"},
                           context=ToolContext(bank=simulation.bank, agent="Alex"))
    assert not result.error and result.path == "keyword"
    assert "lasagne" in result.response["memories"][0]["content"]
    assert result.response["search_mode"].startswith("keyword only")
    assert health.down() is not None


def test_healthz_calls_a_failing_embedder_degraded_not_down(client, monkeypatch):
    from wonda_site import views

    worker = {"ok": True, "workers": ["wonda@test"]}
    monkeypatch.setattr(views, "_check_redis_and_pool", lambda: (
        {"ok": True, "version": "7"}, dict(worker), {"ok": True, "model": "all-MiniLM-L6-v2", "dimension": 384}))
    assert json.loads(client.get("/healthz").content)["status"] == "ok"
    health.mark_down("embedding server at http://embed.example/v1 failed: timed out")
    response = client.get("/healthz")
    body = json.loads(response.content)
    assert response.status_code == 200 and body["status"] == "degraded" and body["down"] == []
    assert body["degraded"] == ["embedding"] and "timed out" in body["parts"]["embedding"]["error"]
