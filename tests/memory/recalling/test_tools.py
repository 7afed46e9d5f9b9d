import json

import pytest

from memory.embedding import cache
from memory.recalling.tools import TOOL_NAMES, ToolContext, call_tool, openai_tool_schemas


@pytest.fixture
def ctx(seeded_bank):
    return ToolContext(bank=seeded_bank, agent="Alex", current_turn=3)


def _contents(result):
    return [m["content"] for m in result.response["memories"]]


def test_registry_gives_openai_schemas_for_every_tool():
    schemas = openai_tool_schemas()
    assert [s["function"]["name"] for s in schemas] == TOOL_NAMES
    assert TOOL_NAMES[:6] == ["query_self", "query_background", "query_communication_style", "query_scene",
                              "query_character", "query_memory"]
    by_name = {s["function"]["name"]: s["function"] for s in schemas}
    assert by_name["query_character"]["parameters"]["required"] == ["name"]
    assert by_name["query_self"]["parameters"]["required"] == []  # aspect is optional
    assert by_name["query_self"]["parameters"]["properties"]["aspect"]["enum"][0] == "all"
    json.dumps(schemas)  # serialisable as sent to an LLM


def test_query_self_answers_in_seed_000_format(ctx):
    result = call_tool("query_self", {}, context=ctx)
    assert result.error == ""
    assert set(result.response) == {"memories"}
    first = result.response["memories"][0]
    assert set(first) == {"content", "relevance", "memory_id"}
    assert first["content"].startswith("You are Alex")
    assert 0 < first["relevance"] <= 1
    assert result.query == "who am I?"
    # The whole sheet by default, identity first; an aspect narrows it to one category.
    assert result.filter == {"agent": "Alex", "kinds": ["character"], "tags_mode": "any", "statuses": ["active"],
                             "shared": True}
    assert result.results[0].matched_key == "who am I?"
    assert {r.memory.category for r in result.results} >= {"identity", "communication"}
    narrow = call_tool("query_self", {"aspect": "communication"}, context=ctx)
    assert {r.memory.category for r in narrow.results} == {"communication"}
    assert call_tool("query_self", {"aspect": "horoscope"}, context=ctx).error.startswith("query_self: aspect must be")


def test_fixed_tools_return_their_own_category_and_k(ctx):
    background = call_tool("query_background", None, context=ctx)
    assert 2 <= len(background.response["memories"]) <= 5
    assert all(r.memory.category == "background" and r.memory.agent == "Alex" for r in background.results)
    style = call_tool("query_communication_style", "{}", context=ctx)
    assert len(style.response["memories"]) == 1 and "Direct and concise" in _contents(style)[0]
    scene = call_tool("query_scene", {}, context=ctx)
    assert len(scene.response["memories"]) == 4
    assert _contents(scene)[0].startswith("Location: Alex's apartment")


def test_query_character_finds_what_i_know_about_them(ctx):
    result = call_tool("query_character", {"name": "jordan"}, context=ctx)
    assert result.error == ""
    assert len(result.response["memories"]) == 1
    assert "roommate" in _contents(result)[0]
    assert result.query == "who is Jordan?"


