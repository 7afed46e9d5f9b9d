"""A model's real answers to the judgement after a line (tests/fixtures/judgement), read as a run reads them."""

from __future__ import annotations

from pathlib import Path

from memory.living.after_turn import MAX_FACTS, parse

ANSWERS = Path(__file__).resolve().parents[2] / "fixtures" / "judgement"
CAST = ["Alex", "Jordan", "Sam"]


def answer(n: int) -> str:
    return (ANSWERS / f"line-{n}.answer.json").read_text()


def test_a_pitch_heard_by_all_scores_everyone_and_teaches_the_listeners_not_the_speaker():
    judged = parse(answer(0), names=CAST, speaker="Jordan")
    assert judged.error == "" and set(judged.importance) == set(CAST)
    assert "Jordan" not in judged.moves and "Jordan" not in judged.facts  # nothing learned from one's own line
    assert all(len(facts) <= MAX_FACTS for facts in judged.facts.values())
    assert any("mushroom risotto" in fact for fact in judged.facts["Sam"])


def test_a_whisper_is_judged_for_its_addressee_only():
    judged = parse(answer(1), names=["Alex", "Sam"], speaker="Alex")
    assert set(judged.moves) == {"Sam"} and judged.moves["Sam"].trust > 0  # confided in
    assert any("deposit" in fact for fact in judged.facts["Sam"])


def test_an_accusation_costs_the_accused_trust_and_warmth_with_the_words_that_did_it():
    judged = parse(answer(2), names=CAST, speaker="Sam")
    jordan = judged.moves["Jordan"]
    assert jordan.trust < 0 and jordan.affinity < 0 and "lied" in jordan.why
    assert judged.importance["Jordan"] >= judged.importance["Alex"]  # it matters most to the accused


def test_a_reflection_asked_with_the_judgement_comes_back_as_insights_citing_the_statements_given():
    judged = parse((ANSWERS / "reflect-0.answer.json").read_text(), names=CAST, speaker="Alex",
                   statements={"Sam": 8})
    assert judged.error == "" and set(judged.importance) == set(CAST)
    insights = judged.insights["Sam"]
    assert 1 <= len(insights) <= 3 and all(cited and set(cited) <= set(range(1, 9)) for _text, cited in insights)
    assert judged.moves["Sam"].trust > 0 and judged.moves["Jordan"].affinity < 0


def test_a_model_reads_each_lines_stance_on_the_rumour_as_the_scene_meant_it():
    """stance-NN: the judgement of lines of the recorded examples/rumour.json run, asked with the
    claim Oren was planted with: his retelling asserts it, Mira's question to Tess asks it, Tess's
    answer and Oren's climb-down deny it."""
    claim = "The harbour master is selling the inn to a hotel chain."
    stances = {}
    for path in sorted(ANSWERS.glob("stance-*.answer.json")):
        judged = parse(path.read_text(), names=["Mira", "Oren", "Tess"], speaker="", claims=[claim])
        assert judged.error == "" and judged.importance
        stances[int(path.name.split("-")[1].split(".")[0])] = judged.stances[claim]
    assert (stances[2], stances[8], stances[10], stances[12]) == ("asserts", "questions", "denies", "denies")
    assert "asserts" not in (stances[8], stances[9])  # Tess is asked, and told to deny it: never told it


