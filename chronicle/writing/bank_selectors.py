"""The memory bank page's reads: its filters, its cards (the copies of a line everyone heard as one),
the writer's search of the bank and a memory's links (re-exported by chronicle.writing.selectors)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from django.db.models import F

from chronicle.simulation.models import Simulation
from memory.models import Memory
from memory.api import MemoryFilter, recall

# --- the writer's search (the inspector's, as of a turn: selectors.turn_search_results) ---------

SEARCH_K = 10


def bank_search(simulation: Simulation, query: str, agent: str | None = None) -> list[dict]:
    """The writer's search of a run's bank, as result rows (a pure read)."""
    if not query or simulation.bank_id is None:
        return []
    # One query vector for an interactive search (STYLE.md allows this one in a request).
    results = recall(simulation.bank, query, filter=MemoryFilter(agent=agent) if agent else None, k=SEARCH_K)
    return [r.snapshot() for r in results]


# --- the bank page's cards ----------------------------------------------------------------------

BANK_PAGE_SIZE = 40  # cards a page


@dataclass
class BankFilters:
    """The bank page's filters, from its query string (anything unknown is left out, not an error)."""

    query: str = ""
    agent: str = ""  # a cast name, "(shared)" for everyone's, "" for all
    kind: str = ""
    source: str = ""
    status: str = "active"  # or archived, consolidated, "all"
    turn_from: int | None = None
    turn_to: int | None = None

    @classmethod
    def from_request(cls, data) -> "BankFilters":
        def number(name):
            value = (data.get(name) or "").strip()
            return int(value) if value.lstrip("-").isdigit() else None

        status = data.get("status") or "active"
        return cls(query=(data.get("q") or "").strip(), agent=data.get("agent") or "",
                   kind=data.get("kind") if data.get("kind") in Memory.Kind.values else "",
                   source=data.get("source") if data.get("source") in Memory.Source.values else "",
                   status=status if status in (*Memory.Status.values, "all") else "active",
                   turn_from=number("turn_from"), turn_to=number("turn_to"))

    @property
    def narrowed(self) -> bool:
        return bool(self.agent or self.kind or self.source or self.status != "active" or self.turn_from is not None
                    or self.turn_to is not None)

    def apply(self, memories):
        if self.agent:
            memories = memories.for_agent("" if self.agent == "(shared)" else self.agent)
        if self.kind:
            memories = memories.filter(kind=self.kind)
        if self.source:
            memories = memories.filter(source=self.source)
        if self.status != "all":
            memories = memories.filter(status=self.status)
        if self.turn_from is not None:
            memories = memories.filter(turn__gte=self.turn_from)
        if self.turn_to is not None:
            memories = memories.filter(turn__lte=self.turn_to)
        return memories


@dataclass
class BankCard:
    """One card of the bank page: a memory, and for a line everyone heard, every listener's copy
    (the same words, one memory each: edited together)."""

    memory: Memory
    copies: list[Memory]

    @property
    def agents(self) -> list[str]:
        return [m.agent for m in self.copies]


def line_copies(memory: Memory) -> list[Memory]:
    """Every listener's copy of the line this episodic memory holds (itself included), in agent order."""
    if memory.kind != Memory.Kind.EPISODIC or memory.turn is None:
        return [memory]
    return list(Memory.objects.filter(bank_id=memory.bank_id, kind=Memory.Kind.EPISODIC, turn=memory.turn,
                                      speaker=memory.speaker, content=memory.content, status=memory.status)
                .order_by("agent", "id")) or [memory]


def bank_cards(simulation: Simulation, filters: BankFilters) -> list[BankCard]:
    """The bank page's cards, filtered: a search's results in rank order, else by turn; the copies of
    one line (each listener's) become one card, unless one agent's memories are asked for."""
    if simulation.bank_id is None:
        return []
    memories = filters.apply(Memory.objects.in_bank(simulation.bank)).defer("embedding")
    if filters.query:
        found = bank_search(simulation, filters.query, filters.agent if filters.agent not in ("", "(shared)") else None)
        order = [r["memory_id"] for r in found]
        by_id = {m.pk: m for m in memories.filter(pk__in=order)}
        rows = [by_id[i] for i in order if i in by_id]
    else:
        rows = list(memories.order_by(F("turn").asc(nulls_first=True), "kind", "id"))
    cards: list[BankCard] = []
    lines: dict[tuple, BankCard] = {}
    for memory in rows:
        key = (memory.turn, memory.speaker, memory.content, memory.status) \
            if memory.kind == Memory.Kind.EPISODIC and memory.turn is not None and not filters.agent else None
        if key is not None and key in lines:
            lines[key].copies.append(memory)
            continue
        card = BankCard(memory=memory, copies=[memory])
        cards.append(card)
        if key is not None:
            lines[key] = card
    return cards


# --- a memory's links: a small graph (bank page) ------------------------------------------------

@dataclass
class LinkNode:
    memory: Memory
    x: float
    y: float
    relation: str  # how the listed memory stands to the centre, read from it: "rests on #7", "#7 rests on it"
    css: str  # "rests-on" (the centre's evidence), "supports" (the centre is its evidence), "linked" (both)


def memory_links(memory: Memory, *, size: int = 320) -> list[LinkNode]:
    """The memories linked to this one (Memory.evidence, both ways: associate_memories, an insight's
    evidence, a summary's originals, a belief's teller), placed on a circle around it for the SVG."""
    rests_on = set(memory.evidence.values_list("pk", flat=True))
    supports = set(memory.derived.values_list("pk", flat=True))
    ids = sorted(rests_on | supports)
    others = Memory.objects.in_bank(memory.bank_id).filter(pk__in=ids).order_by("turn", "pk")
    centre, radius = size / 2, size / 2 - 46
    nodes = []
    for i, other in enumerate(others):
        angle = 2 * math.pi * i / max(len(ids), 1) - math.pi / 2
        css = ("linked" if other.pk in rests_on and other.pk in supports
               else "rests-on" if other.pk in rests_on else "supports")
        relation = {"linked": f"linked both ways with #{memory.pk}", "rests-on": f"#{memory.pk} rests on it",
                    "supports": f"rests on #{memory.pk}"}[css]
        nodes.append(LinkNode(other, round(centre + radius * math.cos(angle), 1),
                              round(centre + radius * math.sin(angle), 1), relation, css))
    return nodes