def test_query_character_tells_what_was_learned_of_them_since_the_start_not_the_notes_twice(seeded_bank):
    """An agent asking about someone heard only the writer's starting notes, twice in other words,
    never what it had learned of them since."""
    from memory.forming.extraction import facts_create
    from memory.services import memory_create

    note = call_tool("query_character", {"name": "Jordan"}, context=ToolContext(bank=seeded_bank, agent="Alex")).results[0]
    memory_create(bank=seeded_bank, agent="Alex", kind="character_knowledge", about="Jordan", source="gifted",
                  category=note.memory.category, content=note.memory.content.rstrip(".") + ", as everyone knows.")
    facts_create(bank=seeded_bank, facts={"Alex": ["Jordan trained as a chef in Naples."]}, speaker="Jordan", turn=4)
    facts_create(bank=seeded_bank, facts={"Alex": ["Sam's bike has a flat tyre."]}, speaker="Sam", turn=5)
    facts_create(bank=seeded_bank, facts={"Alex": ["Jordan booked Bella's for nine."]}, speaker="Sam", turn=9)
    memory_create(bank=seeded_bank, agent="Alex", kind="emotional", category="reaction", about="Jordan", speaker="Jordan",
                  source="earned", turn=6, content="Alex was hurt by Jordan at turn 6: “You never listen.”")

    answer = call_tool("query_character", {"name": "Jordan"},
                       context=ToolContext(bank=seeded_bank, agent="Alex", current_turn=8)).response
    assert len(answer["memories"]) == 1  # the note and its rewording are one note
    assert [f["content"] for f in answer["learned_since"]] == ["Jordan trained as a chef in Naples."]  # not Sam's, not later
    assert answer["learned_since"][0]["turn"] == "4"
    assert [m["content"] for m in answer["moved_by"]] == ["Alex was hurt by Jordan at turn 6: “You never listen.”"]
    later = call_tool("query_character", {"name": "Jordan"},
                      context=ToolContext(bank=seeded_bank, agent="Alex", current_turn=12)).response
    assert [f["content"] for f in later["learned_since"]] == ["Jordan trained as a chef in Naples.",
                                                              "Jordan booked Bella's for nine."]  # in order


def test_query_memory_returns_earlier_lines_with_turn_numbers(seeded_bank, ctx):
    from memory.forming.capture import remember_utterance

    remember_utterance(bank=seeded_bank, speaker="Jordan", text="I love Italian food, especially fresh pasta.", turn=1,
                       listeners=["Alex", "Jordan"])
    remember_utterance(bank=seeded_bank, speaker="Alex", text="We must book a table before seven.", turn=2,
                       listeners=["Alex", "Jordan"])
    result = call_tool("query_memory", {"query": "what did Jordan say about food?"}, context=ctx)
    assert result.response["query"] == "what did Jordan say about food?"
    top = result.response["memories"][0]
    assert top == {"content": "Jordan said: I love Italian food, especially fresh pasta.",
                   "relevance": top["relevance"], "turn": "1", "memory_id": top["memory_id"]}
    # Alex's own copies of the lines, with their turns; what else Alex holds (its sheet) may follow.
    assert [m["turn"] for m in result.response["memories"] if "turn" in m] == ["1", "2"]
    assert all(r.memory.agent in ("Alex", "") for r in result.results)

    # A line the caller already reads in its transcript window is not handed back again.
    in_window = call_tool("query_memory", {"query": "what did Jordan say about food?"},
                          context=ToolContext(bank=seeded_bank, agent="Alex", current_turn=3, window_turns=frozenset({1})))
    assert [m["turn"] for m in in_window.response["memories"] if "turn" in m] == ["2"]
    assert len(in_window.response["memories"]) == len(result.response["memories"])  # not short for it


def test_a_search_whose_first_places_the_window_took_searches_wider_rather_than_answer_empty(seeded_bank):
    """Three lines in the window about Bella's leave Alex twelve memories of it (each line, three
    facts drawn from each): they fill the first places of "Bella's prices", and what Alex knew of
    Bella's before them must still come back."""
    from memory.forming.capture import remember_utterance
    from memory.forming.extraction import facts_create
    from memory.services import memory_create

    memory_create(bank=seeded_bank, content="Bella's charges twenty-two euros for a risotto, wine not included.",
                  agent="Alex", kind="semantic", category="learned", source="earned", turn=0, importance=5.0)
    for turn in (1, 2, 3):
        remember_utterance(bank=seeded_bank, speaker="Jordan", text=f"Bella's, Bella's, Bella's: Bella's prices are fine, I swear ({turn}).",
                           turn=turn, listeners=["Alex", "Jordan"])
        facts_create(bank=seeded_bank, speaker="Jordan", turn=turn, facts={"Alex": [
            f"Jordan says Bella's prices are fine ({turn}).", f"Jordan wants Bella's tonight ({turn}).",
            f"Jordan swears about Bella's prices ({turn})."]})
    context = ToolContext(bank=seeded_bank, agent="Alex", current_turn=4, window_turns=frozenset({1, 2, 3}))
    answer = call_tool("query_memory", {"query": "Bella's prices"}, context=context)
    contents = [m["content"] for m in answer.response["memories"]]
    assert "Bella's charges twenty-two euros for a risotto, wine not included." in contents
    assert not any(r.memory.turn in (1, 2, 3) for r in answer.results)


