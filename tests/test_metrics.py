"""/metrics: Prometheus text for staff or a scraper's token, refused to anyone else;
the named series carry a scripted run's turns and retrievals."""

from __future__ import annotations

import pytest
from django.test import Client

from chronicle.simulation.tasks import run_turn_task
from tests.chronicle.simulation.conftest import dinner  # noqa: F401  (fixture)
from tests.factories import start

pytestmark = pytest.mark.django_db


def test_metrics_after_a_scripted_run(user, staff_user, client_for, dinner, settings):  # noqa: F811
    simulation = start(user, dinner, max_turns=4, retrieval_mode="prepopulate")
    for index in range(4):  # Alex speaks twice: the second time its sheet and scene come from the cache
        assert run_turn_task.apply(args=(simulation.pk, index)).get() == "done"

    assert Client().get("/metrics").status_code == 403
    assert client_for(user).get("/metrics").status_code == 403  # a writer is not staff
    text = client_for(staff_user).get("/metrics").content.decode()
    assert 'wonda_turns{status="done"} 4.0' in text
    for series in ('wonda_turn_seconds_bucket{le="+Inf"} 4.0', 'wonda_turn_memory_ms_count 4.0',
                   'wonda_tool_latency_ms_bucket{le="+Inf",tool="prepopulate"}', 'wonda_retrieval_latency_ms_count{path="',
                   'wonda_llm_errors_total{kind="timeout"} 0.0', "wonda_queue_depth", "wonda_memories_total",
                   "wonda_embeddings_cached_total"):
        assert series in text, series
    assert 'path="cache"' in text  # the sheet and scene, kept between turns, say so

    settings.METRICS_TOKEN = "scrape-me"
    assert Client().get("/metrics", HTTP_AUTHORIZATION="Bearer scrape-me").status_code == 200
    assert Client().get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 403
