"""The memory bank page's reads: its filters, its cards (the copies of a line everyone heard as one),
the writer's search of the bank and a memory's links (re-exported by chronicle.writing.selectors)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from django.core.paginator import Paginator
from django.contrib.postgres.aggregates import ArrayAgg
from django.db.models import Case, CharField, Count, F, Min, Value, When, Window
from django.db.models.functions import MD5, Cast, Concat

from chronicle.simulation.run.models import Simulation
from memory.models import Memory
from memory.api import MemoryFilter, recollection

# --- the writer's search (the inspector's, as of a turn: selectors.turn_search_results) ---------

SEARCH_K = 10


def bank_search(simulation: Simulation, query: str, agent: str | None = None) -> list[dict]:
    """The writer's search of a run's bank, as result rows (a pure read)."""
    if not query or simulation.bank_id is None:
        return []
    # One query vector for an interactive search (STYLE.md allows this one in a request).
    results = recollection.recall(simulation.bank, query, filter=MemoryFilter(agent=agent) if agent else None, k=SEARCH_K)
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
    focused: bool = False  # the memory a link pointed to

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


def _card_key(filters: BankFilters):
    """What makes memories one card: a line's copies (episodic, same turn, speaker, words and status)
    share a key, unless one agent's memories are asked for; anything else is its own card."""
    own = Cast("id", CharField())
    if filters.agent:
        return own
    line = MD5(Concat(Cast("turn", CharField()), Value("\x1f"), "speaker", Value("\x1f"), "content", Value("\x1f"),
                      "status", output_field=CharField()))
    return Case(When(kind=Memory.Kind.EPISODIC, turn__isnull=False, then=line), default=own, output_field=CharField())


def _cards(rows) -> list[BankCard]:
    """Memories (in card order) grouped by their `card` key."""
    cards: dict[str, BankCard] = {}
    for memory in rows:
        if memory.card in cards:
            cards[memory.card].copies.append(memory)
        else:
            cards[memory.card] = BankCard(memory=memory, copies=[memory])
    return list(cards.values())


def bank_card_page(simulation: Simulation, filters: BankFilters, number, *, size: int = BANK_PAGE_SIZE,
                   first: int | None = None):
    """One page of the bank page's cards (a Paginator page whose object_list is the cards), grouped and
    paged by the database: a long run's bank is never read whole. A search's results come in rank
    order; else by turn. `first`: the card holding that memory goes first on page 1, whatever its place."""
    memories = filters.apply(Memory.objects.in_bank(simulation.bank)).defer("embedding") \
        if simulation.bank_id else Memory.objects.none()
    if filters.query:
        found = bank_search(simulation, filters.query, filters.agent if filters.agent not in ("", "(shared)") else None)
        order = [r["memory_id"] for r in found]
        by_id = {m.pk: m for m in memories.filter(pk__in=order).annotate(card=_card_key(filters))}
        page = Paginator(_cards([by_id[i] for i in order if i in by_id]), size).get_page(number)
        return _first(page, first)
    keyed = memories.annotate(card=_card_key(filters))
    held, held_turn = (keyed.filter(pk=first).values_list("card", "turn").first() or (None, None)) if first \
        else (None, None)
    # The cards in order, each with its memories' ids and how many cards there are (a window over the
    # groups): one pass over the bank, then only the page's memories are read.
    groups = (keyed.exclude(card=held) if held else keyed).order_by().values("card").annotate(
        first=Min("id"), turn=Min("turn"), kind=Min("kind"), ids=ArrayAgg("id"), total=Window(Count("*"))
    ).order_by(F("turn").asc(nulls_first=True), "kind", "first")
    page = _page(groups, number, size)
    keys = [group["card"] for group in page.object_list]
    ids = {pk: group["card"] for group in page.object_list for pk in group["ids"]}
    if held and page.number == 1:
        keys = [held, *keys]
        # A card's memories share its turn (a line's copies) or it is the one memory: found by index.
        copies = keyed.filter(card=held, turn=held_turn) if held_turn is not None else keyed.filter(pk=first)
        ids |= {pk: held for pk in copies.values_list("pk", flat=True)}
    rows = memories.filter(pk__in=list(ids)).order_by(F("turn").asc(nulls_first=True), "kind", "id")
    for memory in rows:
        memory.card = ids[memory.pk]
    cards = {card.memory.card: card for card in _cards(rows)}
    page.object_list = [cards[key] for key in keys if key in cards]
    return page


def _page(groups, number, size: int):
    """The Paginator page `number` of the card groups, counted by their own window (`total`): one query,
    and a second only for a number past the last page (the last page, as Paginator.get_page gives)."""
    try:
        wanted = int(number)
    except (TypeError, ValueError):
        wanted = 1
    rows = list(groups[(wanted - 1) * size:wanted * size]) if wanted >= 1 else []
    paginator = Paginator(groups, size)
    # Paginator.count is a cached_property: the window's figure stands in for its COUNT query.
    paginator.count = rows[0]["total"] if rows else groups.count()
    if not rows and not 1 <= wanted <= paginator.num_pages:
        wanted = paginator.num_pages
        rows = list(groups[(wanted - 1) * size:wanted * size])
    return paginator._get_page(rows, wanted, paginator)


def _first(page, first: int | None):
    """A search's page with the card holding `first` moved to the front (page 1 only)."""
    holder = next((c for c in page.object_list if first in {m.pk for m in c.copies}), None) if first else None
    if holder is not None and page.number == 1:
        page.object_list = [holder, *[c for c in page.object_list if c is not holder]]
    return page


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
