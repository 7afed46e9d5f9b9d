"""The turn inspector as of its turn: the search shows what the agent could have recalled then,
pins that could not apply are refused with the reason, and memories changed since are marked."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone
from django.utils.html import escape

from chronicle.simulation.run.models import Simulation, Turn, TurnOverride
from chronicle.writing import selectors, services
from memory.models import Memory
from memory.services import bank_refresh_stale
from tests.chronicle.writing.conftest import prepare_and_run
from tests.factories import run_all, start
from tests.prompting import sent_text

pytestmark = pytest.mark.django_db
HX = {"HTTP_HX_REQUEST": "true"}


def search(client, simulation, index, q, **extra):
    return client.get(reverse("turn_inspect", args=[simulation.pk, index]), {"q": q, **extra}, **HX).content.decode()


def found_ids(html: str) -> set[int]:
    return {int(i) for i in re.findall(r'data-memory="(\d+)"', html)}


def test_search_from_turn_4_shows_only_what_alex_could_recall_then(client_for, user, finished):
    client = client_for(user)
    bank = finished.bank
    page = client.get(reverse("turn_inspect", args=[finished.pk, 3])).content.decode()
    assert "Search the bank as Alex could have recalled it at turn 4" in page

    # The writer forms one memory for Alex for turn 2 (it exists from turn 3) and one for everyone
    # for turn 4 (it exists from turn 5).
    early = services.writer_memory_form(simulation=finished, actor=user, agent="Alex", kind="semantic", turn=2,
                                        content="Alex remembers the zeppelin over the harbour.")
    late = services.writer_memory_form(simulation=finished, actor=user, agent="", kind="semantic", turn=4,
                                       content="Everyone saw the zeppelin landing in the park.")
    html = search(client, finished, 3, "the zeppelin")
    ids = found_ids(html)
    assert early.pk in ids and late.pk not in ids
    assert "formed by the writer after this turn ran" in html  # the original turn 4 did not see it
    later = found_ids(search(client, finished, 4, "the zeppelin"))  # turn 5, Jordan's
    assert late.pk in later and early.pk not in later  # Alex's own memory is not Jordan's

    # Only Alex's own and shared memories, and no line spoken at turn 4 or later.
    html = search(client, finished, 3, "what did they say?")
    rows = Memory.objects.in_bank(bank).filter(pk__in=found_ids(html))
    assert rows.count() == selectors.SEARCH_K
    assert set(rows.values_list("agent", flat=True)) <= {"Alex", ""}
    assert all(m.turn is None or m.turn <= 3 for m in rows)
    later_lines = Memory.objects.in_bank(bank).filter(agent="Alex", kind="episodic", turn__gte=4)
    assert later_lines.exists() and not set(later_lines.values_list("pk", flat=True)) & found_ids(html)


def test_a_memory_archived_after_the_turn_still_shows_one_archived_before_does_not(client_for, user, finished):
    client = client_for(user)
    line = Memory.objects.in_bank(finished.bank).get(agent="Alex", kind="episodic", turn=3)  # Sam's turn-3 line
    services.memory_archive_edit(simulation=finished, memory=line, actor=user)
    html = search(client, finished, 3, line.content)
    assert line.pk in found_ids(html) and "archived since this turn" in html  # it existed at turn 4

    # Had turn 4 begun after the archive (a paused run, resumed), Alex could not have recalled it.
    Turn.objects.filter(simulation=finished, index=3).update(started=timezone.now() + timedelta(seconds=5))
    assert line.pk not in found_ids(search(client, finished, 3, line.content))


def test_a_memory_archived_before_the_turn_and_restored_since_is_not_shown(client_for, user, finished):
    client = client_for(user)
    line = Memory.objects.in_bank(finished.bank).get(agent="Alex", kind="episodic", turn=3)
    archive = services.memory_archive_edit(simulation=finished, memory=line, actor=user)
    # Archived, then turn 4 (re)began, then restored: at turn 4 it was archived.
    edit = finished.edits.filter(target_id=line.pk, field="status").latest("id")
    edit.__class__.objects.filter(pk=edit.pk).update(created=timezone.now() - timedelta(seconds=10))
    Turn.objects.filter(simulation=finished, index=3).update(started=timezone.now() - timedelta(seconds=5))
    services.edit_undo(edit=edit, actor=user)
    line.refresh_from_db()
    assert archive.pk == line.pk and line.status == Memory.Status.ACTIVE
    assert line.pk not in found_ids(search(client, finished, 3, line.content))


def test_memories_edited_since_the_turn_are_marked_in_its_retrievals_and_search(client_for, user, finished):
    client = client_for(user)
    turn = finished.turns.get(index=3)
    recalled = turn.retrievals.get(tool="query_memory").results[0]
    memory = Memory.objects.get(pk=recalled["memory_id"])
    before = memory.content
    services.memory_edit(simulation=finished, memory=memory, actor=user, content="Sam said: dinner is on me tonight.")
    bank_refresh_stale(bank=finished.bank)  # what the worker does a second later

    page = client.get(reverse("turn_inspect", args=[finished.pk, 3])).content.decode()
    history_url = reverse("chronicle_history", args=[finished.pk]) + f"?memory={memory.pk}"
    row = page[page.index(f'id="row-{turn.retrievals.get(tool="query_memory").pk}-{memory.pk}"'):]
    row = row[:row.index("</tr>")]
    assert "edited after this turn" in row and escape(history_url) in row
    assert escape(before) in row  # the retrieval shows what the agent read
    unchanged = turn.retrievals.get(tool="query_memory").results[1]["memory_id"]
    assert "edited after this turn" not in page[page.index(f"-{unchanged}\""):].split("</tr>")[0]

    html = search(client, finished, 3, "dinner is on me")
    row = html[html.index(f'id="row-x-{memory.pk}"'):].split("</tr>")[0]
    assert "edited after this turn" in row and f"at this turn it read: “{escape(before)}”" in row

    history = client.get(history_url).content.decode()
    assert f"History of memory #{memory.pk}" in history and "dinner is on me tonight" in history
    assert history.count("<tr data-edit=") == 1
    # Had turn 4 begun after the edit, there would be nothing to mark.
    Turn.objects.filter(simulation=finished, index=3).update(started=timezone.now() + timedelta(seconds=5))
    html = search(client, finished, 3, "dinner is on me")
    assert memory.pk in found_ids(html) and "edited after this turn" not in html


def test_a_pin_that_could_not_apply_is_refused_with_the_reason(client_for, user, finished):
    client = client_for(user)
    turn = finished.turns.get(index=3)  # turn 4, Alex
    url = reverse("turn_override", args=[finished.pk, 3])
    bank = finished.bank
    later_line = Memory.objects.in_bank(bank).get(agent="Alex", kind="episodic", turn=5)
    jordans = Memory.objects.in_bank(bank).filter(agent="Jordan", kind="character").first()
    archived = Memory.objects.in_bank(bank).filter(agent="Alex", kind="character", category="traits").first()
    services.memory_archive_edit(simulation=finished, memory=archived, actor=user)
    for memory, reason in [(later_line, "exists only from turn 6, after turn 4 began: Alex could not have recalled it"),
                           (jordans, "is Jordan&#x27;s: Alex cannot recall it"),
                           (archived, "is archived: a regeneration reads only active memories")]:
        html = client.post(url, {"memory_id": memory.pk, "kind": "pin", "on": "1"}, **HX).content.decode()
        assert 'role="alert"' in html and reason in html, reason
    assert not TurnOverride.objects.at(finished, 3).exists()
    # Without JavaScript the page says it too.
    response = client.post(url, {"memory_id": later_line.pk, "kind": "pin", "on": "1"}, follow=True)
    assert "exists only from turn 6" in response.content.decode()

    # A pin that was fine when made, then its memory archived: shown as refused, and regenerating is refused.
    background = Memory.objects.in_bank(bank).filter(agent="Alex", category="background").first()
    services.override_toggle(turn=turn, kind="pin", memory_id=background.pk, actor=user, on=True)
    services.memory_archive_edit(simulation=finished, memory=background, actor=user)
    page = client.get(reverse("turn_inspect", args=[finished.pk, 3])).content.decode()
    assert "This pin cannot apply" in page
    branches = Simulation.objects.filter(parent=finished).count()
    response = client.post(reverse("turn_regenerate", args=[finished.pk, 3]), follow=True)
    assert "has a pin that cannot apply in a branch" in response.content.decode()
    assert Simulation.objects.filter(parent=finished).count() == branches


def test_a_good_pin_is_taken_and_reaches_the_branch(user, finished):
    turn = finished.turns.get(index=3)
    background = Memory.objects.in_bank(finished.bank).filter(agent="Alex", category="background").first()
    services.override_toggle(turn=turn, kind="pin", memory_id=background.pk, actor=user, on=True)
    branch = prepare_and_run(services.simulation_branch(parent=finished, index=3, actor=user))
    regenerated = branch.turns.get(index=3)
    assert background.content in sent_text(regenerated)
    assert "was not given" not in regenerated.note


def test_a_pin_the_run_cannot_apply_is_said_on_the_turn(user, dinner):
    simulation = start(user, dinner)
    memory = Memory.objects.in_bank(simulation.bank).filter(agent="Jordan", kind="character").first()
    # A pin made before its memory was archived (the run's side has no writer to tell: it says so on the turn).
    TurnOverride.objects.create(simulation=simulation, turn_index=1, kind="pin", memory_id=memory.pk,
                                content=memory.content, created_by=user)
    memory.status = Memory.Status.ARCHIVED
    memory.save(update_fields=["status"])
    simulation = run_all(simulation)
    turn = simulation.turns.get(index=1)
    assert f"Pinned memory #{memory.pk} was not given to Jordan: it is archived." in turn.note
    assert memory.content not in sent_text(turn)
