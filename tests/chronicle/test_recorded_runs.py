"""The recorded runs a fresh install shows: lines a model wrote, replayed, loaded once as finished runs."""

from __future__ import annotations

import pytest

from chronicle.demo import load_recorded
from chronicle.simulation.run.models import Simulation
from memory.models import Memory, MemoryBank
from tests.chronicle.simulation.conftest import wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def test_the_recorded_runs_load_once_finished_with_their_memory_and_show_on_the_home_page(user, client_for,
                                                                                           celery_worker):
    titles = load_recorded(owner=user)
    assert sorted(titles) == ["A rumour at the Harbour Inn (recorded model run)",
                              "Friends deciding where to eat tonight (recorded model run)"]
    assert load_recorded(owner=user) == []  # bootstrap runs on every start: loaded once

    runs = list(Simulation.objects.owned_by(user))
    assert all(run.status == Simulation.Status.COMPLETED and run.is_recorded for run in runs)
    for run in runs:
        turns = list(run.turns.done().prefetch_related("retrievals"))
        assert len(turns) == len(run.script) >= 12
        assert [t.utterance for t in turns] == [line["text"] for line in run.script]
        assert any(r.tool not in ("prepopulate", "pinned") for t in turns for r in t.retrievals.all())
        # The worker rebuilds each run's memory, so the bank and inspector work as in a live run.
        wait_for(lambda: MemoryBank.objects.get(pk=run.bank_id).seed_status == MemoryBank.SeedStatus.DONE,
                 timeout=180, what="the recorded run's memories")
        assert Memory.objects.filter(bank=run.bank_id, kind="episodic").count() >= len(turns)

    client = client_for(user)
    home = client.get("/").content.decode()
    assert home.count("Recorded: lines written by a model, replayed") == 2
    page = client.get(runs[0].get_absolute_url()).content.decode()
    assert "Recorded: lines written by a model, replayed" in page and 'id="recorded-badge"' in page
    # What the tour sends a newcomer to see on the rumour: how the rumour spread and was denied, and
    # how the three came to stand with each other.
    rumour = next(run for run in runs if "Rumour" in run.title or "rumour" in run.title)
    page = client.get(rumour.get_absolute_url()).content.decode()
    assert 'id="relationships"' in page and 'data-pair="Tess→Oren"' in page
    assert 'data-holder="Mira"' in page and "heard from Oren" in page
    assert 'data-holder="Tess"' in page and "disputed" in page
    # Tess never believed it: she said it was not so; nobody is "planted by the writer" but Oren.
    assert "<strong>Tess</strong> — never held it: said it is not so (turn 10)" in page
    assert page.count("planted by the writer") == 1 and "disputed by ·" not in page
