"""Memory as a turn and a branch see it: accesses counted once, a branch's bank exactly as of its
turn (access history and evidence links included), and no search by an edited memory's old vector."""

from __future__ import annotations

import pytest
from django.urls import reverse

from chronicle.simulation.control import services as simulation_services
from chronicle.simulation.run.models import Simulation
from chronicle.simulation.control.tasks import run_turn_task
from chronicle.writing import services
from memory.services.memories import accesses_record
from memory.models import Memory, MemoryAccess
from memory.recalling.filters import MemoryFilter
from memory.recalling.search import recall
from memory.services import memory_create
from memory.tasks import reembed_memory_task
from devtools.fake_llm import FakeLLM, error, ok, tool_call
from tests.chronicle.writing.conftest import prepare_and_run
from tests.factories import run_all, start

pytestmark = pytest.mark.django_db


def run_until(simulation: Simulation, index: int) -> None:
    """Run turns until `index` (0-based) is the next one due."""
    while simulation_services.next_index(simulation) < index:
        assert run_turn_task.apply(args=(simulation.pk, simulation_services.next_index(simulation))).get() == "done"


def test_a_turn_redone_after_a_failure_counts_each_recall_once(user, dinner, settings):
    settings.LLM_RETRIES = 0
    server = FakeLLM().start()
    try:
        # Attempt 1 recalls who Alex is, then the server refuses: the turn fails, the run pauses.
        server.script(ok(tool_calls=[tool_call("query_self")]), error(401, "invalid api key"),
                      ok(tool_calls=[tool_call("query_self")]), ok("Hello, I'm Alex."))
        simulation = start(user, dinner, provider="openai", base_url=server.base_url, model="fake", max_turns=1)
        assert run_turn_task.apply(args=(simulation.pk, 0)).get() == "failed"
        assert not MemoryAccess.objects.filter(memory__bank=simulation.bank).exists()  # the failed attempt counted nothing
        simulation_services.simulation_resume(simulation=simulation)
        assert run_turn_task.apply(args=(simulation.pk, 0)).get() == "done"
    finally:
        server.stop()
    turn = simulation.turns.get(index=0)
    assert turn.attempts == 2
    recalled = [r["memory_id"] for r in turn.retrievals.get(tool="query_self").results]
    assert recalled
    counts = dict(Memory.objects.filter(pk__in=recalled).values_list("pk", "access_count"))
    assert counts == {pk: 1 for pk in recalled}
    assert set(Memory.objects.filter(pk__in=recalled).values_list("last_accessed_turn", flat=True)) == {1}
    assert MemoryAccess.objects.filter(memory__in=recalled).count() == len(recalled)


def test_a_branch_ranks_decayed_results_exactly_as_the_parent_did_at_its_turn(user, dinner):
    parent = start(user, dinner, scoring="decayed", max_turns=8)
    run_until(parent, 4)
    flt = MemoryFilter(agent="Alex")

    def ranking(simulation: Simulation) -> list[tuple[int, float]]:
        results = recall(simulation.bank, "what did everyone say about dinner?", filter=flt, k=8, scoring="decayed",
                         current_turn=5)
        return [(r.memory.metadata.get("copied_from", r.memory.pk), round(r.score, 9)) for r in results]

    as_of_turn_5 = ranking(parent)
    run_all(parent)  # turns 5–8 recall more: access counts and last-accessed turns move on
    # (what an agent still has in front of it is not handed back, nor counted: the writer recalls one)
    accesses_record(memory_ids=[pk for pk, _score in as_of_turn_5[-3:]], turn=7)
    assert ranking(parent) != as_of_turn_5

    branch = services.simulation_branch(parent=parent, index=4, actor=user)
    simulation_services.simulation_seed(simulation_id=branch.pk)  # the worker's bank copy
    branch.refresh_from_db()
    assert ranking(branch) == as_of_turn_5
    # The copies carry the history up to turn 4 only.
    copied = {m.metadata["copied_from"]: m for m in Memory.objects.in_bank(branch.bank)}
    for original in Memory.objects.in_bank(parent.bank).filter(pk__in=copied):
        upto = sum(a.count for a in original.accesses.all() if a.turn is None or a.turn < 5)
        assert copied[original.pk].access_count == upto


def test_a_branch_keeps_evidence_links(user, finished):
    alex_said = Memory.objects.in_bank(finished.bank).filter(agent="Jordan", kind="episodic", speaker="Alex", turn=1).get()
    insight = memory_create(bank=finished.bank, agent="Jordan", kind="reflection", content="Alex likes a plan.",
                            source="reflection", evidence=[alex_said])
    branch = prepare_and_run(services.simulation_branch(parent=finished, index=3, actor=user))
    copy = Memory.objects.in_bank(branch.bank).get(metadata__copied_from=insight.pk)
    (source,) = copy.evidence.all()
    assert source.bank_id == branch.bank_id and source.metadata["copied_from"] == alex_said.pk


def test_an_edited_memory_is_never_found_by_its_old_vector(user, finished):
    memory = Memory.objects.in_bank(finished.bank).filter(agent="Alex", kind="character", category="identity").first()
    old_meaning = memory.content
    flt = MemoryFilter(agent="Alex", kinds=["character"])

    def found(query: str) -> bool:
        return memory.pk in [r.memory.pk for r in recall(finished.bank, query, filter=flt, k=10)]

    assert found(old_meaning)
    new_meaning = "Alex secretly runs a night-time lighthouse for lost sailors."
    services.memory_edit(simulation=finished, memory=memory, actor=user, content=new_meaning)
    memory.refresh_from_db()
    assert memory.embedding_stale  # the web request stored the text; a worker recomputes the vector
    assert not found(old_meaning) and not found(new_meaning)
    assert reembed_memory_task.apply(args=(memory.pk,)).get() is True
    memory.refresh_from_db()
    assert not memory.embedding_stale
    top = recall(finished.bank, "who keeps the lighthouse for sailors?", filter=flt, k=1)
    assert top[0].memory.pk == memory.pk and top[0].memory.content == new_meaning


def test_a_memorys_links_show_as_a_graph_to_its_owner_only(user, other_user, finished, client_for):
    alex_said = Memory.objects.in_bank(finished.bank).filter(agent="Jordan", kind="episodic", speaker="Alex", turn=1).get()
    sam_said = Memory.objects.in_bank(finished.bank).filter(agent="Jordan", kind="episodic", turn=2).get()
    insight = memory_create(bank=finished.bank, agent="Jordan", kind="reflection", content="Alex likes a plan.",
                            source="reflection", evidence=[alex_said, sam_said])
    url = reverse("chronicle_memory_links", args=[finished.pk, insight.pk])
    page = client_for(user).get(url).content.decode()
    assert "<svg" in page and page.count('class="edge rests-on"') == 2
    assert f"#{alex_said.pk}" in page and f"#{sam_said.pk}" in page
    # Each listed memory reads as it stands to this one: the insight rests on the line, not the other way.
    assert f"#{insight.pk} rests on it" in page and f"rests on #{insight.pk}" not in page
    back = client_for(user).get(reverse("chronicle_memory_links", args=[finished.pk, alex_said.pk])).content.decode()
    assert f"#{insight.pk}" in back and 'class="edge supports"' in back and f"rests on #{alex_said.pk}" in back
    bank = client_for(user).get(reverse("chronicle_memories", args=[finished.pk])).content.decode()
    assert url in bank  # each card opens its links
    assert "{#" not in bank and "#}" not in bank  # no template comment leaks onto the page
    assert client_for(other_user).get(url).status_code == 404
