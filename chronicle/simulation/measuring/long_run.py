"""A long finished run written straight into the database (bulk inserts, no worker, no model):
what `manage.py bench_pages` times the pages on, and what the long-run tests read.

Each turn looks like a real one to the pages: a line a few sentences long, its usage and context
totals, the messages sent, two retrievals of five of the speaker's memories each (each recall logged,
as a turn logs it), who heard it; every listener keeps an episodic memory of it; every 25 turns
someone reflects (with evidence), every 40 a stage direction, every 100 the writer edited the line.
A third of the lines move both listeners' standing towards its speaker (a relationship row each), and
three planted beliefs, held by everyone, are spoken of every 20 turns (each holder's history grows).
"""

from __future__ import annotations

import random
from collections import Counter
from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from chronicle.simulation.run.models import Retrieval, Simulation, Turn
from chronicle.writing.models import ChronicleEntry
from memory.api import banks
from memory.models import EMBEDDING_DIM, Memory, MemoryAccess, Relationship

CAST = ["Alex", "Jordan", "Sam"]
PLACES = ["Bella's trattoria", "the noodle bar", "the market", "the ferry", "Alex's kitchen", "the station café"]
FEELINGS = ["worried", "hopeful", "tired", "amused", "annoyed", "curious"]
BATCH = 1000  # rows per INSERT: a 5,000-turn run is a few dozen statements
SAID = ["thank you", "you never listen", "I promise", "that was kind"]  # what moved a relationship
BELIEFS = [("Sam", "Bella's is closing down next month.", False), ("Jordan", "The ferry stops running in winter.", True),
           ("Alex", "The noodle bar changed owners.", False)]


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
    bank = banks.bank_create(name=title, owner=owner) if memories else None
    simulation = Simulation.objects.create(
        owner=owner, title=title, status=Simulation.Status.COMPLETED, max_turns=max(turns, 1), provider="scripted",
        cast_snapshot=[{"name": name, "description": f"{name} is one of three friends."} for name in CAST],
        scenario_snapshot={"title": "Dinner plans", "location": "Alex's apartment", "time_of_day": "evening"},
        stage_directions=directions, bank=bank, parent=parent,
        planted_beliefs="\n".join(f"{holder}: {claim} [{str(true).lower()}]" for holder, claim, true in BELIEFS),
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
    # What the speaker recalled: five of its memories of earlier lines, by each of its two searches.
    recalled = {(index, order): [max(index - rng.randrange(300), 1) for _k in range(5)]
                for index in range(turns) for order in range(2)}
    accesses = [(CAST[index % 3], number, index + 1, n) for index in range(turns)
                for number, n in Counter(recalled[index, 0] + recalled[index, 1]).items()]
    lines = _memories(rng, bank, turns, accesses) if bank is not None else {}
    Retrieval.objects.bulk_create(
        [Retrieval(turn_id=ids[index], agent=CAST[index % 3], tool="query_memory", order=order, path="index",
                   query=f"what did {CAST[(index + 1) % 3]} say about {PLACES[index % len(PLACES)]}?", latency_ms=4.0,
                   results=[{"memory_id": lines.get((CAST[index % 3], number)), "content": f"A memory of turn {number}.",
                             "score": 0.8 - k / 10} for k, number in enumerate(recalled[index, order])])
         for index in range(turns) for order in range(2)], batch_size=BATCH)
    ChronicleEntry.objects.bulk_create([ChronicleEntry(turn_id=ids[index], text=f"(edited) Line {index + 1}.")
                                        for index in range(0, turns, 100)], batch_size=BATCH)
    if bank is not None:
        MemoryAccess.objects.bulk_create([MemoryAccess(memory_id=lines[agent, number], turn=turn, count=n)
                                          for agent, number, turn, n in accesses], batch_size=BATCH)
        _relationships(rng, bank, turns, lines)
        _beliefs(rng, bank, turns)
    return simulation


def _memories(rng: random.Random, bank, turns: int, accesses: list[tuple]) -> dict[tuple[str, int], int]:
    """What each listener kept of every line (with the counters its recalls, `accesses`, left on it), and
    a reflection every 25 turns on the lines before it; {(listener, turn): its memory's id}."""
    counters: dict[tuple[str, int], list[int]] = {}
    for agent, number, turn, n in accesses:
        kept = counters.setdefault((agent, number), [0, turn])
        kept[:] = [kept[0] + n, max(kept[1], turn)]
    Memory.objects.bulk_create(
        [Memory(bank=bank, agent=listener, kind=Memory.Kind.EPISODIC, turn=number, speaker=CAST[(number - 1) % 3],
                content=f"{CAST[(number - 1) % 3]} said something about {PLACES[number % len(PLACES)]} at turn {number}.",
                importance=rng.uniform(2, 8), source=Memory.Source.EARNED, embedding=_vector(rng),
                participants=CAST, access_count=counters.get((listener, number), [0, None])[0],
                last_accessed_turn=counters.get((listener, number), [0, None])[1])
         for number in range(1, turns + 1) for listener in CAST], batch_size=BATCH)
    reflections = Memory.objects.bulk_create(
        [Memory(bank=bank, agent=CAST[number % 3], kind=Memory.Kind.REFLECTION, turn=number, importance=7,
                content=f"By turn {number} I see the others care more about company than about the food.",
                source=Memory.Source.REFLECTION, embedding=_vector(rng))
         for number in range(25, turns + 1, 25)], batch_size=BATCH)
    lines = {(agent, turn): pk for agent, turn, pk in Memory.objects.filter(bank=bank, kind=Memory.Kind.EPISODIC)
             .values_list("agent", "turn", "pk")}
    Evidence = Memory.evidence.through
    Evidence.objects.bulk_create([Evidence(from_memory_id=r.pk, to_memory_id=lines[CAST[0], r.turn - k])
                                  for r in reflections for k in range(3) if (CAST[0], r.turn - k) in lines],
                                 batch_size=BATCH)
    return lines


def _relationships(rng: random.Random, bank, turns: int, lines: dict[tuple[str, int], int]) -> None:
    """A third of the lines (anyone's) move each listener's trust and affinity towards its speaker a little."""
    standing: dict[tuple[str, str], list[float]] = {}
    rows = []
    for number in (n for n in range(1, turns + 1) if rng.random() < 1 / 3):
        speaker = CAST[(number - 1) % 3]
        for listener in (name for name in CAST if name != speaker):
            now = standing.setdefault((listener, speaker), [0.0, 0.0])
            moves = [round(rng.uniform(-0.1, 0.12), 2), round(rng.uniform(-0.1, 0.12), 2)]
            now[:] = [round(min(max(v + m, -1.0), 1.0), 2) for v, m in zip(now, moves)]
            rows.append(Relationship(bank=bank, agent=listener, other=speaker, turn=number, trust=now[0],
                                     affinity=now[1], trust_change=moves[0], affinity_change=moves[1],
                                     reason=f"{speaker} said “{rng.choice(SAID)}”",
                                     evidence_id=lines[listener, number]))
    Relationship.objects.bulk_create(rows, batch_size=BATCH)


def _beliefs(rng: random.Random, bank, turns: int) -> None:
    """Each planted claim, held by everyone (heard from its holder at turn 3), spoken of every 20
    turns: each holder's confidence moves and its history grows by a step."""
    rows = []
    for number, (holder, claim, true) in enumerate(BELIEFS, start=1):
        for agent in CAST:
            chain = [] if agent == holder else [holder]
            confidence, history = (1.0 if agent == holder else 0.7), []
            history.append({"turn": 0 if agent == holder else 3, "confidence": confidence, "source_chain": chain,
                            "stance": "asserts"})
            for turn in range(20 + number, turns + 1, 20):
                stance = rng.choice(["asserts", "asserts", "doubts", "denies"])
                confidence = round(min(max(confidence + (0.1 if stance == "asserts" else -0.15), 0.05), 1.0), 3)
                history.append({"turn": turn, "confidence": confidence, "stance": stance,
                                "source_chain": [rng.choice([n for n in CAST if n != agent])]})
            disputed = next(({"turn": step["turn"], "by": step["source_chain"][0]} for step in reversed(history)
                             if step["stance"] == "denies"), None)
            rows.append(Memory(
                bank=bank, agent=agent, kind=Memory.Kind.SEMANTIC, category="belief", turn=0 if agent == holder else 3,
                content=claim if agent == holder else f"{holder} told me: {claim}", importance=7.0,
                source=Memory.Source.WRITER if agent == holder else Memory.Source.EARNED, embedding=_vector(rng),
                metadata={"belief": {"id": number, "claim": claim, "true": true, "source_chain": chain,
                                     "confidence": confidence, "hops": len(chain), "stance": history[-1]["stance"],
                                     "disputed": disputed, "history": history}}))
    Memory.objects.bulk_create(rows, batch_size=BATCH)
