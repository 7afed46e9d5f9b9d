"""Seed 004's decay and reinforcement in the `decayed` preset: values worked out by hand from the
formula documented in docs/memory.md ("Decay and reinforcement"), and the SQL ranking against the
Python formula."""

import math

import numpy as np
import pytest

from memory.models import Memory
from memory.recalling.filters import MemoryFilter
from memory.recalling.search import recall
from memory.recalling.scoring import decay_component, decayed_importance
from memory.services import accesses_record, memory_create, memory_reinforce


def _memory(bank, content, **fields):
    fields = {"agent": "Alex", "kind": "episodic", "turn": 0, "decay_rate": 0.05} | fields
    return memory_create(bank=bank, content=content, **fields)


def _decayed(bank, memory, turn, **kwargs):
    """memory's result in a `decayed` recall at `turn` (the SQL side)."""
    results = recall(bank, memory.content, agent=memory.agent, k=50, scoring="decayed", current_turn=turn, **kwargs)
    return next(r for r in results if r.memory.pk == memory.pk)


def test_an_aged_memory_decays_at_its_own_rate(bank):
    slow = _memory(bank, "Jordan said the ferry leaves at noon.", turn=2, decay_rate=0.05, importance=8.0)
    fast = _memory(bank, "Sam mentioned the bakery closes early.", turn=2, decay_rate=0.2)
    # age 20 turns: exp(−0.05·20) = e^−1 = 0.3679; exp(−0.2·20) = e^−4 = 0.0183
    result = _decayed(bank, slow, 22)
    assert result.components["recency"] == pytest.approx(math.exp(-1.0), rel=1e-9)
    assert result.components["importance"] == pytest.approx(0.8 * math.exp(-1.0), rel=1e-9)
    assert result.score == pytest.approx(0.6 * result.components["similarity"] + 0.1 * math.exp(-1.0)
                                         + 0.3 * 0.8 * math.exp(-1.0), rel=1e-9)
    assert _decayed(bank, fast, 22).components["recency"] == pytest.approx(math.exp(-4.0), rel=1e-9)
    assert decay_component(slow, 22) == pytest.approx(math.exp(-1.0), rel=1e-12)
    # Not yet aged: nothing lost; asked about an earlier turn, no negative age either.
    assert _decayed(bank, slow, 2).components["recency"] == pytest.approx(1.0)
    assert _decayed(bank, slow, 0).components["recency"] == pytest.approx(1.0)


def test_emotional_memories_decay_slower_than_neutral_ones_of_the_same_age(bank):
    neutral = _memory(bank, "The table by the window was free.", turn=0)
    felt = _memory(bank, "Jordan laughed at my joke and I felt welcome.", turn=0, emotional_valence=0.8)
    hurt = _memory(bank, "Sam snapped at me about the bill.", turn=0, emotional_valence=-0.8)
    emotional = _memory(bank, "The harbour makes me anxious.", turn=0, kind="emotional")
    at = {m.pk: _decayed(bank, m, 20).components["recency"] for m in (neutral, felt, hurt, emotional)}
    assert at[neutral.pk] == pytest.approx(math.exp(-0.05 * 20), rel=1e-9)             # 0.368
    # |valence| 0.8: rate 0.05 · (1 − 0.5·0.8) = 0.03, whichever the sign
    assert at[felt.pk] == at[hurt.pk] == pytest.approx(math.exp(-0.03 * 20), rel=1e-9)  # 0.549
    assert at[emotional.pk] == pytest.approx(math.exp(-0.025 * 20), rel=1e-9)          # kind emotional: 0.607
    assert at[neutral.pk] < at[felt.pk] < at[emotional.pk]


def test_goal_critical_memories_keep_their_floor_and_gifted_ones_age_from_turn_0(seeded_bank):
    plain = _memory(seeded_bank, "Jordan ordered a lemonade.", turn=0)
    critical = _memory(seeded_bank, "Sam agreed to eat before eight.", turn=0,
                       related_goals=["agree on a dinner plan before eight"])
    # age 200: exp(−0.05·200) = e^−10 = 0.0000454 — the goal-critical one stops at 0.5
    assert _decayed(seeded_bank, plain, 200).components["recency"] == pytest.approx(math.exp(-10), rel=1e-9)
    assert _decayed(seeded_bank, critical, 200).components["recency"] == pytest.approx(0.5)
    # Young, it decays like any other (the floor is a floor, not a cap).
    assert _decayed(seeded_bank, critical, 4).components["recency"] == pytest.approx(math.exp(-0.2), rel=1e-9)
    # Gifted (no turn), at the sheet's rate (0.005 × (1.5 − importance/10)): aged from turn 0; the
    # sheet's goals keep the floor.
    alex = Memory.objects.in_bank(seeded_bank).filter(agent="Alex", turn__isnull=True)
    goals, identity = alex.get(category="goals"), alex.get(category="identity")
    rate = 0.005 * (1.5 - identity.importance / 10)
    assert identity.decay_rate == pytest.approx(rate)
    result = _decayed(seeded_bank, identity, 50)
    assert result.components["recency"] == pytest.approx(math.exp(-rate * 50), rel=1e-6)
    assert result.components["importance"] == pytest.approx(identity.importance / 10 * math.exp(-rate * 50), rel=1e-6)
    assert _decayed(seeded_bank, identity, 500).components["recency"] == pytest.approx(math.exp(-rate * 500), rel=1e-6)
    assert _decayed(seeded_bank, goals, 5000).components["recency"] == pytest.approx(0.5)


