"""A long finished run written straight into the database (bulk inserts, no worker, no model):
what `manage.py bench_pages` times the pages on, and what the long-run tests read.

Each turn looks like a real one to the pages: a line a few sentences long, its usage and context
totals, the messages sent, two retrievals of five memories each, who heard it; every listener keeps
an episodic memory of it; every 25 turns someone reflects (with evidence), every 40 a stage
direction, every 100 the writer edited the line.
"""

from __future__ import annotations

import random
from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from chronicle.simulation.models import Retrieval, Simulation, Turn
from chronicle.writing.models import ChronicleEntry
from memory.api import bank_create
from memory.models import EMBEDDING_DIM, Memory

CAST = ["Alex", "Jordan", "Sam"]
PLACES = ["Bella's trattoria", "the noodle bar", "the market", "the ferry", "Alex's kitchen", "the station café"]
FEELINGS = ["worried", "hopeful", "tired", "amused", "annoyed", "curious"]
BATCH = 1000  # rows per INSERT: a 5,000-turn run is a few dozen statements


def _line(rng: random.Random, agent: str, number: int) -> str:
    place, other = rng.choice(PLACES), rng.choice([n for n in CAST if n != agent])
    return (f"Turn {number}, and I keep thinking about {place}. {other}, you said you were {rng.choice(FEELINGS)} "
            f"about it last time, and I haven't forgotten. Let's decide before the rain starts; I can't face "
            f"another evening of maybes, and honestly the budget won't stretch to both.")


def _vector(rng: random.Random) -> list[float]:
    return [rng.uniform(-1, 1) for _ in range(EMBEDDING_DIM)]


@transaction.atomic
def long_run(owner, turns: int, *, title: str = "A long run", memories: bool = True, seed: int = 7,
             parent: Simulation | None = None) -> Simulation:
    """A completed run of `turns` done turns (a branch of `parent` when given), with its bank."""
    rng = random.Random(seed)
    directions = "\n".join(f"{n}: The rain gets heavier outside." for n in range(40, turns + 1, 40))
    bank = bank_create(name=title, owner=owner) if memories else None
    simulation = Simulation.objects.create(
        owner=owner, title=title, status=Simulation.Status.COMPLETED, max_turns=max(turns, 1), provider="scripted",
        cast_snapshot=[{"name": name, "description": f"{name} is one of three friends."} for name in CAST],
        scenario_snapshot={"title": "Dinner plans", "location": "Alex's apartment", "time_of_day": "evening"},
        stage_directions=directions, bank=bank, parent=parent,
        branch_turn=(turns // 2 if parent is not None else None))
    start = timezone.now() - timedelta(seconds=5 * turns)
    rows = []
    for index in range(turns):
        agent = CAST[index % len(CAST)]
        sections = {"instructions": 420, "header": 60, "prepopulated": 380 + index % 50, "transcript": 900, "format": 30}
        rows.append(Turn(
            simulation=simulation, index=index, agent=agent, status=Turn.Status.DONE,
            utterance=_line(rng, agent, index + 1), heard_by=CAST, full_definition_tokens=2100,
            usage={"prompt_tokens": sum(sections.values()), "completion_tokens": 60, "calls": 1},
            context={"totals": sections, "calls": [{"sections": [{"kind": k, "tokens": v, "text": "…" * 40}
                                                                for k, v in sections.items()]}]},
            prompt_messages=[{"role": "system", "content": f"You are {agent}. " * 60},
                             {"role": "user", "content": "What do you say next?"}],
            started=start + timedelta(seconds=5 * index), finished=start + timedelta(seconds=5 * index + 3)))
    Turn.objects.bulk_create(rows, batch_size=BATCH)
    ids = dict(simulation.turns.values_list("index", "pk"))
    Retrieval.objects.bulk_create(
        [Retrieval(turn_id=ids[index], agent=CAST[index % 3], tool="query_memory", order=order, path="index",
                   query=f"what did {CAST[(index + 1) % 3]} say about {PLACES[index % len(PLACES)]}?", latency_ms=4.0,
                   results=[{"memory_id": None, "content": f"A memory of turn {max(index - k, 1)}.", "score": 0.8 - k / 10}
                            for k in range(5)])
         for index in range(turns) for order in range(2)], batch_size=BATCH)
    ChronicleEntry.objects.bulk_create([ChronicleEntry(turn_id=ids[index], text=f"(edited) Line {index + 1}.")
                                        for index in range(0, turns, 100)], batch_size=BATCH)
    if bank is not None:
        _memories(rng, bank, turns)
    return simulation


def _memories(rng: random.Random, bank, turns: int) -> None:
    """What each listener kept of every line, and a reflection every 25 turns on the lines before it."""
    Memory.objects.bulk_create(
        [Memory(bank=bank, agent=listener, kind=Memory.Kind.EPISODIC, turn=number, speaker=CAST[(number - 1) % 3],
                content=f"{CAST[(number - 1) % 3]} said something about {PLACES[number % len(PLACES)]} at turn {number}.",
                importance=rng.uniform(2, 8), source=Memory.Source.EARNED, embedding=_vector(rng),
                participants=CAST)
         for number in range(1, turns + 1) for listener in CAST], batch_size=BATCH)
    reflections = Memory.objects.bulk_create(
        [Memory(bank=bank, agent=CAST[number % 3], kind=Memory.Kind.REFLECTION, turn=number, importance=7,
                content=f"By turn {number} I see the others care more about company than about the food.",
                source=Memory.Source.REFLECTION, embedding=_vector(rng))
         for number in range(25, turns + 1, 25)], batch_size=BATCH)
    lines = dict(Memory.objects.filter(bank=bank, kind=Memory.Kind.EPISODIC, agent=CAST[0]).values_list("turn", "pk"))
    Evidence = Memory.evidence.through
    Evidence.objects.bulk_create([Evidence(from_memory_id=r.pk, to_memory_id=lines[r.turn - k])
                                  for r in reflections for k in range(3) if r.turn - k in lines], batch_size=BATCH)