def test_a_history_that_is_all_in_the_callers_window_is_said_to_be_there_not_empty(seeded_bank):
    """recall_interactions with every line between the two in the window: no list of them again, and
    not a bare empty list either (a model read that as "no history"): the note says where it is."""
    from memory.forming.capture import remember_utterance
    from memory.forming.extraction import facts_create
    from memory.recalling.tool_types import IN_FRONT

    remember_utterance(bank=seeded_bank, speaker="Jordan", text="Alex, I booked us a table at Bella's.", turn=1,
                       listeners=["Alex", "Jordan"])

    def history(window):
        return call_tool("recall_interactions", {"character_name": "Jordan"},
                         context=ToolContext(bank=seeded_bank, agent="Alex", current_turn=3, window_turns=window)).response

    in_window = history(frozenset({1, 2}))
    assert in_window["memories"] == [] and in_window["note"] == IN_FRONT
    # So for facts drawn from a line on screen: not "No facts on this topic".
    facts_create(bank=seeded_bank, facts={"Alex": ["The cellar boiler was replaced in March."]}, speaker="Jordan", turn=1)
    booked = call_tool("recall_facts", {"topic": "when was the cellar boiler replaced?"},
                       context=ToolContext(bank=seeded_bank, agent="Alex", current_turn=3,
                                           window_turns=frozenset({1, 2}))).response
    assert booked["facts"] == [] and booked["note"] == IN_FRONT
    earlier = history(frozenset({2}))
    assert any("Bella's" in m["content"] for m in earlier["memories"]) and "note" not in earlier
    # A search that found nothing at all says nothing of the kind.
    nothing = call_tool("recall_facts", {"topic": "the price of tea in Lisbon"},
                        context=ToolContext(bank=seeded_bank, agent="Alex", current_turn=3)).response
    assert nothing.get("note") != IN_FRONT


def test_recall_facts_leaves_out_what_was_learned_from_a_line_the_caller_still_reads(seeded_bank):
    """A fact drawn from a line is that line again while the line is in the caller's window; once
    the window has moved past it, it is a fact worth handing back."""
    from memory.forming.extraction import facts_create
    from memory.forming.capture import remember_utterance

    remember_utterance(bank=seeded_bank, speaker="Jordan", text="Bella's does a mushroom risotto for sixteen euros.",
                       turn=4, listeners=["Alex", "Jordan"])
    facts_create(bank=seeded_bank, facts={"Alex": ["Bella's mushroom risotto costs sixteen euros."]}, speaker="Jordan",
                 turn=4)

    def facts(window):
        answer = call_tool("recall_facts", {"topic": "how much is the risotto at Bella's?"},
                           context=ToolContext(bank=seeded_bank, agent="Alex", current_turn=6, window_turns=window))
        return [f["content"] for f in answer.response["facts"]]

    assert "Bella's mushroom risotto costs sixteen euros." not in facts(frozenset({4, 5}))
    assert "Bella's mushroom risotto costs sixteen euros." in facts(frozenset({5}))


def test_a_stage_direction_the_caller_reads_is_not_handed_back(seeded_bank):
    """The window shows "*The lights go out*" (at turn 4): a search leaves that memory out while the
    window holds turn 4, and finds it once the window has moved on."""
    from memory.services import memory_create

    memory_create(bank=seeded_bank, content="The lights go out in the whole street.", agent="Alex", kind="observation",
                  category="stage", source="earned", turn=4, importance=6.0)

    def found(window):
        answer = call_tool("query_memory", {"query": "when did the lights go out?"},
                           context=ToolContext(bank=seeded_bank, agent="Alex", current_turn=6, window_turns=window))
        return [m["content"] for m in answer.response["memories"]]

    assert "The lights go out in the whole street." not in found(frozenset({4, 5}))
    assert "The lights go out in the whole street." in found(frozenset({5}))