def test_the_judgement_reads_what_came_just_before_the_line_a_long_line_not_crowding_out_the_direction():
    from memory.living.after_turn import prompt_for

    said = "Alex said: " + "We agreed on Bella's, and I booked it for eight. " * 30
    prompt = prompt_for(speaker="Jordan", content="Jordan said: Is that the Thai place texting you?", turn=9,
                        profiles={"Alex": "Alex is a project manager."},
                        before=[said, "*Alex's phone buzzes: the Thai place texts that tables are going fast*"])
    lines = prompt.splitlines()
    opening = lines.index("Just before it (context only):")
    context, direction = lines[opening + 1:opening + 3]
    assert context.startswith("- Alex said: … We agreed on Bella's")
    assert direction == "- *Alex's phone buzzes: the Thai place texts that tables are going fast*"  # a line of its own
    assert len(context) < len(said)  # the line itself cut at a sentence
    # A reply answers the end of what came before it: a long line keeps its speaker and its last sentences.
    asked = ("Tomasz said: *laughs once* You sold us to the Arctic with my out-of-tune F-sharp, and now you want my "
             "confession, fine, no joke. " + "*looks at the table* " * 12 + "Rotterdam Philharmonic, a trial in "
             "April; I said yes to it in January. So, Hannah, will you tell them your news?")
    prompt = prompt_for(speaker="Hannah", content="Hannah said: Yes. I am pregnant.", turn=10,
                        profiles={"Tomasz": "Tomasz is a violinist."}, before=[asked])
    lines = prompt.splitlines()
    context = lines[lines.index("Just before it (context only):") + 1]
    assert context.startswith("- Tomasz said: … ")
    assert context.endswith("So, Hannah, will you tell them your news?") and "trial in April" in context
    assert len(context) < len(asked)
    assert "Just before it" not in prompt_for(speaker="Alex", content="Alex said: Hello.", turn=1, profiles={"Jordan": ""})


def test_the_judgement_is_told_who_holds_each_claim_and_what_each_listener_keeps_to_itself():
    """An accusation that touches a listener's secret weighs more to that listener: the judge can only
    see it when told the secret; and a claim's stance is read knowing whose claim it is."""
    from memory.living.after_turn import prompt_for

    prompt = prompt_for(speaker="Ruairi", content="Ruairi said: The captain signed that inspection without reading it.",
                        turn=7, profiles={"Maeve": "The ferry's captain.", "Tom": "A passenger."},
                        claims=["The captain reads every inspection twice.", "The engine is fine."],
                        holders={"The captain reads every inspection twice.": ["Maeve"], "The engine is fine.": ["Tom"]},
                        keeping={"Maeve": ["She signed the inspection without reading it."], "Tom": ["He hates boats."],
                                 "Ruairi": ["The speaker's own, not asked here."]})
    assert "1. The captain reads every inspection twice. (held by Maeve)" in prompt
    # What the line does not touch is not sent: this call comes after every line.
    assert "The engine is fine" not in prompt and "hates boats" not in prompt
    assert "What the listeners keep to themselves" in prompt
    assert "- Maeve: She signed the inspection without reading it." in prompt
    assert "Tom:" not in prompt.split("What the listeners keep")[1].split("For each listener")[0]
    assert "The speaker's own" not in prompt  # the speaker's secrets are asked about apart ("revealed")
    assert "said it: give" not in prompt  # the speaker is no listener here: nothing asked of it
    assert '{"listeners": {"Maeve": {' in prompt


def test_a_claim_keeps_its_number_from_one_judgement_to_the_next_whoever_hears_the_line():
    """Numbered by the run (the writer's line that planted it), not by who hears the line: the second
    claim is 2 whether the first is asked about or not, and the answer is read by that number."""
    from memory.living.after_turn import parse, prompt_for

    numbers = {"The engine is fine.": 1, "The captain signed it unread.": 2}
    said = "Ruairi said: The engine, the captain: I've heard things."
    both = prompt_for(speaker="Ruairi", content=said, turn=3, profiles={"Maeve": ""},
                      claims=list(numbers), numbers=numbers)
    one = prompt_for(speaker="Ruairi", content=said, turn=4, profiles={"Tom": ""},
                     claims=["The captain signed it unread."], numbers=numbers)
    assert "1. The engine is fine.\n2. The captain signed it unread." in both
    assert "\n2. The captain signed it unread." in one and "1. The captain" not in one
    assert '"stances": {"2": "none"}' in one
    judged = parse('{"listeners": {"Tom": {"importance": 3}}, "stances": {"2": "denies", "1": "asserts"}}',
                   names=["Tom"], speaker="Ruairi", claims=["The captain signed it unread."], numbers=numbers)
    assert judged.stances == {"The captain signed it unread.": "denies"}  # 1 was not asked about here