def test_reinforce_memory_and_accesses_raise_the_component_by_the_documented_amount(bank):
    memory = _memory(bank, "Jordan promised to book the table.", turn=0)
    other = _memory(bank, "Sam promised to bring the wine.", turn=0)
    assert _decayed(bank, memory, 20).components["recency"] == pytest.approx(math.exp(-1.0), rel=1e-9)  # 0.368

    memory = memory_reinforce(memory=memory, current_turn=20)
    assert (memory.decay_rate, memory.access_count, memory.last_accessed_turn) == (pytest.approx(0.04), 1, 20)
    # Right after: rate 0.04, one access (ln 1 = 0), recalled within a turn ×1.1 → 1.1·e^−0.8 = 0.494
    assert _decayed(bank, memory, 20).components["recency"] == pytest.approx(1.1 * math.exp(-0.8), rel=1e-9)
    assert _decayed(bank, memory, 21).components["recency"] == pytest.approx(1.1 * math.exp(-0.84), rel=1e-9)
    # Ten turns on, only the slower rate is left: e^−1.2 = 0.301 against e^−1.5 = 0.223 unreinforced.
    assert _decayed(bank, memory, 30).components["recency"] == pytest.approx(math.exp(-1.2), rel=1e-9)
    assert _decayed(bank, other, 30).components["recency"] == pytest.approx(math.exp(-1.5), rel=1e-9)

    # Recalled three times at turn 30 (accesses_record, the caller of recall): ×(1 + 0.1·ln 3), ×1.1.
    accesses_record(memory_ids=[other.pk] * 3, turn=30)
    assert _decayed(bank, other, 30).components["recency"] == pytest.approx(
        math.exp(-1.5) * (1 + 0.1 * math.log(3)) * 1.1, rel=1e-9)                        # 0.274
    assert _decayed(bank, other, 40).components["recency"] == pytest.approx(
        math.exp(-2.0) * (1 + 0.1 * math.log(3)), rel=1e-9)


def test_boosts_tell_fresh_memories_apart_and_importance_stays_at_most_one(bank):
    once = _memory(bank, "Jordan waved from the door.", turn=10, importance=10.0)
    often = _memory(bank, "Jordan waved from the window.", turn=10, importance=10.0)
    accesses_record(memory_ids=[once.pk], turn=10)
    accesses_record(memory_ids=[often.pk] * 20, turn=10)
    # Age 0: 1.1 (recalled this turn) against 1.1·(1 + 0.1·ln 20) = 1.430; importance 10 tops out at 1.
    assert _decayed(bank, once, 10).components["recency"] == pytest.approx(1.1, rel=1e-9)
    result = _decayed(bank, often, 10)
    assert result.components["recency"] == pytest.approx(1.1 * (1 + 0.1 * math.log(20)), rel=1e-9)
    assert result.components["importance"] == pytest.approx(1.0)