@pytest.mark.parametrize(
    "name, arguments, message",
    [
        ("query_everything", {}, "Unknown tool 'query_everything'"),
        ("query_character", {"name": "Zed"}, "Unknown character 'Zed'. Characters you can ask about: Jordan."),
        ("query_character", {}, "needs the argument 'name'"),
        ("query_memory", {"query": "   "}, "'query' cannot be empty"),
        ("query_memory", {"query": 42}, "'query' must be a string, not int"),
        ("query_memory", "{not json", "not valid JSON"),
        ("query_memory", ["a"], "must be a JSON object"),
        ("query_self", {"verbose": True}, "unexpected argument(s): verbose"),
        ("form_memory", {"content": "", "importance": 5}, "'content' cannot be empty"),
        ("form_memory", {"content": "x" * 10_001, "importance": 5}, "10,001 characters; the limit is 10,000"),
        ("reinforce_memory", {"memory_id": 999999999}, "No memory 999999999"),
    ],
)
def test_bad_calls_get_a_readable_error_and_never_raise(ctx, name, arguments, message):
    result = call_tool(name, arguments, context=ctx)
    assert set(result.response) == {"error"}
    assert message in result.response["error"]
    assert result.error == result.response["error"]


def test_form_reinforce_and_associate_memories(ctx, seeded_bank):
    formed = call_tool("form_memory", {"content": "Jordan hid the car keys.", "importance": 8, "type": "observation"}, context=ctx)
    memory_id = formed.response["memory_id"]
    found = call_tool("recall_episodes", {"query": "where are the car keys?"}, context=ctx)
    assert found.response["memories"][0]["content"] == "Jordan hid the car keys."
    reinforced = call_tool("reinforce_memory", {"memory_id": memory_id}, context=ctx)
    assert reinforced.response["importance"] == 8.5
    identity = call_tool("query_self", {}, context=ctx).results[0].memory.pk
    linked = call_tool("associate_memories", {"memory_id_1": memory_id, "memory_id_2": identity}, context=ctx)
    assert linked.response == {"associated": [memory_id, identity]}


def test_a_cached_canonical_query_makes_no_model_call(ctx, monkeypatch):
    call_tool("query_self", {}, context=ctx)  # warm (seeding already cached "who am I?")
    cache.clear_local()  # the database layer alone must serve it

    def no_model(*args, **kwargs):
        raise AssertionError("the model was called for a canonical query")

    monkeypatch.setattr("memory.embedding.encode", no_model)
    for name in ["query_self", "query_background", "query_communication_style", "query_scene"]:
        result = call_tool(name, {}, context=ctx)
        assert result.error == "" and result.response["memories"]
    assert call_tool("query_character", {"name": "Jordan"}, context=ctx).error == ""


def test_the_whole_sheet_follows_the_writers_edits_between_turns(ctx):
    """recall_sheet keeps its ranking between turns (a pre-populated run asks every turn); an edit,
    a re-embedding or an archive of a sheet memory must show in the very next answer."""
    from memory.models import Memory
    from memory.services import memory_archive, memory_reembed, memory_update
    from memory.recalling.tools import recall_sheet

    first = [r.memory.content for r in recall_sheet(ctx.bank, "Alex", shared=True)[1]]
    again = recall_sheet(ctx.bank, "Alex", shared=True)[1]
    assert [r.memory.content for r in again] == first
    assert [r.rank for r in again] == list(range(1, len(first) + 1))

    style = Memory.objects.get(bank=ctx.bank, agent="Alex", category="communication")
    memory_update(memory=style, content="Alex speaks only in questions, never in statements.")
    stale = [r.memory.content for r in recall_sheet(ctx.bank, "Alex", shared=True)[1]]
    assert all("only in questions" not in c for c in stale)  # left out until re-embedded
    memory_reembed(memory=style)
    edited = [r.memory.content for r in recall_sheet(ctx.bank, "Alex", shared=True)[1]]
    assert "Alex speaks only in questions, never in statements." in edited

    memory_archive(memory=Memory.objects.get(pk=style.pk))
    archived = [r.memory.content for r in recall_sheet(ctx.bank, "Alex", shared=True)[1]]
    assert "Alex speaks only in questions, never in statements." not in archived
    assert len(archived) == len(first) - 1


