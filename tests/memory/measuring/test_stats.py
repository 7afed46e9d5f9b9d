"""Seed 002's MemoryStats of one agent: counts by kind and band, the balance (normalised entropy), the
variety of its memories (1 − mean pairwise cosine), themes (the model's or keywords), its latest and
most important memories; over the API's /stats/<agent> (the analytics page: tests/chronicle/writing)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from django.test import Client

from api.models import ApiToken
from memory.services import bank_create
from memory.measuring.stats import memory_stats
from memory.models import Memory
from memory.services import memory_create

pytestmark = pytest.mark.django_db

LINES = [("Jordan said: The lighthouse keeper has not been seen since the storm.", 8),
         ("Jordan said: Someone lit the lighthouse lamp last night.", 7),
         ("Sam said: The storm broke three boats in the harbour.", 6),
         ("Sam said: The harbour master blames the lighthouse.", 9),
         ("Alex ate toast for breakfast.", 1),
         ("Alex tied a shoelace.", 2),
         ("Jordan said: Fishing boats left the harbour at dawn.", 4)]


@pytest.fixture
def alex_bank(user):
    bank = bank_create(name="Harbour", owner=user)
    for turn, (text, importance) in enumerate(LINES, 1):
        memory_create(bank=bank, content=text, agent="Alex", kind="episodic", importance=importance, turn=turn,
                      source="earned", speaker=text.split(" said:")[0] if " said:" in text else "")
    memory_create(bank=bank, content="Alex grew up by the sea.", agent="Alex", kind="character", importance=5)
    memory_create(bank=bank, content="Someone else's memory.", agent="Sam", kind="episodic", importance=5, turn=1)
    Memory.objects.filter(content="Alex tied a shoelace.").update(status="archived")  # not counted
    return bank


def test_the_stats_say_what_the_memories_are(alex_bank):
    stats = memory_stats(alex_bank, "Alex")
    active = list(Memory.objects.in_bank(alex_bank).for_agent("Alex").active())
    assert stats.total == stats.sampled == len(active) == 7
    assert stats.kinds == {"episodic": 6, "character": 1}
    assert stats.distribution == {"routine": 1, "moderate": 1, "notable": 2, "important": 2, "life-changing": 1}
    assert stats.high_importance_count == 3 and stats.average_importance == pytest.approx(40 / 7, abs=1e-3)
    shares = [n / 7 for n in (1, 1, 2, 2, 1)]
    assert stats.importance_balance == pytest.approx(-sum(p * math.log2(p) for p in shares) / math.log2(5), abs=1e-4)
    vectors = np.array([np.asarray(m.embedding) for m in active])
    units = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    pairs = [float(units[i] @ units[j]) for i in range(7) for j in range(i + 1, 7)]
    assert stats.diversity == pytest.approx(1 - sum(pairs) / len(pairs), abs=1e-3)
    assert stats.recent[0].content == LINES[-1][0] and stats.high_importance[0].importance == 9
    # Offline: the words the important memories share, not who said them nor any memory's words.
    assert stats.themes_by == "keywords" and stats.themes[:3] == ["lighthouse", "harbour", "storm"]
    assert "jordan" not in stats.themes and "said" not in stats.themes


def test_one_memory_has_no_variety_and_an_even_spread_is_balanced(user):
    bank = bank_create(name="Few", owner=user)
    memory_create(bank=bank, content="Only one.", agent="Ann", kind="episodic", importance=5, turn=1)
    one = memory_stats(bank, "Ann")
    assert one.diversity is None and one.importance_balance == 0.0
    for importance in (1, 3, 6, 8, 10):
        memory_create(bank=bank, content=f"Even {importance}.", agent="Bo", kind="episodic", importance=importance)
    assert memory_stats(bank, "Bo").importance_balance == pytest.approx(1.0)


def test_the_model_names_the_themes_when_there_is_one(alex_bank):
    asked = []

    def model(prompt):
        asked.append(prompt)
        return "1. The missing lighthouse keeper\n2. Storm damage\n3. Harbour politics"

    stats = memory_stats(alex_bank, "Alex", ask=model)
    assert stats.themes == ["The missing lighthouse keeper", "Storm damage", "Harbour politics"]
    assert stats.themes_by == "model" and "identify 5 main themes" in asked[0]
    assert "toast" not in asked[0]  # seed 002: sampled from the memories of importance 6 or more


def test_stats_over_the_api(alex_bank, user):
    raw = ApiToken.issue(user=user, name="tests")[1]
    answer = Client().get(f"/api/banks/{alex_bank.pk}/stats/Alex", HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert answer.status_code == 200
    body = answer.json()
    assert body["total"] == 7 and body["distribution"]["life-changing"] == 1 and body["themes_by"] == "keywords"
    assert body["high_importance"][0]["importance"] == 9 and 0 < body["diversity"] < 1
    missing = Client().get(f"/api/banks/{alex_bank.pk}/stats/Zed", HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert missing.status_code == 404 and "Alex" in missing.json()["detail"]



def test_reflection_frequency_per_story_day_and_per_hundred_turns(user):
    """Seed 003's reflection frequency: reflections over the story days (and turns) the agent's memories span."""
    from datetime import datetime, timedelta, timezone

    bank = bank_create(name="Three days", owner=user)
    start = datetime(1890, 5, 1, 8, 0, tzinfo=timezone.utc)
    for turn in range(0, 300, 10):  # 30 lines over three story days, one every 2.4 hours
        memory_create(bank=bank, content=f"Line {turn}.", agent="Ann", kind="episodic", importance=5, turn=turn,
                      story_time=start + timedelta(hours=turn / 10 * 2.4))
    for turn in (50, 150, 250, 280, 290, 299):
        memory_create(bank=bank, content=f"Insight at {turn}.", agent="Ann", kind="reflection", importance=7, turn=turn,
                      story_time=start + timedelta(hours=turn / 10 * 2.4))
    memory_create(bank=bank, content="Someone else's insight.", agent="Bo", kind="reflection", importance=7, turn=3)
    stats = memory_stats(bank, "Ann")
    days = (299 / 10 * 2.4) / 24  # ~2.99 days between the first memory and the last
    assert stats.reflections == 6
    assert stats.reflections_per_day == pytest.approx(6 / days, abs=1e-3)
    assert stats.reflections_per_100_turns == pytest.approx(2.0)
    # Without story time there is no per-day figure; a span under a day or 100 turns counts as one.
    bo = memory_stats(bank, "Bo")
    assert bo.reflections == 1 and bo.reflections_per_day is None and bo.reflections_per_100_turns == 1.0
