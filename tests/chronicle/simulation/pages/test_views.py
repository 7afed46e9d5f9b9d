"""The simulation pages: owner scoping, the form, controls by button name, polling that stops, the panel."""

from __future__ import annotations

import html as html_module

import pytest
from django.test import Client
from django.urls import reverse

from chronicle.models import Character
from chronicle.simulation.run.models import Simulation
from chronicle.simulation.control.tasks import run_turn_task
from tests.factories import start

HX = {"HTTP_HX_REQUEST": "true"}


def started(user, scenario, **settings) -> Simulation:
    return start(user, scenario, **{"max_turns": 3, **settings})


def urls(simulation):
    return [simulation.get_absolute_url(), reverse("simulation_turn", args=[simulation.pk, 0])]


@pytest.mark.django_db
def test_another_users_simulation_is_404_on_every_url(user, other_user, dinner, client_for):
    simulation = started(user, dinner)
    run_turn_task.apply(args=(simulation.pk, 0))
    client = client_for(other_user)
    for url in urls(simulation):
        assert client.get(url).status_code == 404
        assert client.get(url, **HX).status_code == 404
    assert client.post(simulation.get_absolute_url(), {"pause": "1"}).status_code == 404
    simulation.refresh_from_db()
    assert simulation.status == "running"
    assert str(simulation) not in client.get(reverse("simulation_list")).content.decode()


@pytest.mark.django_db
def test_pages_need_a_login(dinner, user):
    simulation = started(user, dinner)
    response = Client().get(simulation.get_absolute_url())
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


@pytest.mark.django_db
def test_new_simulation_form_starts_a_run_with_a_cast_subset_and_hides_the_key(
        user, dinner, client_for, django_capture_on_commit_callbacks):
    client = client_for(user)
    page = client.get(reverse("simulation_create")).content.decode()
    assert "Dinner plans" in page and 'name="retrieval_mode"' in page and 'name="max_tool_calls"' in page
    # The writer is told what each mode means before choosing one.
    assert "one model call a turn, the cheapest" in page and "looks up its own secret again" in page
    alex, jordan = Character.objects.get(name="Alex"), Character.objects.get(name="Jordan")
    data = {"scenario": dinner.pk, "cast": [alex.pk, jordan.pk], "max_turns": 4, "speaking_order": "model_picks",
            "retrieval_mode": "both", "scoring": "hybrid", "weight_recency": "0.3", "provider": "openai",
            "base_url": "http://127.0.0.1:9/v1", "model": "llama3.1", "api_key": "sk-live-supersecret-abcd",
            "temperature": "0.5", "max_tokens": 200, "seed": 3, "max_tool_calls": 4, "timeout_s": 30, "pace_s": 0}
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = client.post(reverse("simulation_create"), data)
    simulation = Simulation.objects.get()
    assert response.status_code == 302 and response["Location"] == simulation.get_absolute_url()
    assert len(callbacks) == 1  # the start (seeding) task, dispatched after commit
    assert simulation.status == "seeding" and simulation.bank is not None
    assert simulation.cast_names == ["Alex", "Jordan"]
    assert simulation.weights == {"recency": 0.3} and simulation.scoring == "hybrid"
    assert simulation.api_key == "sk-live-supersecret-abcd"
    page = client.get(simulation.get_absolute_url()).content.decode()
    assert "supersecret" not in page and "sk-…abcd" in page
    # Later edits to a character do not change this run.
    alex.description = "Alex has become a pirate."
    alex.save()
    simulation.refresh_from_db()
    assert "pirate" not in str(simulation.cast_snapshot)


@pytest.mark.django_db
def test_cast_must_come_from_the_scenario(user, dinner, client_for):
    stranger = Character.objects.create(owner=user, name="Mallory")
    response = client_for(user).post(reverse("simulation_create"), {
        "scenario": dinner.pk, "cast": [stranger.pk], "max_turns": 3, "speaking_order": "round_robin",
        "retrieval_mode": "tools", "scoring": "similarity", "provider": "scripted", "temperature": 0.7,
        "max_tokens": 300, "max_tool_calls": 6, "timeout_s": 60, "pace_s": 0})
    assert response.status_code == 200
    assert "Not in the cast of “Dinner plans”: Mallory" in response.content.decode()
    assert not Simulation.objects.exists()


