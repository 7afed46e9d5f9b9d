"""Seed 004's store contract over the HTTP API: retain with context, metadata, entities and tags;
recall with the four tag modes, an importance floor, a similarity floor and max results, counted as
recalled; the per-agent cap; reflect on a query; consolidate with its parameters and rules."""

from __future__ import annotations

import pytest
from django.test import Client

from devtools.fake_llm import ok
from memory.services import bank_create
from memory.models import Memory

pytestmark = pytest.mark.django_db


def bearer(raw: str) -> dict:
    return {"HTTP_AUTHORIZATION": f"Bearer {raw}"}


class Caller:
    def __init__(self, bank, token):
        self.base, self.token, self.c = f"/api/banks/{bank.pk}", token, Client()

    def post(self, verb: str, body: dict):
        return self.c.post(f"{self.base}/{verb}", body, content_type="application/json", **bearer(self.token))

    def retain(self, content: str, **fields):
        answer = self.post("retain", {"agent": "Ava", "content": content, **fields})
        assert answer.status_code == 201, answer.content
        return answer.json()[0]

    def recall(self, query: str, **fields) -> list[dict]:
        answer = self.post("recall", {"query": query, "agent": "Ava", **fields})
        assert answer.status_code == 200, answer.content
        return answer.json()


@pytest.fixture
def ava(user, ada_token):
    return Caller(bank_create(name="Ava's store", owner=user), ada_token)


def test_retain_keeps_context_metadata_entities_and_tags(ava):
    made = ava.retain("Defeated a dragon in the mountain cave.", kind="episodic", importance=7,
                      context="combat encounter", metadata={"location": "mountain", "outcome": "victory"},
                      entities=[{"name": "Smaug", "role": "enemy"}], tags=["combat", "dragon"], turn=4)
    assert made["context"] == "combat encounter" and made["entities"] == [{"name": "Smaug", "role": "enemy"}]
    assert made["metadata"]["given"] == {"location": "mountain", "outcome": "victory"}
    assert made["tags"] == ["combat", "dragon"] and made["importance"] == 7 and made["turn"] == 4
    stored = Memory.objects.get(pk=made["id"])
    assert stored.participants == ["Smaug"] and stored.source == "earned" and stored.agent == "Ava"
    # A line heard keeps them too, on each listener's copy.
    heard = ava.post("retain", {"speaker": "Bo", "text": "The dragon is back.", "listeners": ["Ava", "Cy"],
                                "turn": 5, "tags": ["dragon"], "context": "at the inn"}).json()
    assert {m["agent"] for m in heard} == {"Ava", "Cy"}
    assert all(m["tags"] == ["dragon"] and m["context"] == "at the inn" for m in heard)


@pytest.mark.parametrize("body, problem", [
    ({"agent": "Ava"}, "a memory needs both agent and content"),
    ({"agent": "Ava", "content": "x", "speaker": "Bo"}, "not both"),
    ({"agent": "Ava", "content": "x", "entities": [{"role": "enemy"}]}, "entities.0.name"),
    ({"agent": "Ava", "content": "x", "metadata": {"a": {"nested": 1}}}, "metadata"),
    ({"agent": "Ava", "content": "x", "kind": "dream"}, "kind"),
])
def test_a_retain_that_cannot_be_read_is_a_400_naming_the_field(ava, body, problem):
    answer = ava.post("retain", body)
    assert answer.status_code == 400 and problem in answer.json()["detail"], answer.json()
    assert not Memory.objects.filter(agent="Ava").exists()


def test_recall_filters_by_tags_in_the_four_modes(ava):
    ids = {name: ava.retain(text, tags=tags)["id"] for name, text, tags in [
        ("fight", "I fought the dragon at the cave.", ["combat"]),
        ("danger", "The dragon fight nearly killed me.", ["combat", "danger"]),
        ("plain", "The dragon flew over the village.", []),
        ("other", "The dragon's hoard glittered.", ["treasure"])]}

    def found(tags, mode):
        return {next(k for k, v in ids.items() if v == r["memory"]["id"])
                for r in ava.recall("the dragon", tags=tags, tag_mode=mode, similarity_threshold=0)}

    assert found(["combat"], "Any") == {"fight", "danger", "plain"}  # untagged memories stay in view
    assert found(["combat"], "AnyStrict") == {"fight", "danger"}
    assert found(["combat", "danger"], "All") == {"danger", "plain"}
    assert found(["combat", "danger"], "all_strict") == {"danger"}
    assert found([], "AllStrict") == set(ids)  # no tags asked: no tag filter
    bad = ava.post("recall", {"query": "the dragon", "tags": ["combat"], "tag_mode": "Some"})
    assert bad.status_code == 400 and "tag_mode" in bad.json()["detail"] and "AnyStrict" in bad.json()["detail"]