def test_recall_facts_gives_facts_or_says_there_are_none_never_the_profile(seeded_bank):
    from memory.services import memory_create

    memory_create(bank=seeded_bank, content="The Thai place on Elm Street closes its kitchen at nine.", agent="Alex",
                  kind="semantic", category="lore", importance=6.0, source="writer")
    ctx = ToolContext(bank=seeded_bank, agent="Alex", current_turn=3)

    found = call_tool("recall_facts", {"topic": "when does the Thai place close its kitchen?"}, context=ctx)
    assert found.response["facts"][0]["content"].startswith("The Thai place on Elm Street")
    assert all(r.memory.kind != "character" for r in found.results)  # no "My traits: …", "I value: …"

    none = call_tool("recall_facts", {"topic": "the price of tea on the moon in 1802"}, context=ctx)
    assert none.response["facts"] == [] and none.response["note"] == "No facts on this topic."


def test_a_search_gives_its_places_to_what_was_said_not_to_a_quote_of_it_or_a_bare_date(seeded_bank):
    """Past the window, a line and how it moved me (which quotes it) would take two of five places,
    and a stage note that only says the date ("A new day: it is …") one more: a question about the
    lighthouse gets the line once and the other lines about it instead."""
    from memory.forming.capture import remember_utterance
    from memory.forming.extraction import reactions_create
    from memory.models import Relationship
    from memory.services import memory_create

    line = "The lighthouse keeper rowed out to the wreck alone at dawn."
    remember_utterance(bank=seeded_bank, speaker="Jordan", text=line, turn=5, listeners=["Alex", "Jordan"])
    row = Relationship.objects.create(bank=seeded_bank, agent="Alex", other="Jordan", turn=5, trust=0.0, affinity=0.3,
                                      affinity_change=0.3, reason=f"Jordan: “{line}”")
    reactions_create(bank=seeded_bank, rows=[row], turn=5)
    memory_create(bank=seeded_bank, agent="Alex", kind="observation", category="stage", turn=6, source="earned",
                  content="A new day: it is 7:55 am on 9 June 2023", importance=6.0)
    for turn, text in ((7, "The lighthouse lamp was lit an hour late."), (8, "Nobody has kept the lighthouse log since May.")):
        remember_utterance(bank=seeded_bank, speaker="Jordan", text=text, turn=turn, listeners=["Alex", "Jordan"])

    answer = call_tool("query_memory", {"query": "the lighthouse keeper and the wreck"},
                       context=ToolContext(bank=seeded_bank, agent="Alex", current_turn=60))
    contents = [r.memory.content for r in answer.results]
    assert sum(line in c for c in contents) == 1, contents  # the line, not its echo besides
    assert not any(c.startswith("A new day") for c in contents)
    assert any("lamp was lit" in c for c in contents) and any("lighthouse log" in c for c in contents)


def test_a_question_found_comes_with_the_line_that_answered_it(seeded_bank):
    """Asked what the dog is called, a search finds the question ("What's his name?") before the
    answer, which shares none of its words: the answer comes with it, in the same place."""
    from memory.forming.capture import remember_utterance

    for turn, speaker, text, listeners in [
        (3, "Jordan", "You got a dog? What's the dog's name?", ["Alex", "Jordan"]),
        (4, "Alex", "Biscuit. He chews everything.", ["Alex", "Jordan"]),
        (8, "Jordan", "Is the dog allowed in the café?", ["Alex", "Jordan"]),
        (9, "Jordan", "Never mind, I'll ask the owner.", ["Alex", "Jordan"]),  # the same speaker: no answer
        (12, "Jordan", "Does your dog like the beach?", ["Jordan"]),
        (13, "Sam", "He loves it.", ["Jordan"]),  # Alex was not there to hear either
        *((20 + n, "Jordan", text, ["Alex", "Jordan"]) for n, text in enumerate([
            "The dog at the café barked all night.", "My neighbour's dog is called a terrier by everyone.",
            "Dogs are not allowed on the ferry.", "The dog show is on Saturday, the big dogs first."])),
    ]:
        remember_utterance(bank=seeded_bank, speaker=speaker, text=text, turn=turn, listeners=listeners)

    def ask(window=frozenset()):
        answer = call_tool("query_memory", {"query": "what is the dog called?"},
                           context=ToolContext(bank=seeded_bank, agent="Alex", current_turn=60, window_turns=window))
        return {m["turn"]: m.get("reply") for m in answer.response["memories"] if "turn" in m}

    replies = ask()
    assert replies["3"] == "Alex said: Biscuit. He chews everything."
    assert replies.get("8") is None and "12" not in replies
    # Where the window shows the answer already, it is not sent again.
    assert ask(frozenset({4})).get("3") is None