@pytest.mark.django_db
def test_a_refused_run_says_at_the_top_what_to_fix_with_a_link_to_each_field(user, dinner, client_for):
    response = client_for(user).post(reverse("simulation_create"), {
        "title": "Sam's late", "scenario": dinner.pk, "max_turns": 6, "speaking_order": "round_robin",
        "retrieval_mode": "prepopulate", "scoring": "similarity", "provider": "scripted", "temperature": 0.7,
        "max_tokens": 300, "max_tool_calls": 6, "timeout_s": 60, "pace_s": 0,
        "stage_directions": "9: Sam enters"})
    page = response.content.decode()
    assert response.status_code == 200 and not Simulation.objects.exists()
    start = page.index('id="form-errors"')
    summary = page[start:page.index("</ul>", start)]
    assert "The run was not started" in summary
    assert '<a href="#id_stage_directions">' in summary and "past the run&#x27;s 6 turns" in summary
    # It comes before the first field, and what was typed is kept.
    assert page.index('id="form-errors"') < page.index('name="title"')
    assert 'value="Sam&#x27;s late"' in page


@pytest.mark.django_db
def test_controls_are_told_apart_by_button_name(user, dinner, client_for):
    simulation = started(user, dinner)
    client = client_for(user)
    page = client.get(simulation.get_absolute_url()).content.decode()
    assert 'name="pause"' in page and 'name="cancel"' in page and 'name="resume"' not in page
    client.post(simulation.get_absolute_url(), {"pause": ""})
    simulation.refresh_from_db()
    assert simulation.status == "paused"
    page = client.get(simulation.get_absolute_url()).content.decode()
    assert 'name="resume"' in page and 'name="one_more"' in page and "Paused by you." in page
    client.post(simulation.get_absolute_url(), {"resume": ""})
    simulation.refresh_from_db()
    assert simulation.status == "running"
    client.post(simulation.get_absolute_url(), {"cancel": ""})
    simulation.refresh_from_db()
    assert simulation.status == "cancelled"
    response = client.post(simulation.get_absolute_url(), {"resume": ""}, follow=True)
    assert "Only a paused or failed simulation can be resumed" in response.content.decode()


@pytest.mark.django_db
def test_posts_need_csrf(user, dinner):
    simulation = started(user, dinner)
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    assert client.post(simulation.get_absolute_url(), {"pause": ""}).status_code == 403
    assert client.post(reverse("simulation_demo")).status_code == 403


@pytest.mark.django_db
def test_polling_continues_while_running_and_stops_when_done(user, dinner, client_for):
    simulation = started(user, dinner, max_turns=1)
    client = client_for(user)
    response = client.get(simulation.get_absolute_url(), **HX)
    assert response.status_code == 200 and 'hx-trigger="every 2s"' in response.content.decode()
    assert "<html" not in response.content.decode()  # the partial only
    run_turn_task.apply(args=(simulation.pk, 0))
    response = client.get(simulation.get_absolute_url(), **HX)
    html = response.content.decode()
    assert response.status_code == 286  # htmx: stop polling
    line = html_module.escape(simulation.turns.get(index=0).utterance)  # the dry run's first line, on the page
    assert "hx-trigger" not in html and line in html and 'data-status="completed"' in html
    assert "Real saving" in html and "Counted with cl100k_base" in html


@pytest.mark.django_db
def test_turn_panel_shows_memories_scores_components_and_context(user, dinner, client_for):
    simulation = started(user, dinner, max_turns=1)
    run_turn_task.apply(args=(simulation.pk, 0))
    client = client_for(user)
    url = reverse("simulation_turn", args=[simulation.pk, 0])
    panel = client.get(url, **HX).content.decode()
    assert "<html" not in panel
    assert "query_self" in panel and "query_scene" in panel and "You are Alex" in panel
    assert 'sb-seg sb-similarity' in panel and "matched: key “who am I?”" in panel
    assert "the exact messages sent" in panel and "Your memory tools" in panel
    # The page of a turn is the inspector now: the old address takes a browser there.
    full = client.get(url, follow=True).content.decode()
    assert "<html" in full and "Turn 1 · Alex" in full
    assert client.get(reverse("simulation_turn", args=[simulation.pk, 5])).status_code == 404


