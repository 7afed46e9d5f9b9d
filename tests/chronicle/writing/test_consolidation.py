"""The bank page's "Consolidate" button: runs at once, is recorded in History, undone there, and is
another writer's to neither see nor press (404)."""

from __future__ import annotations

import numpy as np
import pytest
from django.urls import reverse

from chronicle.writing.models import Edit
from memory.api import upkeep
from memory.living import consolidation
from memory.models import Memory
from memory.services import memory_create

pytestmark = pytest.mark.django_db

RAMEN = ["Jordan said: Let's get ramen tonight.", "Jordan said: We should get ramen tonight.",
         "Jordan said: How about ramen tonight?", "Jordan said: Let's go for ramen <b>tonight</b>!"]


@pytest.fixture
def ramen(finished, monkeypatch):
    """Four near-duplicate, unimportant lines the first agent heard at turns 1–4 (a six-turn run keeps
    its last two turns as they are)."""
    monkeypatch.setattr(consolidation, "RECENT_TURNS", 2)
    monkeypatch.setattr(upkeep, "RECENT_TURNS", 2)  # the button's own reading of it (memory.api's)
    agent = finished.cast_names[0]
    originals = [memory_create(bank=finished.bank, content=text, agent=agent, kind="episodic", importance=2.0,
                               source="earned", turn=turn, speaker="Jordan") for turn, text in enumerate(RAMEN, 1)]
    return agent, originals


def _vectors(ids):
    return {m.pk: np.asarray(m.embedding) for m in Memory.objects.filter(pk__in=ids)}


def test_the_button_consolidates_and_history_undo_restores(client_for, user, finished, ramen):
    agent, originals = ramen
    ids = [m.pk for m in originals]
    vectors = _vectors(ids)
    client = client_for(user)
    page = client.get(reverse("chronicle_memories", args=[finished.pk])).content.decode()
    assert f"Consolidate {agent}'s old memories</button>" in page and "csrfmiddlewaretoken" in page

    response = client.post(reverse("chronicle_memory_consolidate", args=[finished.pk]), {"agent": agent}, follow=True)
    assert response.status_code == 200
    assert "memories consolidated into" in response.content.decode()
    assert set(Memory.objects.filter(pk__in=ids).values_list("status", flat=True)) == {"consolidated"}
    summary = Memory.objects.filter(source="consolidation", evidence__in=ids, bank=finished.bank).distinct().get()
    # The page it lands on shows the summaries just made, each with what it rests on.
    assert response.redirect_chain[-1][0].endswith(f"?agent={agent}&source=consolidation")
    assert [c.memory.pk for c in response.context["cards"]] == [summary.pk]
    assert set(summary.evidence.values_list("pk", flat=True)) == set(ids)
    # the bank page shows the summary, escaped
    page = client.get(reverse("chronicle_memories", args=[finished.pk]) + "?q=ramen").content.decode()
    assert "similar lines from turns 1–4" in page and "<b>tonight</b>" not in page

    edit = Edit.objects.for_simulation(finished).get(field="consolidation", target_id=summary.pk)
    assert edit.actor == user and edit.label.startswith(f"{agent}: 4 memories consolidated")
    client.post(reverse("chronicle_undo", args=[finished.pk, edit.pk]))
    assert set(Memory.objects.filter(pk__in=ids).values_list("status", flat=True)) == {"active"}
    assert all(np.array_equal(v, vectors[pk]) for pk, v in _vectors(ids).items())
    summary.refresh_from_db()
    assert summary.status == "archived"

    redo = Edit.objects.for_simulation(finished).get(undoes=edit)
    client.post(reverse("chronicle_undo", args=[finished.pk, redo.pk]))  # undo the undo: consolidated again
    assert set(Memory.objects.filter(pk__in=ids).values_list("status", flat=True)) == {"consolidated"}
    summary.refresh_from_db()
    assert summary.status == "active"


def test_another_writer_gets_404_and_nothing_changes(client_for, other_user, finished, ramen):
    agent, originals = ramen
    client = client_for(other_user)
    assert client.get(reverse("chronicle_memories", args=[finished.pk])).status_code == 404
    assert client.post(reverse("chronicle_memory_consolidate", args=[finished.pk]), {"agent": agent}).status_code == 404
    assert not Memory.objects.filter(pk__in=[m.pk for m in originals]).exclude(status="active").exists()
    assert not Edit.objects.for_simulation(finished).filter(field="consolidation").exists()


def test_an_agent_outside_the_cast_or_a_get_is_refused(client_for, user, finished, ramen):
    client = client_for(user)
    url = reverse("chronicle_memory_consolidate", args=[finished.pk])
    assert client.get(url).status_code == 405
    response = client.post(url, {"agent": "<Nobody>"}, follow=True)
    assert "&lt;Nobody&gt; is not in this simulation&#x27;s cast." in response.content.decode()
    assert not Memory.objects.filter(bank=finished.bank, source="consolidation").exists()
