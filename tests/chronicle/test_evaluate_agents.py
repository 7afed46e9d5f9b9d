"""`manage.py evaluate_agents`: a scripted scene replayed on a real worker, its probes asked through the agents' tools.

tests/fixtures/probes/every_kind.json has one probe of each kind, each answerable from memory (or,
for a forbid probe, out of the agent's reach), plus one that nothing can satisfy and one planted leak.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.db import connections

from chronicle.simulation.run.models import Simulation
from memory.models import MemoryBank

pytestmark = pytest.mark.worker

FILE = Path(__file__).resolve().parents[1] / "fixtures" / "probes" / "every_kind.json"
EXPECT_KINDS = ["self", "background", "scene", "other", "belief", "presence", "world_event", "action", "whisper",
                "said_when", "relationship", "reflection"]
FORBID_KINDS = ["whisper", "absent", "secret"]


@pytest.fixture(scope="module")
def report(django_db_setup, django_db_blocker):
    out, err = io.StringIO(), io.StringIO()
    with django_db_blocker.unblock():
        try:
            # Paced as a model paces its lines (a short pause: the figures do not depend on it).
            call_command("evaluate_agents", str(FILE), "--mode", "tools", "--pace", "0.05", stdout=out, stderr=err)
        finally:
            print(err.getvalue())
        leftovers = Simulation.objects.count(), MemoryBank.objects.count()
        # Outside any test, after a browser test (Playwright's event loop), these queries get a
        # connection of their own, which would stay open to the end of the run and keep the test
        # database from being dropped: closed here.
        connections.close_all()
    return json.loads(out.getvalue().strip().splitlines()[-1]) | {"_leftovers": leftovers, "_progress": err.getvalue()}


def test_it_prints_every_figure_and_leaves_nothing_behind(report):
    for key in ("files", "probes", "k", "hit_at_1", "hit_at_k", "by_kind", "leaks", "redundancy", "calibration",
                "tokens", "prefix_share", "aux_calls_per_turn", "memory_ms_p50"):
        assert key in report
    assert report["files"] == ["every_kind.json"] and report["probes"] == 17 and report["k"] == 5
    assert {"brier", "ece"} <= set(report["calibration"])
    assert report["tokens"]["prompt_per_turn_p50"] > 0 and report["tokens"]["full_definition_per_turn_p50"] > 0
    assert 0 < report["prefix_share"] <= 1 and report["memory_ms_p50"] > 0
    # A replay counts the calls a model would get: the judgement after each line others heard, and
    # reflection's; no retrieval confidence was shown, so there is none to calibrate.
    assert report["aux_calls_per_turn"] >= 1
    assert report["calibration"]["shown"] is False and report["calibration"]["ece"] is None
    assert "asked 17 probes after turn 12" in report["_progress"]
    assert report["_leftovers"] == (0, 0)


@pytest.mark.parametrize("kind", EXPECT_KINDS)
def test_a_probe_of_each_kind_finds_what_the_agent_should_remember(report, kind):
    assert report["by_kind"][kind]["hit_at_k"] == 1.0, report["by_kind"][kind]


@pytest.mark.parametrize("kind", FORBID_KINDS)
def test_what_an_agent_never_heard_does_not_come_back(report, kind):
    assert report["by_kind"][kind]["forbid"] == {"n": 1, "leaks": 0}


def test_a_probe_nothing_can_satisfy_misses(report):
    assert report["by_kind"]["unsatisfiable"] == {"n": 1, "hit_at_1": 0.0, "hit_at_k": 0.0}
    assert report["hit_at_k"] < 1.0


def test_a_planted_leak_is_reported_with_where_it_happened(report):
    # Jordan heard Alex set the limit, so a probe forbidding it must report the leak.
    assert report["leaks"] == [{"file": "every_kind.json", "agent": "Jordan", "after_turn": 12,
                                "question": "What was the spending limit?", "forbid": "thirty pounds"}]


@pytest.mark.django_db
def test_a_file_with_a_bad_probe_stops_before_anything_runs(tmp_path):
    data = json.loads(FILE.read_text())
    data["probes"].append({"after_turn": 3, "agent": "Nobody", "kind": "self", "question": "Who?", "expect": "x"})
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    with pytest.raises(CommandError, match="'Nobody' is not in the cast"):
        call_command("evaluate_agents", str(bad), stdout=io.StringIO(), stderr=io.StringIO())
    assert not Simulation.objects.exists()


@pytest.mark.django_db
def test_a_pace_out_of_range_is_refused_before_anything_runs():
    with pytest.raises(CommandError, match="--pace must be between 0 and 30 seconds"):
        call_command("evaluate_agents", str(FILE), "--pace", "-1", stdout=io.StringIO(), stderr=io.StringIO())
    assert not Simulation.objects.exists()


def test_calibration_counts_whatever_figure_the_model_reads_on_a_memory(monkeypatch):
    """The evaluation rates the confidence the model is shown, read from the answer as the model
    gets it: a tool's relevance stays out of it today, so none is shown; were a figure let through,
    it would be calibrated."""
    from types import SimpleNamespace

    from chronicle.simulation.measuring import probes

    found = [SimpleNamespace(snapshot=lambda i=i: {"content": f"memory {i}", "memory_id": i}) for i in (7, 8)]
    result = SimpleNamespace(response={"memories": [{"content": "memory 7", "relevance": 0.41, "memory_id": 7},
                                                    {"content": "memory 8", "relevance": 0.12, "memory_id": 8}]},
                             results=found)
    assert [item["confidence"] for item in probes.items_of(result)] == [None, None]
    monkeypatch.setattr(probes, "for_model", lambda response: response)
    assert [item["confidence"] for item in probes.items_of(result)] == [0.41, 0.12]
