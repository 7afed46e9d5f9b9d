"""/metrics: Prometheus text for staff or a scraper's token, refused to anyone else;
the named series carry a scripted run's turns and retrievals."""

from __future__ import annotations

import pytest
from django.test import Client

from chronicle.simulation.control.tasks import run_turn_task
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


def _samples(text: str) -> dict[tuple, float]:
    from prometheus_client.parser import text_string_to_metric_families

    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_the_stores_operations_are_counted_as_seed_004_names_them(user, staff_user, client_for):
    from api.models import ApiToken
    from memory.services import bank_create

    bank = bank_create(name="Ava's woods", owner=user)
    raw = ApiToken.issue(user=user, name="tests")[1]
    staff = client_for(staff_user)
    before = _samples(staff.get("/metrics").content.decode())

    def post(verb, body):
        answer = Client().post(f"/api/banks/{bank.pk}/{verb}", body, content_type="application/json",
                               HTTP_AUTHORIZATION=f"Bearer {raw}")
        assert answer.status_code in (200, 201), answer.content
        return answer.json()

    post("retain", {"agent": "Ava", "content": "Ava saw wolves howling at the edge of the forest.", "importance": 4,
                    "tags": ["wolves"]})
    post("retain", {"agent": "Ava", "content": "Ava heard wolves howling by the forest edge.", "importance": 6})
    found = post("recall", {"query": "wolves howling", "agent": "Ava", "tags": ["wolves"], "tag_mode": "AnyStrict",
                            "similarity_threshold": 0})
    assert len(found) == 1
    assert len(post("consolidate", {"agent": "Ava", "threshold": 0.7})) == 1
    after = _samples(staff.get("/metrics").content.decode())

    def grew(name, **labels):
        key = (name, tuple(sorted(labels.items())))
        return after.get(key, 0) - before.get(key, 0)

    assert grew("memory_operations_total", operation="retain") == 3  # two retains and the summary
    assert grew("memory_operations_total", operation="recall") == 1
    assert grew("memory_operations_total", operation="consolidate") == 1
    assert grew("memory_operation_duration_seconds_count", operation="recall") == 1
    assert grew("memory_operation_duration_seconds_bucket", operation="recall", le="+Inf") == 1
    assert grew("memory_retentions_total", kind="episodic") == 3
    assert grew("memory_importance_bucket", kind="episodic", le="4") == 1  # 4; then 6 and the summary's 6.6
    assert grew("memory_importance_bucket", kind="episodic", le="7") == 3
    assert grew("memory_recall_results_count", filter_mode="AnyStrict") == 1
    assert grew("memory_recall_results_sum", filter_mode="AnyStrict") == 1
    assert grew("memory_consolidation_groups_total") == 1 and grew("memory_consolidation_memories_total") == 2
    assert grew("memory_embeddings_generated_total") >= 4  # two memories, the query, the summary


def test_the_capture_filters_effectiveness_is_counted(user, staff_user, client_for):
    """Seed 003's filter effectiveness: each listener's copy of a line heard, kept or filtered out and why."""
    from memory.forming.importance import CaptureFilters
    from memory.services import bank_create
    from memory.forming.capture import remember_utterance

    bank = bank_create(name="Echoes", owner=user)
    staff = client_for(staff_user)
    before = _samples(staff.get("/metrics").content.decode())
    filters = CaptureFilters(duplicate_threshold=0.95)
    line = "The bridge washed away in the night and the carter turned back."
    first = remember_utterance(bank=bank, speaker="Bo", text=line, turn=1, listeners=["Ann", "Cy"], filters=filters)
    again = remember_utterance(bank=bank, speaker="Bo", text=line, turn=2, listeners=["Ann", "Cy"], filters=filters)
    assert len(first) == 2 and len(again) == 0 and {s.reason for s in again.skipped} == {"duplicate"}
    after = _samples(staff.get("/metrics").content.decode())

    def grew(outcome):
        key = ("memory_capture_lines_total", (("outcome", outcome),))
        return after.get(key, 0) - before.get(key, 0)

    assert grew("kept") == 2 and grew("duplicate") == 2