def test_recall_keeps_to_the_similarity_floor_max_results_and_importance(ava):
    for n in range(12):
        ava.retain(f"Ava baked bread for the harvest feast, loaf number {n}.", importance=n % 10)
    ava.retain("The river froze over in January.", importance=9)
    everything = ava.recall("Ava baked bread for the harvest feast", similarity_threshold=-1, max_results=100)
    assert len(everything) == 13
    default = ava.recall("Ava baked bread for the harvest feast")
    assert len(default) == 10  # seed 004's max_results
    assert all(r["components"]["similarity"] >= 0.7 for r in default) and [r["rank"] for r in default] == list(range(1, 11))
    river = next(r for r in everything if "river" in r["memory"]["content"])
    assert river["components"]["similarity"] < 0.7  # an unrelated memory is below the floor...
    assert all("river" not in r["memory"]["content"] for r in ava.recall("Ava baked bread for the harvest feast", max_results=100))
    important = ava.recall("Ava baked bread for the harvest feast", min_importance=8, similarity_threshold=0, max_results=100)
    assert {r["memory"]["importance"] for r in important} == {8, 9}
    # ...and k, the older name, still sets the number of results.
    assert len(ava.recall("Ava baked bread for the harvest feast", k=3)) == 3


def test_a_recall_that_finds_nothing_can_fall_back_to_the_latest_memories(ava):
    """Seed 002: nothing above the floor, and the caller asked for the fallback: the agent's latest
    memories under the same filter, marked found_by "recent" and counted as recalled."""
    for turn, (text, tags) in enumerate([("Ava sharpened her sword.", ["combat"]),
                                         ("Ava fed the goats.", ["farm"]),
                                         ("Ava sparred with Bo in the yard.", ["combat"]),
                                         ("Ava mended the fence.", ["farm"])], start=1):
        ava.retain(text, tags=tags, turn=turn)
    question = "What is the capital of the moon's treasury?"
    assert ava.recall(question) == []  # seed 004's floor, as before: nothing is similar enough
    latest = ava.recall(question, fallback="recent", max_results=3)
    assert [r["memory"]["content"] for r in latest] == ["Ava mended the fence.", "Ava sparred with Bo in the yard.",
                                                         "Ava fed the goats."]
    assert {r["found_by"] for r in latest} == {"recent"} and [r["rank"] for r in latest] == [1, 2, 3]
    # The same filter holds: combat only, strictly.
    combat = ava.recall(question, fallback="recent", tags=["combat"], tag_mode="AnyStrict")
    assert [r["memory"]["content"] for r in combat] == ["Ava sparred with Bo in the yard.", "Ava sharpened her sword."]
    assert Memory.objects.get(content="Ava fed the goats.").access_count == 1
    # A search that finds something is what comes back, marked as found by the search.
    found = ava.recall("Ava fed the goats.", fallback="recent")
    assert found[0]["memory"]["content"] == "Ava fed the goats." and found[0]["found_by"] == "search"
    bad = ava.post("recall", {"query": question, "agent": "Ava", "fallback": "oldest"})
    assert bad.status_code == 400 and "fallback" in bad.json()["detail"]


def test_what_recall_returns_counts_as_recalled(ava):
    made = ava.retain("Ava hid the map under the floorboard.", turn=2)
    assert Memory.objects.get(pk=made["id"]).access_count == 0
    ava.recall("where is the map hidden?", similarity_threshold=0, current_turn=6)
    ava.recall("where is the map hidden?", similarity_threshold=0, current_turn=7)
    stored = Memory.objects.get(pk=made["id"])
    assert stored.access_count == 2 and stored.last_accessed_turn == 7


def test_an_agent_at_the_limit_is_refused_with_a_409_and_nothing_written(ava, settings):
    settings.MEMORY_MAX_PER_AGENT = 2
    ava.retain("First.")
    ava.retain("Second.")
    for body in ({"agent": "Ava", "content": "Third."},
                 {"speaker": "Bo", "text": "Third.", "listeners": ["Ava", "Cy"], "turn": 3}):
        full = ava.post("retain", body)
        assert full.status_code == 409 and "Ava (2) already holds the limit of 2" in full.json()["detail"]
        assert "consolidate or archive" in full.json()["detail"]
    assert Memory.objects.filter(content__contains="Third").count() == 0
    # An archived memory frees its place; another agent has its own.
    Memory.objects.filter(content="First.").update(status="archived")
    assert ava.post("retain", {"agent": "Ava", "content": "Third."}).status_code == 201
    assert ava.post("retain", {"agent": "Cy", "content": "Mine."}).status_code == 201