@pytest.mark.django_db
def test_demo_button_starts_a_scripted_run_on_the_demo_dinner(user, client_for, django_capture_on_commit_callbacks):
    client = client_for(user)
    assert "Run the demo (dry run)" in client.get(reverse("simulation_list")).content.decode()
    with django_capture_on_commit_callbacks(execute=False):
        response = client.post(reverse("simulation_demo"))
    simulation = Simulation.objects.owned_by(user).get()
    assert response.status_code == 302 and response["Location"] == simulation.get_absolute_url()
    assert simulation.provider == "scripted" and "where to eat" in simulation.scenario.title
    assert len(simulation.cast_names) == 3 and simulation.max_turns == 6
    assert "dry run" in client.get(simulation.get_absolute_url()).content.decode()


@pytest.mark.django_db
def test_a_running_run_that_no_worker_works_on_says_waiting_for_a_worker(user, dinner, client_for, settings):
    from datetime import timedelta

    from django.utils import timezone

    from chronicle.simulation.run.models import Turn

    settings.TURN_STALE_SECONDS = 30
    simulation = started(user, dinner)  # running; no worker runs its turns in this test
    client = client_for(user)
    assert "Waiting for a worker" not in client.get(simulation.get_absolute_url()).content.decode()

    # Its worker died mid-turn 45 s ago and nobody has taken the turn over.
    now = timezone.now()
    turn = Turn.objects.create(simulation=simulation, index=0, agent="Alex", status="running",
                               started=now - timedelta(seconds=50), heartbeat=now - timedelta(seconds=45))
    page = client.get(simulation.get_absolute_url(), **HX).content.decode()
    assert "Waiting for a worker:" in page and "nobody has worked on turn 1 for 45 s" in page

    # A live worker's fresh heartbeat: no warning.
    Turn.objects.filter(pk=turn.pk).update(heartbeat=timezone.now())
    assert "Waiting for a worker" not in client.get(simulation.get_absolute_url(), **HX).content.decode()

    # Between turns: the next one was due a minute ago and no worker claimed it.
    Turn.objects.filter(pk=turn.pk).update(status="done", utterance="Hello.", finished=now - timedelta(seconds=60))
    Simulation.objects.filter(pk=simulation.pk).update(updated=now - timedelta(seconds=60))
    page = client.get(simulation.get_absolute_url()).content.decode()
    assert "nobody has worked on turn 2 for 60 s" in page


@pytest.mark.django_db
def test_the_form_offers_the_chosen_scenarios_cast_ticked(user, dinner, client_for):
    from chronicle.models import Scenario

    stranger = Character.objects.create(owner=user, name="Mallory")
    heist = Scenario.objects.create(owner=user, title="Heist")
    heist.cast.set([stranger])
    client = client_for(user)
    form = client.get(reverse("simulation_create"), {"scenario": dinner.pk}).context["form"]
    offered = [name for _pk, name in form.fields["cast"].widget.choices]
    assert offered == ["Alex", "Jordan", "Sam"] and sorted(form.initial["cast"]) == sorted(c.pk for c in dinner.cast.all())
    page = client.get(reverse("simulation_create"), {"scenario": dinner.pk}).content.decode()
    assert "Mallory" not in page.split('id="cast-field"', 1)[1].split("</div>\n</div>", 1)[0]
    # Choosing another scenario swaps the cast in place (htmx asks the same page; #cast-field is taken from it).
    swapped = client.get(reverse("simulation_create"), {"scenario": heist.pk}, HTTP_HX_REQUEST="true")
    cast_field = swapped.content.decode().split('id="cast-field"', 1)[1]
    assert "Mallory" in cast_field and 'checked' in cast_field and "Jordan" not in cast_field.split("Turns", 1)[0]