def test_recall_facts_finds_what_was_said_on_a_topic_when_no_fact_was_drawn_from_it(seeded_bank):
    """A run that drew no facts from its lines (offline, or a judgement that missed one): the line
    that stated it is handed back as said, with its turn, and a question found brings its answer."""
    from memory.forming.capture import remember_utterance

    remember_utterance(bank=seeded_bank, speaker="Jordan", text="How much did the new oven cost you in the end?", turn=1,
                       listeners=["Alex", "Jordan"])
    remember_utterance(bank=seeded_bank, speaker="Alex", text="Six hundred and forty pounds, and I sold my bike for it.",
                       turn=2, listeners=["Alex", "Jordan"])
    remember_utterance(bank=seeded_bank, speaker="Jordan", text="The cat was asleep on the stairs again.", turn=3,
                       listeners=["Alex", "Jordan"])
    ctx = ToolContext(bank=seeded_bank, agent="Jordan", current_turn=40)
    found = call_tool("recall_facts", {"topic": "what the new oven cost"}, context=ctx).response
    told = "\n".join(f"{f['content']} {f.get('reply', '')}" for f in found["facts"])
    assert "Alex said: Six hundred and forty pounds" in told  # the answer, found with its question or alone
    assert all(f.get("turn") for f in found["facts"])  # each line says when it was said
    ranked = [f["content"] for f in found["facts"]]
    cat = next((i for i, c in enumerate(ranked) if "cat was asleep" in c), len(ranked))
    assert cat > max(i for i, c in enumerate(ranked) if "oven" in c or "Six hundred" in c)  # the nearer first
    # Nothing said matches a topic nobody spoke of: still "no facts", not the nearest line.
    none = call_tool("recall_facts", {"topic": "the price of tea on the moon in 1802"}, context=ctx).response
    assert none["facts"] == [] and none["note"] == "No facts on this topic."


def test_query_character_tells_what_was_heard_from_and_about_them_that_mattered_most(seeded_bank):
    from memory.forming.capture import remember_utterance
    from memory.models import Memory

    lines = [("Jordan", "I grew up above my uncle's restaurant in Bologna."), ("Sam", "Pass the bread, would you?"),
             ("Jordan", "Nice weather."), ("Sam", "Jordan owes the landlord two months' rent."),
             ("Alex", "Shall we order?")]
    for turn, (speaker, text) in enumerate(lines, start=1):
        remember_utterance(bank=seeded_bank, speaker=speaker, text=text, turn=turn, listeners=["Alex", "Jordan", "Sam"])
    # The importance each line had for Alex: the small talk mattered least.
    for needle, importance in (("Bologna", 7.0), ("Nice weather", 1.0), ("landlord", 8.0)):
        Memory.objects.filter(agent="Alex", content__contains=needle).update(importance=importance)
    answer = call_tool("query_character", {"name": "Jordan"},
                       context=ToolContext(bank=seeded_bank, agent="Alex", current_turn=30,
                                           window_turns=frozenset({5}))).response
    heard = [h["content"] for h in answer["heard"]]
    assert heard[0] == "Jordan said: I grew up above my uncle's restaurant in Bologna."  # in the order said
    assert "Sam said: Jordan owes the landlord two months' rent." in heard  # about them, from another
    assert not any("Pass the bread" in h or "Shall we order" in h for h in heard)  # neither from nor about Jordan