@pytest.mark.parametrize("fusion", [False, True])
def test_the_sql_ranking_and_the_python_formula_agree(bank, fusion):
    rng = np.random.default_rng(4)
    kinds = ["episodic", "emotional", "observation", "reflection"]
    memories = []
    for i in range(24):
        memories.append(_memory(
            bank, f"Line {i}: dinner at the harbour, take {i}.", kind=kinds[i % 4],
            turn=None if i % 7 == 0 else int(rng.integers(0, 40)), decay_rate=float(rng.uniform(0, 0.3)),
            emotional_valence=float(rng.uniform(-1, 1)) if i % 3 else 0.0, importance=float(rng.uniform(0, 10)),
            related_goals=["eat before nine"] if i % 5 == 0 else [], category="goals" if i % 11 == 1 else "",
        ))
    for i, memory in enumerate(memories):
        if i % 2:
            accesses_record(memory_ids=[memory.pk] * (i % 4 + 1), turn=int(rng.integers(0, 45)))
    for turn in (0, 12, 45, 300):
        results = recall(bank, "dinner at the harbour", agent="Alex", filter=MemoryFilter(), k=len(memories),
                         scoring="decayed", current_turn=turn, fusion=fusion)
        assert len(results) == len(memories)
        for r in results:
            expected = decay_component(r.memory, turn)
            assert r.components["recency"] == pytest.approx(expected, rel=1e-9, abs=1e-300)
            assert r.components["importance"] == pytest.approx(decayed_importance(r.memory, turn), rel=1e-9, abs=1e-300)
        if turn in (12, 45):  # the rates made a difference
            assert len({round(r.components["recency"], 6) for r in results}) > 5


def test_hybrid_recency_ignores_per_memory_rates(bank):
    fast = _memory(bank, "Jordan ordered dessert.", turn=0, decay_rate=0.3, emotional_valence=0.9)
    result = recall(bank, fast.content, agent="Alex", k=1, scoring="hybrid", current_turn=10)[0]
    assert result.components["recency"] == pytest.approx(math.exp(-1.0), rel=1e-9)  # exp(−0.1·10), as before
    assert result.components["importance"] == pytest.approx(0.5)


def test_with_a_clock_memories_age_by_the_time_that_passed(bank):
    """A scenario clock (chronicle: minutes per turn, "Three hours later"): skips[i] is the turns'
    worth of time skipped up to turn i; a skip between a memory and now ages it that much more."""
    memory = _memory(bank, "Jordan said the ferry leaves at noon.", turn=2, decay_rate=0.01)
    # 2 minutes a turn, three hours skipped before turn 5: 90 turns' worth from turn 5 on.
    skips = [0, 0, 0, 0, 0, 90, 90, 90, 90, 90, 90]
    # at turn 10: 8 turns + 90 → exp(−0.01·98) = 0.375; without the clock exp(−0.08) = 0.923
    assert _decayed(bank, memory, 10, clock=skips).components["recency"] == pytest.approx(math.exp(-0.98), rel=1e-9)
    assert _decayed(bank, memory, 10).components["recency"] == pytest.approx(math.exp(-0.08), rel=1e-9)
    assert decay_component(memory, 10, skips) == pytest.approx(math.exp(-0.98), rel=1e-12)
    # Before the skip nothing extra; hybrid's recency counts the same age: exp(−0.1·98).
    assert _decayed(bank, memory, 4, clock=skips).components["recency"] == pytest.approx(math.exp(-0.02), rel=1e-9)
    hybrid = recall(bank, memory.content, agent="Alex", k=5, scoring="hybrid", current_turn=10, clock=skips)
    assert hybrid[0].components["recency"] == pytest.approx(math.exp(-9.8), rel=1e-9)
    # A turn past the clock's end reads its last value (a run made longer after its directions).
    assert _decayed(bank, memory, 12, clock=skips).components["recency"] == pytest.approx(math.exp(-1.0), rel=1e-9)


def test_a_memory_decays_at_its_kinds_pace_slower_when_it_matters_and_a_summary_slower_still(bank):
    """Seeds 000/001: the rate varies by importance (and by kind); seed 004: consolidated, 20 % slower."""
    from memory.living.consolidation import memory_consolidate
    from memory.services import memory_create

    def made(kind, importance):
        return memory_create(bank=bank, agent="Alex", kind=kind, importance=importance, turn=1, source="earned",
                             content=f"A {kind} memory of importance {importance}.")

    heard, big_news, trivia = made("episodic", 5.0), made("episodic", 9.0), made("episodic", 1.0)
    fact, seen = made("semantic", 5.0), made("observation", 5.0)
    assert heard.decay_rate == pytest.approx(0.01)
    assert big_news.decay_rate < heard.decay_rate < trivia.decay_rate  # what matters fades slower
    assert fact.decay_rate < heard.decay_rate < seen.decay_rate  # what one knows outlasts what one saw
    at_turn_60 = {m.content: _decayed(bank, m, 60).components["recency"] for m in (big_news, trivia)}
    assert at_turn_60[big_news.content] > at_turn_60[trivia.content]
    summary = memory_consolidate(bank=bank, originals=[heard, trivia], content="Alex heard things.", agent="Alex",
                                 kind="episodic", turn=1, importance=5.0)
    assert summary.decay_rate == pytest.approx((heard.decay_rate + trivia.decay_rate) / 2 * 0.8)
