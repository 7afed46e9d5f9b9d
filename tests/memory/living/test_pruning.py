"""Pruning: an agent's faded, unimportant lived memories are archived (never deleted, out of every
search), by the periodic task and the bank page's button, marked so that they can all come back."""

from __future__ import annotations

import pytest

from memory.living.pruning import faded, memories_prune, memories_unprune
from memory.recalling.search import recall
from memory.tasks import prune_banks_task
from memory.models import Memory
from memory.recalling.scoring import decayed_importance
from memory.services import accesses_record, memory_create

pytestmark = pytest.mark.django_db


def lived(bank, content, *, turn, importance, source="earned", **extra):
    return memory_create(bank=bank, content=content, agent="Alex", kind="episodic", importance=importance,
                         source=source, turn=turn, **extra)


@pytest.fixture
def faded_bank(bank):
    old_dull = lived(bank, "Alex noticed the kettle was slightly chipped.", turn=1, importance=2)
    old_vivid = lived(bank, "Alex's sister told Alex she is getting married.", turn=300, importance=9)
    new_dull = lived(bank, "Alex saw a pigeon on the window sill.", turn=395, importance=2)
    sheet = memory_create(bank=bank, content="Alex grew up by the sea.", agent="Alex", kind="character",
                          importance=1, source="gifted")
    writer = lived(bank, "Alex lost a glove on the tram.", turn=1, importance=1, source="writer")
    lived(bank, "The story goes on.", turn=400, importance=5)  # the bank's latest turn
    return {"old_dull": old_dull, "old_vivid": old_vivid, "new_dull": new_dull, "sheet": sheet, "writer": writer}


def test_what_faded_below_the_threshold_is_what_the_decayed_preset_reads(bank, faded_bank):
    found = dict(faded(bank, threshold=0.1))
    # The same measure as the `decayed` preset's importance component, at the bank's latest turn.
    for memory in Memory.objects.in_bank(bank).filter(source="earned"):
        value = decayed_importance(memory, 400)
        assert (memory.pk in found) == (value < 0.1), (memory.content, value)
        if memory.pk in found:
            assert found[memory.pk] == pytest.approx(value, rel=1e-6)
    assert set(found) == {faded_bank["old_dull"].pk}  # a vivid or recent memory, a sheet, the writer's: kept


def test_pruning_archives_marks_and_restores_exactly_the_faded(bank, faded_bank):
    dull = faded_bank["old_dull"]
    assert recall(bank, "the chipped kettle", agent="Alex", k=3)[0].memory.pk == dull.pk
    assert memories_prune(bank=bank) == 1
    dull.refresh_from_db()
    assert dull.status == "archived" and dull.metadata["pruned"]["turn"] == 400
    assert dull.metadata["pruned"]["importance"] < 0.1
    assert dull.pk not in {r.memory.pk for r in recall(bank, "the chipped kettle", agent="Alex", k=10)}
    assert Memory.objects.filter(pk=dull.pk).exists()  # archived, not deleted
    assert memories_prune(bank=bank) == 0  # nothing more has faded
    assert memories_unprune(bank=bank) == 1
    dull.refresh_from_db()
    assert dull.status == "active" and "pruned" not in dull.metadata


def test_a_memory_recalled_often_is_kept(bank, faded_bank):
    fading = lived(bank, "Alex's neighbour mentioned the bins go out on Tuesdays.", turn=250, importance=4)
    assert fading.pk in dict(faded(bank, threshold=0.1))
    accesses_record(memory_ids=[fading.pk] * 60, turn=399)  # seed 004's boosts: many recalls, one just now
    assert fading.pk not in dict(faded(bank, threshold=0.1))


def test_the_periodic_task_prunes_every_bank(bank, faded_bank):
    assert prune_banks_task.apply().get() == 1
    assert Memory.objects.get(pk=faded_bank["old_dull"].pk).status == "archived"