def test_reflect_on_a_query_answers_from_the_tagged_memories_offline(ava):
    ava.retain("I fought the dragon at the cave.", tags=["combat"])
    ava.retain("I fought off a cold all winter.", tags=["health"])
    answer = ava.post("reflect", {"agent": "Ava", "query": "my fights", "tags": ["combat"], "tag_mode": "AnyStrict",
                                  "context": "A bard asks about battles.", "similarity_threshold": 0})
    assert answer.status_code == 200
    body = answer.json()
    assert "I fought the dragon at the cave." in body["answer"] and "cold" not in body["answer"]
    assert [r["memory"]["content"] for r in body["memories"]] == ["I fought the dragon at the cave."]
    assert body["insights"] == [] and not Memory.objects.filter(kind="reflection").exists()
    neither = ava.post("reflect", {"agent": "Ava"})
    assert neither.status_code == 400 and "query" in neither.json()["detail"]


def test_consolidate_groups_similar_memories_by_seed_004s_rules(woods, ada_token):
    ava = Caller(woods, ada_token)
    saw, heard, lone = woods.memories.order_by("turn")
    summaries = ava.post("consolidate", {"agent": "Ava", "threshold": 0.7}).json()
    assert len(summaries) == 1  # two similar memories are enough; the lone one stays as it is
    summary = summaries[0]
    assert summary["importance"] == pytest.approx(6.6)  # the most important original's, + 10 %
    assert summary["tags"] == ["wolves", "night"] and summary["source"] == "consolidation"
    originals = Memory.objects.filter(pk__in=[saw.pk, heard.pk])
    assert {m.status for m in originals} == {"consolidated"}
    assert Memory.objects.get(pk=summary["id"]).decay_rate == pytest.approx(
        sum(m.decay_rate for m in originals) / 2 * 0.8)
    assert Memory.objects.get(pk=lone.pk).status == "active"
    # Strict tags that none of what is left carries: nothing to do.
    assert ava.post("consolidate", {"agent": "Ava", "tags": ["night"], "tag_mode": "AnyStrict"}).json() == []


def test_consolidate_asks_the_runs_model_at_temperature_0_3_in_300_tokens(model_run, ada_token):
    bank, fake = model_run
    ava = Caller(bank, ada_token)
    ava.retain("Ava saw wolves howling at the edge of the forest.", turn=1)
    ava.retain("Ava heard wolves howling by the forest edge.", turn=2)
    fake.script(ok("Ava heard wolves howl at the forest's edge on two nights."))
    summaries = ava.post("consolidate", {"agent": "Ava", "query": "wolves", "context": "Night watch"}).json()
    assert [s["content"] for s in summaries] == ["Ava heard wolves howl at the forest's edge on two nights."]
    asked = [r for r in fake.requests if "consolidating 2 similar memories" in str(r["messages"])]
    assert len(asked) == 1 and asked[0]["temperature"] == 0.3 and asked[0]["max_tokens"] == 300
    assert "Context: Night watch" in asked[0]["messages"][-1]["content"]


def test_the_schema_shows_the_new_parameters():
    schema = Client().get("/api/openapi.json").json()
    parts = schema["components"]["schemas"]
    assert {"tags", "tag_mode", "min_importance", "similarity_threshold", "max_results", "fallback"} \
        <= set(parts["RecallIn"]["properties"])
    assert {"context", "metadata", "entities", "tags", "agent", "content"} <= set(parts["RetainIn"]["properties"])
    assert {"query", "context", "tags"} <= set(parts["ReflectIn"]["properties"])
    assert {"query", "context", "tags", "threshold"} <= set(parts["ConsolidateIn"]["properties"])
    assert parts["RecallIn"]["properties"]["similarity_threshold"]["default"] == 0.7
    assert parts["RecallIn"]["properties"]["max_results"]["default"] == 10


def test_a_tool_called_over_the_api_counts_what_it_recalls_and_keeps_to_the_cap(ava, settings):
    made = ava.retain("Ava buried the silver spoons under the oak.", tags=["secret"])
    found = ava.c.post(f"{ava.base}/tools/query_memory", {"agent": "Ava", "current_turn": 4, "arguments": {
        "query": "where are the spoons?", "tags": ["secret"], "tag_mode": "any_strict"}},
        content_type="application/json", **bearer(ava.token))
    assert found.status_code == 200 and found.json()["filter"]["tags_mode"] == "any_strict"
    assert [m["content"] for m in found.json()["response"]["memories"]] == [made["content"]]
    stored = Memory.objects.get(pk=made["id"])
    assert stored.access_count == 1 and stored.last_accessed_turn == 4
    settings.MEMORY_MAX_PER_AGENT = 1
    full = ava.c.post(f"{ava.base}/tools/form_memory", {"agent": "Ava", "arguments": {
        "content": "The oak is hollow.", "importance": 5}}, content_type="application/json", **bearer(ava.token))
    assert full.status_code == 409 and Memory.objects.filter(agent="Ava").count() == 1


