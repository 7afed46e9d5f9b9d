"""Reflection in a run: queued after a turn exactly when an agent's importance since its last
reflection crosses the threshold, made once, deterministic with the scripted provider, shown on the run page."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from chronicle.simulation.control import tasks
from chronicle.simulation.run.models import Simulation, Turn
from chronicle.simulation.providers import ProviderError, ScriptedProvider
from chronicle.simulation.providers.topics import topics
from memory.api import upkeep
from memory.models import Memory, MemoryBank
from memory.living.reflection import reflect
from memory.services.memories import memory_create

pytestmark = pytest.mark.django_db

LINES = [
    ("Jordan", "Jordan said: Bella's trattoria makes the best fresh pasta in town."),
    ("Sam", "Sam said: I cannot spend more than fifteen euros tonight, Jordan."),
    ("Jordan", "Jordan said: the pasta at Bella's is worth every cent, trust me."),
    ("Sam", "Sam said: fancy restaurants always overcharge students like me."),
    ("Jordan", "Jordan said: I trained in Naples, I know real pasta when I taste it."),
    ("Sam", "Sam said: a kebab costs five euros and nobody leaves hungry."),
    ("Jordan", "Jordan said: Bella's opens at seven, we could walk there."),
]


def run(user, *, provider: str = "scripted", **fields) -> Simulation:
    bank = MemoryBank.objects.create(name="run", owner=user)
    return Simulation.objects.create(owner=user, title="Dinner", status="running", max_turns=20, bank=bank,
                                     cast_snapshot=[{"name": "Alex"}, {"name": "Jordan"}], provider=provider, **fields)


def live(simulation: Simulation, turn: int) -> None:
    """Turn `turn`: Alex hears a line (importance 5)."""
    speaker, line = LINES[turn - 1]
    memory_create(bank=simulation.bank, agent="Alex", kind="episodic", category="dialogue", speaker=speaker,
                  content=line, source="earned", turn=turn, importance=5)


@pytest.fixture
def queued(monkeypatch):
    calls = []
    monkeypatch.setattr(tasks.reflect_task, "delay", lambda *args: calls.append(args))
    return calls


def test_a_reflection_is_queued_when_the_threshold_is_crossed_and_made_once(user, queued):
    simulation = run(user, reflection_threshold=30)
    for turn in range(1, 6):  # 25 < 30: nobody is due
        live(simulation, turn)
        assert tasks.queue_reflections(simulation.pk, turn) == []
    assert queued == []
    live(simulation, 6)  # 30: Alex crosses it, Jordan (nothing lived) does not
    assert tasks.queue_reflections(simulation.pk, 6) == ["Alex"]
    assert queued == [(simulation.pk, "Alex", 6)]
    simulation.refresh_from_db()
    assert simulation.reflecting_now == ["Alex"] and simulation.polls  # the page waits for the insights

    assert tasks.reflect_task(simulation.pk, "Alex", 6).endswith("reflections")
    simulation.refresh_from_db()
    assert simulation.reflecting_now == []
    made = list(Memory.objects.filter(bank=simulation.bank, kind="reflection"))
    assert made and {(m.agent, m.turn, m.source) for m in made} == {("Alex", 6, "reflection")}
    # Each insight rests on memories that exist, are Alex's and raise what the insight is about.
    for memory in made:
        topic = memory.content.split(" coming back to ", 1)[1].split(":", 1)[0].removeprefix("the ").lower()
        evidence = list(memory.evidence.all())
        assert evidence and all(m.agent == "Alex" and m.kind == "episodic" and topic in m.content.lower()
                                for m in evidence)
    # A redelivered task, or the same task queued again, makes nothing more.
    assert tasks.reflect_task(simulation.pk, "Alex", 6) == "already reflected"
    live(simulation, 7)
    assert tasks.queue_reflections(simulation.pk, 7) == []
    assert tasks.reflect_task(simulation.pk, "Alex", 7) == "not due"
    assert Memory.objects.filter(bank=simulation.bank, kind="reflection").count() == len(made)
    assert queued == [(simulation.pk, "Alex", 6)]


def test_a_reflection_made_apart_from_a_judgement_counts_its_calls_with_its_turn(user):
    """Its questions and insights are two calls a model answers: their prompts count in the run's cost."""
    from chronicle.simulation.run.selectors import side_tokens

    simulation = run(user, reflection_threshold=30)
    for turn in range(1, 7):
        live(simulation, turn)
    sixth = Turn.objects.create(simulation=simulation, index=5, agent="Jordan", status="done", context={"aux_tokens": 40})
    assert tasks.reflect_task(simulation.pk, "Alex", 6).endswith("reflections")
    sixth.refresh_from_db()
    assert sixth.context["reflection_tokens"] > 100 and side_tokens(sixth) == 40 + sixth.context["reflection_tokens"]


