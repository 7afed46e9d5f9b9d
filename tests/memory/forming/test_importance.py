"""Importance (seeds 000, 002) and capture filters (seed 003), with the real model and database."""

from __future__ import annotations

import pytest

from memory.forming.importance import CaptureFilters, Nearest, emotional_impact, llm_importance, parse_llm_score
from memory.models import Memory
from memory.forming.capture import remember_utterance


def heard(bank, text, turn, *, speaker="Jordan", listeners=("Alex",), **options):
    return remember_utterance(bank=bank, speaker=speaker, text=text, turn=turn, listeners=list(listeners), **options)


@pytest.mark.django_db
def test_heuristic_follows_goals_emotion_and_novelty(seeded_bank):
    (goal,) = heard(seeded_bank, "Let's agree on the dinner plan now so we are done before eight.", 1, scorer="heuristic")
    (small,) = heard(seeded_bank, "The carpet in the hallway is beige.", 2, scorer="heuristic")
    (upset,) = heard(seeded_bank, "I'm terrified, you lied to me and betrayed everyone!", 3, scorer="heuristic")
    parts = {m.pk: m.metadata["importance"] for m in (goal, small, upset)}
    print({m.content: (m.importance, parts[m.pk]) for m in (goal, small, upset)})
    # A line about Alex's goal matters more to Alex than small talk, through its goal relevance.
    assert parts[goal.pk]["goal_relevance"] > parts[small.pk]["goal_relevance"] + 0.3
    assert goal.importance > small.importance
    # An emotional line scores on the lexicon; small talk does not.
    assert parts[upset.pk]["emotional_impact"] >= 0.9 and parts[small.pk]["emotional_impact"] == 0
    assert upset.importance > small.importance
    # The stored score is the formula over the stored components.
    for memory in (goal, small, upset):
        p = parts[memory.pk]
        expected = 10 * (0.4 * p["goal_relevance"] + 0.3 * p["emotional_impact"] + 0.3 * p["novelty"])
        assert memory.importance == pytest.approx(expected, abs=0.01) and p["scorer"] == "heuristic"
    # Hearing nearly the same thing again is less novel.
    (again,) = heard(seeded_bank, "Let's agree on the dinner plan now, so we're done before eight.", 4, scorer="heuristic")
    assert again.metadata["importance"]["novelty"] < parts[goal.pk]["novelty"] - 0.5
    assert len({m.importance for m in (goal, small, upset, again)}) == 4


def test_emotion_lexicon_matches_word_starts_only():
    assert emotional_impact("She was terrified.") == 1.0
    assert emotional_impact("The plan is fine") == 0  # "plan" is not "pain"; "fine" is nothing
    assert emotional_impact("Bless you") == 0  # "less" is no stem; only word starts match


@pytest.mark.parametrize("answer, score, scorer", [
    ("7", 7.0, "llm"), ("6.5/10", 6.5, "llm"), ("Score: 8 because they fought", 8.0, "llm-parsed"),
    ("42", 10.0, "llm-parsed"), ("I'd call it quite important.", None, "heuristic-fallback"), ("", None, "heuristic-fallback"),
])
def test_llm_answers_parse_or_fall_back_and_keep_the_raw_answer(answer, score, scorer):
    near = Nearest(goals=0.5, episodic=0.2)
    result = llm_importance(name="Alex", text="Jordan said: we are getting married!", near=near, ask=lambda prompt: answer)
    assert result.scorer == scorer and result.raw == answer
    if score is None:  # the heuristic's score, components included
        assert result.score == pytest.approx(10 * (0.4 * result.goal_relevance + 0.3 * result.emotional_impact
                                                   + 0.3 * result.novelty), abs=0.01)
    else:
        assert result.score == score


def test_a_failed_llm_call_falls_back_to_the_heuristic():
    def broken(prompt):
        raise TimeoutError("the server took too long")

    result = llm_importance(name="Alex", text="Jordan said: hi", near=Nearest(), ask=broken)
    assert result.scorer == "heuristic-fallback" and "took too long" in result.raw


def test_parse_llm_score_clamps():
    assert parse_llm_score("-3") == 0 and parse_llm_score("about 11.5") == 10 and parse_llm_score("none") is None


@pytest.mark.django_db
def test_llm_scorer_stores_the_score_and_the_raw_answer(seeded_bank):
    prompts = []

    def ask(prompt):
        prompts.append(prompt)
        return "Probably a 9 — it changes everything."

    (memory,) = heard(seeded_bank, "I'm leaving the city for good tomorrow.", 1, scorer="llm", ask=ask)
    memory.refresh_from_db()
    assert memory.importance == 9.0
    assert memory.metadata["importance"]["scorer"] == "llm-parsed"
    assert memory.metadata["importance"]["raw"] == "Probably a 9 — it changes everything."
    # Seed 002's prompt, with Alex's own sheet (its goals memory) and the line.
    assert "Rate the importance of this memory for Alex" in prompts[0] and "dinner plan before eight" in prompts[0]
    assert "I'm leaving the city" in prompts[0]


