"""Associations followed in retrieval (seed 001's associate_memories): one hop of
spreading activation, its weight a setting, shown as the "association" component."""

import pytest

from memory.recalling.filters import MemoryFilter
from memory.recalling.search import recall
from memory.services import memory_associate, memory_create
from memory.recalling.tools import ToolContext, call_tool


def _episodes(bank):
    made = {}
    for turn, text in enumerate(["Jordan said the harbour restaurant has a view of the boats.",
                                 "Sam said the boats in the harbour leave at dawn.",
                                 "Alex said the harbour is lovely at night.",
                                 "Jordan said my grandmother taught me to bake bread.",
                                 "Sam said the tax office closes on Fridays."], start=1):
        made[turn] = memory_create(bank=bank, content=text, agent="Alex", kind="episodic", turn=turn)
    return made


def test_a_memory_linked_to_a_top_result_joins_it_with_an_association_component(bank):
    made = _episodes(bank)
    flt = MemoryFilter(agent="Alex", kinds=["episodic"])
    plain = recall(bank, "the harbour", filter=flt, k=3)
    assert made[4].pk not in [r.memory.pk for r in plain]  # grandmother's bread: nothing to do with it
    memory_associate(first=made[1], second=made[4])  # the writer (or Alex) linked the two
    spread = recall(bank, "the harbour", filter=flt, k=3, associations=1.0)
    by_id = {r.memory.pk: r for r in spread}
    assert made[4].pk in by_id
    top = next(r for r in plain if r.memory.pk == made[1].pk)
    bread = by_id[made[4].pk]
    assert bread.components["association"] == pytest.approx(top.score, rel=1e-6)  # weight 1 × its link's score
    assert bread.score == pytest.approx(bread.components["similarity"] + top.score, rel=1e-6)
    assert [r.rank for r in spread] == [1, 2, 3] and len(spread) == 3
    # A small weight is not enough to displace the harbour lines; 0 is off.
    weak = recall(bank, "the harbour", filter=flt, k=3, associations=0.05)
    assert made[4].pk not in [r.memory.pk for r in weak]
    assert "association" not in recall(bank, "the harbour", filter=flt, k=5)[0].components
    # The filter still holds: a linked memory of someone else never comes back.
    other = memory_create(bank=bank, content="Sam's diary: I hate the harbour.", agent="Sam", kind="episodic", turn=6)
    memory_associate(first=made[1], second=other)
    assert other.pk not in [r.memory.pk for r in recall(bank, "the harbour", filter=flt, k=5, associations=1.0)]


def test_the_agents_tools_follow_links_with_the_runs_weight(bank):
    made = _episodes(bank)
    memory_associate(first=made[1], second=made[4])
    ctx = ToolContext(bank=bank, agent="Alex", current_turn=7, associations=1.0)
    found = call_tool("query_memory", {"query": "the harbour"}, context=ctx)
    assert any(r.memory.pk == made[4].pk and r.components.get("association") for r in found.results)
    off = call_tool("query_memory", {"query": "the harbour"}, context=ToolContext(bank=bank, agent="Alex", current_turn=7))
    assert all("association" not in r.components for r in off.results)