def test_the_default_threshold_is_150_so_the_six_turn_demo_never_reflects(user, settings, queued):
    assert settings.REFLECTION_THRESHOLD == 150
    simulation = run(user)
    assert simulation.reflection_threshold == 150  # a new run's default comes from the setting
    for turn in range(1, 7):
        live(simulation, turn)
    assert tasks.queue_reflections(simulation.pk, 6) == [] and queued == []


def test_the_scripted_provider_reflects_the_same_way_every_time(user):
    answers = []
    for _ in range(2):
        simulation = run(user)
        for turn in range(1, 8):
            live(simulation, turn)
        made = reflect(simulation.bank, "Alex", turn=7, ask=ScriptedProvider().complete)
        answers.append([(m.content, sorted(m.evidence.values_list("content", flat=True))) for m in made])
    assert answers[0] == answers[1]
    # What the lines keep coming back to, in their own words; not who spoke them. The pasta comes up
    # in the same lines as Bella: no second insight resting on them.
    # As the one reflecting would note it: who keeps coming back to what, in their words.
    assert [content.split(":")[0] for content, _evidence in answers[0]] == [
        "Jordan keeps coming back to Bella", "Sam keeps coming back to the euro"]
    assert answers[0][1][0] == ("Sam keeps coming back to the euro: “I cannot spend more than fifteen euros tonight, "
                                "Jordan.”, and “a kebab costs five euros and nobody leaves hungry.”")


def test_whom_the_lines_are_said_to_is_not_what_keeps_coming_up():
    """Three people answer the Inspector: that is whom they speak to, not what about (the offline
    reflection once made "Inspector keeps coming up" of it)."""
    statements = [(1, "Callum said: I'll not be long, Inspector."),
                  (2, "Tait said: Nobody but me and the lad, Inspector. The log lives in the watch room."),
                  (3, "Donal said: Every one of them, Inspector. Hail, same as Tuesday."),
                  (4, "Isla said: *pours the tea* The hail is just like Tuesday's, Mr Finlay?")]
    assert topics(statements, "Ashby") == [("the hail", [3, 4])]


def test_a_contraction_is_grammar_not_a_topic():
    """Two lines opening "I'll …" share a word, not a subject (the offline reflection once made
    "I'll keeps coming up" of them); "it's" and "don't" are the same kind of word."""
    statements = [(1, "Donal said: I'll say it now the lad's away. It's the harbourmaster's word, don't forget."),
                  (2, "Callum said: I'll not be long. It's only the curtains, don't wait up."),
                  (3, "Isla said: The harbourmaster at Scalloway drinks, and everyone knows it.")]
    assert topics(statements, "Ashby") == [("the harbourmaster", [1, 3])]


def test_a_failing_model_records_nothing(user, monkeypatch):

    class Down:
        def complete(self, prompt):
            raise ProviderError("cannot reach the LLM server")

    monkeypatch.setattr(tasks, "get_provider", lambda simulation: Down())
    simulation = run(user, provider="openai", reflection_threshold=10)
    for turn in range(1, 6):  # five memories: seed 003's least
        live(simulation, turn)
    assert tasks.reflect_task(simulation.pk, "Alex", 5) == "failed"
    assert not Memory.objects.filter(bank=simulation.bank, kind="reflection").exists()