def test_only_the_cast_can_open_with_a_greeting_and_the_choice_swaps_with_the_cast(user, dinner, client_for):
    from chronicle.models import Scenario

    hello = {"first_mes": "Welcome, welcome, come in out of the rain!"}
    stranger = Character.objects.create(owner=user, name="Mallory", card_extras=hello)
    Character.objects.filter(owner=user, name="Jordan").update(card_extras=hello)
    heist = Scenario.objects.create(owner=user, title="Heist")
    heist.cast.set([stranger])
    client = client_for(user)
    form = client.get(reverse("simulation_create"), {"scenario": dinner.pk}).context["form"]
    assert [name for name, _label in form.fields["greeting_by"].choices if name] == ["Jordan"]  # not Mallory
    swapped = client.get(reverse("simulation_create"), {"scenario": heist.pk}, HTTP_HX_REQUEST="true")
    cast_field = swapped.content.decode().split('id="cast-field"', 1)[1]
    greeting = cast_field.split('id="id_greeting_by"', 1)[1].split("</select>", 1)[0]
    assert "Mallory" in greeting and "Jordan" not in greeting


@pytest.mark.django_db
def test_a_cancelled_run_offers_to_go_on_in_a_branch_or_to_be_deleted(user, other_user, dinner, client_for,
                                                                        django_capture_on_commit_callbacks):
    from chronicle.simulation.control import services
    from memory.models import MemoryBank

    simulation = started(user, dinner, max_turns=4)
    for index in range(2):
        assert run_turn_task.apply(args=(simulation.pk, index)).get() == "done"
    services.simulation_cancel(simulation=simulation)
    client = client_for(user)
    page = client.get(simulation.get_absolute_url()).content.decode()
    assert "Go on in a branch from turn 3" in page and reverse("simulation_delete", args=[simulation.pk]) in page
    with django_capture_on_commit_callbacks():
        client.post(reverse("turn_regenerate", args=[simulation.pk, 2]))
    branch = simulation.branches.get()
    assert branch.branch_turn == 2 and branch.turns.count() == 2  # both turns kept, it goes on from turn 3

    # Deleting asks first, is the owner's alone, and takes the run's bank (not the branch's).
    stranger = Client()
    stranger.force_login(other_user)
    assert stranger.get(reverse("simulation_delete", args=[simulation.pk])).status_code == 404
    assert stranger.post(reverse("simulation_delete", args=[simulation.pk])).status_code == 404
    confirm = client.get(reverse("simulation_delete", args=[simulation.pk])).content.decode()
    assert "2 turns" in confirm and "Its 1 branch stay" in confirm
    bank_id = simulation.bank_id
    response = client.post(reverse("simulation_delete", args=[simulation.pk]))
    assert response.url == reverse("simulation_list")
    assert not Simulation.objects.filter(pk=simulation.pk).exists() and not MemoryBank.objects.filter(pk=bank_id).exists()
    branch.refresh_from_db()
    assert branch.parent_id is None and MemoryBank.objects.filter(pk=branch.bank_id).exists()


@pytest.mark.django_db
def test_a_running_run_is_not_deleted(user, dinner, client_for):
    simulation = started(user, dinner)
    client = client_for(user)
    client.post(reverse("simulation_delete", args=[simulation.pk]))
    assert Simulation.objects.filter(pk=simulation.pk).exists()


@pytest.mark.django_db
def test_the_poll_keeps_the_branch_tree_and_the_seeding_line_true(user, dinner, client_for,
                                                                  django_capture_on_commit_callbacks):
    simulation = started(user, dinner, max_turns=2)
    for index in range(2):
        assert run_turn_task.apply(args=(simulation.pk, index)).get() == "done"
    client = client_for(user)
    with django_capture_on_commit_callbacks():
        client.post(reverse("turn_regenerate", args=[simulation.pk, 0]))
    branch = simulation.branches.get()  # from turn 1, seeding: its start task was not run here
    page = client.get(branch.get_absolute_url()).content.decode()
    assert "preparing the memories…" in page and "0/0" not in page  # nothing counted yet: no "0/0"
    assert "Token figures appear after the first turn." in page and "would have cost" not in page
    # The poll swaps the run's part, and the tree (outside it) out of band, with each run's status now.
    Simulation.objects.filter(pk=branch.pk).update(status="completed")
    polled = client.get(branch.get_absolute_url(), **HX).content.decode()
    tree = polled.split('id="branches"', 1)[1]
    assert 'hx-swap-oob="true"' in tree.split(">", 1)[0]
    assert f'data-sim="{branch.pk}"' in tree and "completed" in tree.split(f'data-sim="{branch.pk}"', 1)[1][:400]