@pytest.mark.parametrize("body, field", [
    ({"agent": "Ava", "content": "x", "context": "bad\u0000context"}, "context"),
    ({"agent": "Ava", "content": "x", "metadata": {"place": "bad\u0000value"}}, "metadata"),
    ({"agent": "Ava", "content": "x", "entities": [{"name": "Zed\u0007", "role": "enemy"}]}, "entities.0.name"),
    ({"agent": "Ava", "content": "x", "metadata": {str(i): i for i in range(51)}}, "metadata"),
])
def test_hostile_details_are_refused_naming_the_field(ava, body, field):
    answer = ava.post("retain", body)
    assert answer.status_code == 400 and answer.json()["detail"].startswith(field), answer.json()
    assert not Memory.objects.exists()


def _said(bank, agent, text, when, turn, **fields):
    from memory.services import memory_create

    return memory_create(bank=bank, content=text, agent=agent, kind="episodic", category="dialogue", turn=turn,
                         source="earned", story_time=when, **fields)


def test_consolidate_by_session_summarises_each_ended_conversation_by_story_time(user, ada_token):
    """Seed 003: an hour of story time is one session; a session of three lines or more becomes one
    summary, its lines consolidated; a short one stays, and the one still going on is left alone."""
    from datetime import datetime, timezone

    bank = bank_create(name="Inn", owner=user)
    at = lambda h, m: datetime(1890, 5, 1, h, m, tzinfo=timezone.utc)  # noqa: E731
    evening = [_said(bank, "Ava", text, at(18, minute), turn, tags=[tag]) for turn, (minute, text, tag) in enumerate([
        (0, "Bo said: The bridge is out.", "road"), (10, "Cy said: Then we take the ford.", "road"),
        (25, "Bo said: The ford floods at night.", "river"), (50, "Cy said: We leave at dawn, then.", "road")], 1)]
    short = [_said(bank, "Ava", "Bo said: Pass the salt.", at(20, 0), 5),
             _said(bank, "Ava", "Cy said: Here.", at(20, 20), 6)]
    ongoing = [_said(bank, "Ava", f"Bo said: Line {n}.", at(21, 30 + 5 * n), 7 + n) for n in range(3)]
    undated = _said(bank, "Ava", "Bo said: Before the calendar.", None, 0)
    ava = Caller(bank, ada_token)
    made = ava.post("consolidate", {"agent": "Ava", "by": "session"})
    assert made.status_code == 200, made.content
    summaries = made.json()
    assert len(summaries) == 1
    summary = Memory.objects.get(pk=summaries[0]["id"])
    assert summary.content.startswith("A conversation of 4 lines (1890-05-01 18:00, turns 1–4)")
    assert "The bridge is out." in summary.content and "We leave at dawn" in summary.content
    assert summary.story_time == at(18, 50) and summary.tags == ["road", "river"]
    assert summary.metadata["consolidation"]["session"]["minutes"] == 60
    assert {m.status for m in Memory.objects.filter(pk__in=[m.pk for m in evening])} == {"consolidated"}
    left = Memory.objects.filter(pk__in=[m.pk for m in short + ongoing] + [undated.pk])
    assert {m.status for m in left} == {"active"}
    # Two lines are enough when asked: the short session is summarised; the one going on still waits.
    again = ava.post("consolidate", {"agent": "Ava", "by": "session", "min_lines": 2, "session_minutes": 30}).json()
    assert [Memory.objects.get(pk=s["id"]).content.split(" (")[0] for s in again] == ["A conversation of 2 lines"]
    bad = ava.post("consolidate", {"agent": "Ava", "by": "day"})
    assert bad.status_code == 400 and "by" in bad.json()["detail"]


def test_a_session_is_summarised_by_the_runs_model_as_a_conversation(model_run, ada_token):
    from datetime import datetime, timezone

    bank, fake = model_run
    for turn, minute in enumerate((0, 10, 20, 90), 1):
        _said(bank, "Ava", f"Bo said: Line {turn}.", datetime(1890, 5, 1, 18, minute % 60, tzinfo=timezone.utc)
              if minute < 60 else datetime(1890, 5, 1, 19, 30, tzinfo=timezone.utc), turn)
    fake.script(ok("Bo went over the plan for the crossing, three times."))
    summaries = Caller(bank, ada_token).post("consolidate", {"agent": "Ava", "by": "session"}).json()
    assert [s["content"] for s in summaries] == ["Bo went over the plan for the crossing, three times."]
    asked = [r for r in fake.requests if "lines of one conversation" in str(r["messages"])]
    assert len(asked) == 1 and asked[0]["temperature"] == 0.3
    assert "Line 1." in str(asked[0]["messages"]) and "Line 4." not in str(asked[0]["messages"])