def test_a_finished_run_keeps_polling_while_an_agent_reflects_and_says_so(user, client_for, queued):
    simulation = run(user, reflection_threshold=5)
    Simulation.objects.filter(pk=simulation.pk).update(status="completed")
    for turn in range(1, 6):
        live(simulation, turn)
    assert tasks.queue_reflections(simulation.pk, 5) == ["Alex"]
    client = client_for(user)
    page = client.get(simulation.get_absolute_url(), HTTP_HX_REQUEST="true")
    assert page.status_code == 200 and "Alex is reflecting on what happened" in page.content.decode()
    assert 'hx-trigger="every 2s"' in page.content.decode()
    tasks.reflect_task(simulation.pk, "Alex", 5)
    page = client.get(simulation.get_absolute_url(), HTTP_HX_REQUEST="true")
    assert page.status_code == 286 and "reflecting" not in page.content.decode()  # 286: htmx stops polling


def test_the_run_page_shows_the_reflection_after_its_turn_with_its_evidence(user, other_user, client_for):
    simulation = run(user)
    Turn.objects.bulk_create([Turn(simulation=simulation, index=i, agent="Jordan", status="done",
                                   utterance=f"Line {i + 1}.") for i in range(3)])
    for turn in range(1, 4):
        live(simulation, turn)
    cited = list(Memory.objects.filter(bank=simulation.bank, turn__in=[1, 3]).order_by("turn"))
    insight = memory_create(bank=simulation.bank, agent="Alex", kind="reflection", source="reflection", turn=2,
                            importance=8, content="Jordan <b>really</b> wants pasta", evidence=[m.pk for m in cited])

    page = client_for(user).get(simulation.get_absolute_url()).content.decode()
    assert "Alex reflects:" in page
    assert "Jordan &lt;b&gt;really&lt;/b&gt; wants pasta" in page and "<b>really</b>" not in page
    # After turn 2's line and before turn 3's.
    assert page.index('id="turn-1"') < page.index(f'id="reflection-{insight.pk}"') < page.index('id="turn-2"')
    bank_url = reverse("chronicle_memories", args=[simulation.pk])
    assert f'href="{bank_url}?agent=Alex&amp;memory={insight.pk}#memory-{insight.pk}"' in page
    assert f"rests on #{cited[0].pk}, #{cited[1].pk}" in page
    for memory in cited:
        assert f'href="{bank_url}?agent=Alex&amp;memory={memory.pk}#memory-{memory.pk}"' in page
        assert memory.content.replace("'", "&#x27;") in page
    # The bank page that link opens lists the reflection's card.
    bank_page = client_for(user).get(f"{bank_url}?agent=Alex").content.decode()
    assert f'id="memory-{insight.pk}"' in bank_page
    # Each card's kind has a mark drawn by CSS beside its word, no emoji: a machine without an
    # emoji font shows no empty boxes.
    assert 'class="kind-dot"' in bank_page and "reflection" in bank_page
    assert not re.search("[\U0001F300-\U0001FAFF\u2600-\u27BF]", bank_page)
    # Another writer sees neither.
    assert client_for(other_user).get(simulation.get_absolute_url()).status_code == 404


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_scripted_run_through_a_real_worker_reflects_and_shows_it(celery_worker, user, client_for):
    from chronicle.simulation.control import services
    from tests.chronicle.simulation.conftest import wait_for, wait_status
    from tests.factories import make_dinner

    # A threshold any lived line reaches (the heuristic scores the demo's lines about 0.4 to 4): this
    # checks the wiring after a real turn, not the figure.
    scenario = make_dinner(user)
    simulation = services.simulation_start(owner=user, scenario=scenario, cast=list(scenario.cast.all()),
                                           settings={"max_turns": 6, "retrieval_mode": "tools",
                                                     "reflection_threshold": 1})
    wait_status(simulation, "completed")
    reflections = Memory.objects.filter(bank=simulation.bank, kind="reflection")
    wait_for(reflections.exists, timeout=120, what="a reflection")
    wait_for(workers_idle, timeout=120, what="the reflections queued after the last turns")  # before teardown empties the tables
    for memory in reflections:
        evidence = list(memory.evidence.all())
        assert evidence and {m.agent for m in evidence} == {memory.agent}, memory
        assert memory.source == "reflection" and 1 <= memory.turn <= 6
    # One reflection per agent and turn at most: its insights are distinct.
    pairs = list(reflections.values_list("agent", "turn", "content"))
    assert len(pairs) == len(set(pairs))
    page = client_for(user).get(simulation.get_absolute_url()).content.decode()
    assert f"{reflections.first().agent} reflects:" in page