@pytest.mark.django_db
def test_a_turns_many_notes_fold_under_the_first(user, dinner, client_for):
    simulation = started(user, dinner, max_turns=1)
    assert run_turn_task.apply(args=(simulation.pk, 0)).get() == "done"
    notes = [f"Attempt {n} failed: the model timed out; tried again." for n in range(1, 5)]
    simulation.turns.filter(index=0).update(note="\n".join(notes))
    page = client_for(user).get(simulation.get_absolute_url()).content.decode()
    folded = page.split('<details class="muted small note">', 1)[1].split("</details>", 1)[0]
    assert folded.startswith(f"<summary>{notes[0]} ") and "(and 3 more notes)" in folded
    assert all(note in folded for note in notes[1:])


@pytest.mark.django_db
def test_run_n_more_turns_or_until_i_pause(user, dinner, client_for):
    """Besides one more turn: a number of turns (a paused run pauses again after them, a completed
    one completes), or on and on until the writer presses Pause."""
    simulation = started(user, dinner)
    client = client_for(user)

    def run_queued():
        while (simulation := Simulation.objects.get(pk=started_pk)).status == "running":
            assert run_turn_task.apply(args=(simulation.pk, simulation.turns.filter(status="done").count())).get() == "done"
        return simulation

    started_pk = simulation.pk
    assert run_queued().status == "completed"
    page = client.get(simulation.get_absolute_url()).content.decode()
    assert 'name="more"' in page and 'name="turns"' in page and 'name="until_paused"' in page

    client.post(simulation.get_absolute_url(), {"more": "", "turns": "2"})
    done = run_queued()
    assert (done.status, done.turns.filter(status="done").count(), done.max_turns) == ("completed", 5, 5)

    said = client.post(simulation.get_absolute_url(), {"until_paused": ""}, follow=True).content.decode()
    simulation.refresh_from_db()
    assert simulation.status == "running" and "running until you pause" in client.get(simulation.get_absolute_url()).content.decode()
    # The raised limit is said, and a dry run slows to a line every few seconds: time to read and pause.
    assert f"it stops by itself at {simulation.max_turns:,} turns" in said
    assert simulation.is_dry_run and simulation.turn_pace >= 2 > simulation.pace_s
    run_turn_task.apply(args=(simulation.pk, 5))
    client.post(simulation.get_absolute_url(), {"pause": ""})
    paused = client.get(simulation.get_absolute_url()).content.decode()
    assert f"6 turns · set to run until you pause (at most {simulation.max_turns})" in paused
    client.post(simulation.get_absolute_url(), {"more": "", "turns": "2"})  # paused: two, then paused again
    after = run_queued()
    assert (after.status, after.turns.filter(status="done").count()) == ("paused", 8)

    for turns, message in (("two", "a whole number"), ("0", "between 1 and 100"), ("101", "between 1 and 100")):
        response = client.post(simulation.get_absolute_url(), {"more": "", "turns": turns}, follow=True)
        assert message in response.content.decode()
    assert Simulation.objects.get(pk=simulation.pk).status == "paused"


@pytest.mark.django_db
def test_the_bank_id_and_how_another_program_reaches_it_are_on_the_run_and_bank_pages(user, dinner, client_for):
    simulation = started(user, dinner)
    client = client_for(user)
    bank = simulation.bank.pk
    for url in (simulation.get_absolute_url(), reverse("chronicle_memories", args=[simulation.pk])):
        page = client.get(url).content.decode()
        assert f"Memory bank <strong>#{bank}</strong>" in page
        assert f"http://testserver/api/banks/{bank}/recall" in page and "\"agent\": \"Alex\"" in page
        assert f"/mcp?bank={bank}&amp;agent=Alex" in page and reverse("api_tokens") in page


@pytest.mark.django_db
def test_the_run_page_leads_with_the_scene_and_says_plainly_a_dry_run_is_one(user, dinner, client_for):
    simulation = started(user, dinner, max_turns=1)
    run_turn_task.apply(args=(simulation.pk, 0))
    page = client_for(user).get(simulation.get_absolute_url()).content.decode()
    assert 'id="dry-run-note"' in page and "no model speaks here" in page and "Test connection" in page
    # Figures and settings fold into closed panels a writer opens on purpose, a negative saving too.
    assert '<details class="small tokens" id="token-total">' in page and '<details id="token-why">' in page
    assert '<details class="muted small" id="run-settings-panel">' in page