@pytest.mark.django_db
def test_a_near_duplicate_is_not_kept_and_says_of_what(seeded_bank):
    filters = CaptureFilters(duplicate_threshold=0.97)
    (first, _) = heard(seeded_bank, "Dinner at the harbour at seven?", 1, listeners=["Alex", "Jordan"], filters=filters)
    captured = heard(seeded_bank, "Dinner at the harbour at seven?", 2, listeners=["Alex", "Jordan"], filters=filters)
    assert list(captured) == [] and {s.agent for s in captured.skipped} == {"Alex", "Jordan"}
    alex = next(s for s in captured.skipped if s.agent == "Alex")
    assert alex.reason == "duplicate" and alex.duplicate_of == first.pk and alex.similarity >= 0.97
    assert f"duplicate of #{first.pk}, 1.00" in alex.describe()
    assert Memory.objects.in_bank(seeded_bank).filter(kind="episodic", turn=2).count() == 0
    # A different line is kept.
    (other,) = heard(seeded_bank, "Or pizza at Bella's?", 3, filters=filters)
    assert other.turn == 3


@pytest.mark.django_db
def test_the_importance_floor_drops_what_matters_little(seeded_bank):
    filters = CaptureFilters(importance_floor=5.0)
    captured = heard(seeded_bank, "The carpet in the hallway is beige.", 1, filters=filters, scorer="heuristic")
    assert list(captured) == [] and captured.skipped[0].reason == "importance"
    assert captured.skipped[0].importance < 5.0 and "below the floor" in captured.skipped[0].describe()
    kept = heard(seeded_bank, "I'm terrified: we must agree on the dinner plan before eight or we lose the table!", 2,
                 filters=filters, scorer="heuristic")
    assert len(kept) == 1 and kept[0].importance >= 5.0


@pytest.mark.django_db
def test_only_what_concerns_me_but_the_speaker_keeps_its_own_line(seeded_bank):
    filters = CaptureFilters(only_concerning=True)
    captured = heard(seeded_bank, "Quarterly sediment readings from borehole 14 came back at 3.2 ppm.", 1,
                     speaker="Jordan", listeners=["Alex", "Jordan"], filters=filters)
    print([(s.agent, s.similarity) for s in captured.skipped])
    assert [m.agent for m in captured] == ["Jordan"]
    assert captured.skipped[0].agent == "Alex" and captured.skipped[0].reason == "unconcerned"
    (kept,) = heard(seeded_bank, "We should settle the dinner plan before eight.", 2, filters=filters)
    assert kept.agent == "Alex"


@pytest.mark.django_db
def test_without_a_scorer_or_filters_capture_is_unchanged(seeded_bank):
    (memory,) = heard(seeded_bank, "Dinner at the harbour?", 1)
    (again,) = heard(seeded_bank, "Dinner at the harbour?", 2)
    assert memory.importance == again.importance == 5.0 and "importance" not in memory.metadata


def test_heuristic_rescales_goal_similarity_and_novelty_as_documented():
    from memory.forming.importance import heuristic_importance

    # docs/memory.md: goal cosine 0 → 0, 0.45 → 1; novelty 1 at a best match of 0.35 or less, 0 at 0.95 or more.
    middle = heuristic_importance(text="The table is by the window.", near=Nearest(goals=0.225, episodic=0.65))
    assert (middle.goal_relevance, middle.novelty, middle.emotional_impact) == (0.5, 0.5, 0.0)
    assert middle.score == pytest.approx(10 * (0.4 * 0.5 + 0.3 * 0.5), abs=0.01)
    stale = heuristic_importance(text="The table is by the window.", near=Nearest(goals=0.6, episodic=0.97))
    assert (stale.goal_relevance, stale.novelty) == (1.0, 0.0)
    fresh = heuristic_importance(text="The table is by the window.", near=Nearest(goals=-0.1, episodic=0.2))
    assert (fresh.goal_relevance, fresh.novelty) == (0.0, 1.0)


@pytest.mark.django_db  # the test's transaction is never committed: no task is queued
def test_a_simulation_line_is_kept_at_once_and_its_reply_key_follows(seeded_bank):
    """defer_keys (a simulation's turn): the line is stored without waiting for its in-reply-to key;
    the key the worker adds afterwards is the one remember_utterance would have made."""
    from memory.models import MemoryKey
    from memory.forming.capture import capture_commit, capture_prepare
    from memory.forming.capture import memory_keys_add

    heard(seeded_bank, "Shall we try the Thai place tonight?", 1, speaker="Alex", listeners=("Jordan",))
    plan = capture_prepare(bank=seeded_bank, speaker="Sam", text="Yes, last Sunday it was great!", turn=2,
                           listeners=["Jordan"], defer_keys=True)
    assert set(plan.vectors) == {plan.content}  # only the line was embedded
    (memory,) = capture_commit(plan)
    assert memory.pk and not MemoryKey.objects.filter(memory=memory).exists()
    assert memory_keys_add(memory_ids=[memory.pk]) == 1
    key = MemoryKey.objects.get(memory=memory)
    assert "Thai place" in key.query and "last Sunday" in key.query