def workers_idle() -> bool:
    """No task running or waiting on any worker (reflections are queued after each turn)."""
    from wonda_site.celery import app

    with app.connection_for_read() as connection:
        if connection.default_channel.client.llen(app.conf.task_default_queue):  # still in the broker
            return False
    inspect = app.control.inspect(timeout=1)
    busy = [tasks for reply in (inspect.active() or {}, inspect.reserved() or {}) for tasks in reply.values()]
    return not any(busy)


def test_consolidation_is_queued_past_the_runs_own_budget_and_never_at_zero(user, monkeypatch):
    queued = []
    from memory.tasks import consolidate_bank_task  # what bank_consolidate_request queues

    monkeypatch.setattr(consolidate_bank_task, "delay", lambda *args: queued.append(args))
    simulation = run(user, consolidation_budget=4)
    for turn in range(1, 5):
        live(simulation, turn)
    assert tasks.queue_consolidations(simulation.pk, 4) == []  # 4 lines: at the budget, not past it
    live(simulation, 5)
    assert tasks.queue_consolidations(simulation.pk, 5) == ["Alex"]
    assert queued == [(simulation.bank_id, "Alex", 5 - upkeep.RECENT_TURNS, 4)]
    Simulation.objects.filter(pk=simulation.pk).update(consolidation_budget=0)
    assert tasks.queue_consolidations(simulation.pk, 6) == [] and len(queued) == 1
    assert "consolidates only on request" in Simulation.objects.get(pk=simulation.pk).option_labels


def test_an_earlier_insight_is_not_quoted_again_and_praise_is_no_topic():
    """Over a long run the offline reflection once quoted its own insights inside new ones ("The
    acceptance keeps coming up: “The important keeps coming up: …””) and made topics of "great",
    "important" and "always": what people say of anything, not what they talk about; and it said the
    same insight again at each reflection ("The health keeps coming up" at turns 140 and 163)."""
    statements = [
        (1, "Caroline said: It's always great to see you! The pottery class was so important to me."),
        (2, "Melanie said: Always great to hear from you. I finished a bowl at the pottery class yesterday."),
        (3, "The pottery keeps coming up: Caroline said “The pottery class was so important to me.”"),
        (4, "Caroline said: That's great, so important to have something of your own. The kiln was full."),
        (5, "The important keeps coming up: “The great keeps coming up: Caroline said “It's always great.””")]
    found = topics(statements, "Melanie")
    # The pottery was reflected on already (statement 3); "class" is said as "pottery class", and
    # "important" is how it was, not a thing: nothing new to say.
    assert found == []
    assert all(n not in (3, 5) for _topic, cited in found for n in cited)


def test_an_insight_reads_as_the_one_reflecting_would_note_it():
    """Its own lines are "I", the others by name; a model found "The pier keeps coming up: …" a bag of
    quotes under a word."""
    from chronicle.simulation.providers.topics import insight

    statements = {1: "Nessa said: The pier won't last another winter like this one.",
                  2: "Orla said: If the pier goes, the café goes with it.",
                  3: "Declan said: I tied up at the pier last night and it shook."}
    assert insight("the pier", statements, [1, 2, 3], agent="Orla") == (
        "Nessa, Declan and I keep coming back to the pier: Nessa said “The pier won't last another winter like "
        "this one.”, I said “If the pier goes, the café goes with it.”, and Declan said “I tied up at the pier "
        "last night and it shook.”")


def test_what_keeps_coming_back_is_a_thing_or_a_name_not_how_it_was():
    """On a long run the offline reflection, out of fresh topics, made "Caroline and I keep coming
    back to the resilient" and "… to the lately"."""
    statements = [(1, "Caroline said: Kids are amazingly resilient in tough situations. The roadtrip scared them."),
                  (2, "Melanie said: Wish I was that resilient too. They're tough kids, lately more than ever."),
                  (3, "Caroline said: Lately I think about the roadtrip a lot."),
                  (4, "Melanie said: The roadtrip home was quieter, thank goodness.")]
    assert [topic for topic, _cited in topics(statements, "Melanie")] == ["the roadtrip"]
