"""Reads for the writer's pages: the reading view's rows, a turn's overrides as the inspector shows them, the bank page and its search, history, diffs."""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass

from django.db.models import F, Prefetch
from django.utils.html import escape
from django.utils.safestring import mark_safe

from chronicle.simulation.briefing import PREPOPULATED_FACT_KINDS
from chronicle.simulation.models import Retrieval, Simulation, Turn, TurnOverride
from chronicle.simulation.pins import pin_refusal
from chronicle.simulation.selectors import Overrides, turn_overrides  # noqa: F401  (the writer's pages read them too)
from chronicle.writing.models import ChronicleEntry, Edit
from memory.models import Memory
from memory.retrieval import MemoryFilter, recall
from memory.tools import QUERY_MEMORY_KINDS, SIMULATION_TOOLS


def turns_with_entries(simulation: Simulation):
    return (simulation.turns.order_by("index").select_related("entry")
            .prefetch_related(Prefetch("retrievals", queryset=Retrieval.objects.order_by("order", "id"))))


def entry_text(turn: Turn) -> str:
    """The line as the writer has it now: their text if they edited it, else what was generated."""
    entry = getattr(turn, "entry", None) if _has_entry(turn) else None
    return entry.text if entry is not None and entry.text else turn.utterance


def _has_entry(turn: Turn) -> bool:
    try:
        turn.entry
    except ChronicleEntry.DoesNotExist:
        return False
    return True


def entry_for(turn: Turn) -> ChronicleEntry | None:
    return turn.entry if _has_entry(turn) else None


def history(simulation: Simulation, *, target_type: str | None = None, target_id: int | None = None):
    edits = Edit.objects.for_simulation(simulation).select_related("actor", "undoes")
    if target_type:
        edits = edits.filter(target_type=target_type)
    if target_id is not None:
        edits = edits.filter(target_id=target_id)
    return edits


@dataclass
class ComparedRow:
    index: int
    left: Turn | None
    right: Turn | None
    left_text: str
    right_text: str
    same: bool
    left_html: str = ""
    right_html: str = ""

    @property
    def number(self) -> int:
        return self.index + 1


def _marked(a: str, b: str) -> tuple[str, str]:
    """Word-level difference as HTML: removed words in <del>, added in <ins> (everything escaped)."""
    left_words, right_words = a.split(), b.split()
    left, right = [], []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=left_words, b=right_words, autojunk=False).get_opcodes():
        lw, rw = escape(" ".join(left_words[i1:i2])), escape(" ".join(right_words[j1:j2]))
        if op == "equal":
            left.append(lw)
            right.append(rw)
        else:
            if lw:
                left.append(f"<del>{lw}</del>")
            if rw:
                right.append(f"<ins>{rw}</ins>")
    return " ".join(left), " ".join(right)


def compare(left: Simulation, right: Simulation) -> list[ComparedRow]:
    """Both runs' lines aligned by turn index, with the differences marked as changes from the other
    run to this one: this run's own words are additions (<ins>), the other's words it lacks removals."""
    lefts = {t.index: t for t in turns_with_entries(left)}
    rights = {t.index: t for t in turns_with_entries(right)}
    rows = []
    for index in sorted(set(lefts) | set(rights)):
        lt, rt = lefts.get(index), rights.get(index)
        ltext = entry_text(lt) if lt else ""
        rtext = entry_text(rt) if rt else ""
        same = lt is not None and rt is not None and lt.agent == rt.agent and ltext == rtext
        rhtml, lhtml = _marked(rtext, ltext)
        rows.append(ComparedRow(index=index, left=lt, right=rt, left_text=ltext, right_text=rtext, same=same,
                                left_html=mark_safe(lhtml), right_html=mark_safe(rhtml)))
    return rows


# --- the turn inspector and the memory bank page ---------------------------------------------

SEARCH_K = 10


def bank_search(simulation: Simulation, query: str, agent: str | None = None) -> list[dict]:
    """The writer's search of a run's bank, as result rows (a pure read)."""
    if not query or simulation.bank_id is None:
        return []
    # One query vector for an interactive search (STYLE.md allows this one in a request).
    results = recall(simulation.bank, query, filter=MemoryFilter(agent=agent) if agent else None, k=SEARCH_K)
    return [r.snapshot() for r in results]


# --- the bank as it stood at a turn ------------------------------------------------------------
#
# What "existed at turn N" means (N is 1-based, index = N - 1):
# - in story time, a memory exists from the turn after the one it belongs to: gifted ones (no turn)
#   from the start, the line of turn t (episodic, turn = t) from turn t + 1, a memory the writer
#   formed for turn M (the inspector of turn M + 1 sends M) from turn M + 1. So turn N sees
#   `turn IS NULL OR turn <= N - 1`: the rule of MemoryQuerySet.before_turn, bank_copy (what a
#   branch from turn N starts with) and the engine's pre-population.
# - a memory archived or consolidated after turn N began still existed then: it is shown, marked;
#   one whose status changed before turn N began is not. Changes are dated by the clock: the writer's
#   edit of its status (Edit rows), else the memory's last save.
# - the agent reads its own memories and the shared ones (agent ""), never another agent's.
# - content is today's (that is what a regeneration reads); a memory edited since turn N began is
#   marked "edited after this turn", with what it said then and a link to its history.


def turn_began(turn: Turn):
    """When the agent of this turn read its memories (the turn's last attempt)."""
    return turn.started or turn.finished


def _gone_before(simulation: Simulation, turn: Turn) -> set[int]:
    """Ids of this agent's (and shared) memories that were not active when the turn began.

    The writer's status edits say what the status was then (the last one before, else the first
    one after's "before"), so an archived-then-restored memory counts as gone in between; a memory
    with no status edit has its status of today, dated by its last save."""
    began = turn_began(turn)
    candidates = Memory.objects.in_bank(simulation.bank).filter(agent__in=[turn.agent, ""]).before_turn(turn.number)
    gone = list(candidates.exclude(status=Memory.Status.ACTIVE).only("id", "updated_at"))
    if began is None:
        return {m.pk for m in gone}
    edits: dict[int, list] = {}
    for target, created, before, after in (Edit.objects.for_simulation(simulation)
                                           .filter(target_type=Edit.Target.MEMORY, field="status",
                                                   target_id__in=candidates.values("pk"))
                                           .order_by("created", "id")
                                           .values_list("target_id", "created", "before", "after")):
        edits.setdefault(target, []).append((created, before, after))
    out = set()
    for pk, history in edits.items():
        earlier = [after for created, _before, after in history if created <= began]
        status = earlier[-1] if earlier else next(before for created, before, _after in history if created > began)
        if status != Memory.Status.ACTIVE:
            out.add(pk)
    out |= {m.pk for m in gone if m.pk not in edits and m.updated_at <= began}
    return out


def memory_marks(simulation: Simulation, turn: Turn, memory_ids) -> dict[int, dict]:
    """What changed about these memories since the turn began: {id: {"edited": [fields], "then": the
    content at that turn (if it changed), "status": today's status if no longer active, "added": True
    when the writer formed it after the turn ran}}. Memories with nothing to say are left out."""
    ids = {int(i) for i in memory_ids if i}
    began = turn_began(turn)
    if not ids or began is None or simulation.bank_id is None:
        return {}
    marks: dict[int, dict] = {}
    for edit in (Edit.objects.for_simulation(simulation)
                 .filter(target_type=Edit.Target.MEMORY, target_id__in=ids, created__gt=began)
                 .exclude(field="created").order_by("created", "id")):
        mark = marks.setdefault(edit.target_id, {"edited": []})
        if edit.field not in mark["edited"]:
            mark["edited"].append(edit.field)
        if edit.field == "content" and "then" not in mark:
            mark["then"] = edit.before  # the first change after the turn began: the text the agent could read
    for memory in Memory.objects.in_bank(simulation.bank).filter(pk__in=ids).only(
            "id", "status", "source", "created_at", "metadata"):
        if memory.status != Memory.Status.ACTIVE:
            marks.setdefault(memory.pk, {"edited": []})["status"] = memory.status
        # A branch's copies are younger than the turns it shares with its parent: not "added after".
        if memory.source == Memory.Source.WRITER and memory.created_at > began \
                and not (memory.metadata or {}).get("copied_from"):
            marks.setdefault(memory.pk, {"edited": []})["added"] = True
    return marks


def with_marks(rows: list[dict], marks: dict[int, dict]) -> list[dict]:
    return [dict(r, marks=marks[r["memory_id"]]) if r.get("memory_id") in marks else r for r in rows]


def mark_retrievals(simulation: Simulation, turn: Turn) -> None:
    """Mark, on the turn's prefetched retrievals (not saved), the memories changed since the turn."""
    retrievals = list(turn.retrievals.all())
    marks = memory_marks(simulation, turn, {r.get("memory_id") for x in retrievals for r in x.results or []})
    for retrieval in retrievals:
        retrieval.results = with_marks(retrieval.results or [], marks)


def turn_search_results(simulation: Simulation, turn: Turn, query: str, *, k: int = SEARCH_K) -> list:
    """The top k memories for `query` among those the turn's agent could have recalled at that turn
    (see above), ranked the way the run ranks (its scoring preset, at that turn). A pure read."""
    if not query or simulation.bank_id is None:
        return []
    gone = _gone_before(simulation, turn)
    flt = MemoryFilter(agent=turn.agent, shared=True, max_turn=turn.index, statuses=list(Memory.Status.values))
    # Asking for k + len(gone) cannot come back short when k memories that existed match.
    results = recall(simulation.bank, query, filter=flt, k=k + len(gone), scoring=simulation.scoring,
                     weights=simulation.weights or None, current_turn=turn.number)
    return [r for r in results if r.memory.pk not in gone][:k]


def turn_search(simulation: Simulation, turn: Turn, query: str) -> list[dict]:
    """turn_search_results as the inspector's rows: ranked 1..k, marked where changed since the turn."""
    found = turn_search_results(simulation, turn, query)
    rows = [dict(r.snapshot(), rank=i + 1) for i, r in enumerate(found)]
    return with_marks(rows, memory_marks(simulation, turn, [r["memory_id"] for r in rows]))


# --- pins (the rule: chronicle.simulation.pins) ------------------------------------------------

@dataclass
class InspectorOverrides:
    """A turn's overrides as the inspector shows them (pins as the writer made them, each with the
    reason it would not apply now, if any)."""

    excluded: set[int]
    pinned_ids: set[int]
    pinned: list[TurnOverride]
    line: str


def inspector_overrides(simulation: Simulation, index: int, agent: str | None = None) -> InspectorOverrides:
    rows = list(TurnOverride.objects.at(simulation, index))
    pinned = [o for o in rows if o.kind == TurnOverride.Kind.PIN]
    if agent is not None and pinned:
        memories = Memory.objects.in_bank(simulation.bank).in_bulk([o.memory_id for o in pinned]) \
            if simulation.bank_id else {}
        for override in pinned:
            memory = memories.get(override.memory_id)
            override.refusal = (pin_refusal(simulation=simulation, index=index, agent=agent, memory=memory)
                                if memory else f"Memory #{override.memory_id} is not in this run's bank.")
    return InspectorOverrides(excluded={o.memory_id for o in rows if o.kind == TurnOverride.Kind.EXCLUDE},
                              pinned_ids={o.memory_id for o in pinned}, pinned=pinned,
                              line=next((o.content for o in rows if o.kind == TurnOverride.Kind.LINE), ""))


def override_row(*, simulation: Simulation, turn: Turn, memory: Memory, retrieval_id) -> dict:
    """The context of one memory's row after the writer excluded or pinned it: the row as that
    retrieval returned it (score and why), else the memory itself."""
    row = memory.snapshot() | {"status": memory.status}
    retrieval = turn.retrievals.filter(pk=retrieval_id or 0).first()
    if retrieval:
        row = next((r for r in retrieval.results if r.get("memory_id") == memory.pk), row)
    overrides = inspector_overrides(simulation, turn.index)
    row = with_marks([row], memory_marks(simulation, turn, [memory.pk]))[0]
    return {"simulation": simulation, "turn": turn, "r": row, "retrieval": retrieval,
            "excluded": overrides.excluded, "pinned_ids": overrides.pinned_ids}


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


def bank_page(simulation: Simulation, *, query: str, agent: str) -> list[Memory]:
    """The memory bank page's cards: search results in rank order, else the active memories (300 at most),
    of one agent ("(shared)": nobody's) or all."""
    memories = Memory.objects.in_bank(simulation.bank).active() if simulation.bank_id else Memory.objects.none()
    if agent:
        memories = memories.for_agent("" if agent == "(shared)" else agent)
    found = bank_search(simulation, query, agent if agent and agent != "(shared)" else None)
    if found:
        order = [r["memory_id"] for r in found]
        by_id = {m.pk: m for m in memories.filter(pk__in=order)}
        return [by_id[i] for i in order if i in by_id]
    if query:
        return []
    return list(memories.order_by("agent", "turn", "id")[:300])


# --- reach: can the agent get a memory the writer forms? ----------------------------------------
#
# A memory the writer forms has no category, `about` or participants, so it is returned only by a
# tool (or pre-populated section) whose filter asks for its kind and nothing narrower. Each entry:
# the kinds, and whose memories — "own" (the agent's), "shared" (the agent's and everyone's, agent
# ""), "everyone" (only agent ""), "any" (anybody's). The tools that also filter by category
# (query_background, query_communication_style), `about` (query_character) or participant
# (recall_interactions) never return one, nor do the write tools. tests/chronicle/writing/
# test_reach_warning.py runs every tool and the pre-population and checks their filters against
# these tables, so a change to memory.tools or the engine that they miss fails there.
TOOL_REACH: dict[str, tuple[tuple[str, ...], str]] = {
    "query_self": (("character",), "shared"),
    "query_scene": (("scene",), "any"),
    "query_memory": (tuple(QUERY_MEMORY_KINDS), "shared"),
    "recall_episodes": (("episodic", "observation", "action"), "own"),
    "recall_facts": (("semantic", "character_knowledge", "reflection"), "shared"),
    "check_similar_situations": (("episodic", "observation", "action", "reflection", "procedural"), "own"),
}
# engine.prepopulate's sections, by title (the others present: filtered by `about`).
PREPOPULATE_REACH: dict[str, tuple[tuple[str, ...], str]] = {
    "Who you are": (("character",), "shared"),
    "More about you": (("character",), "own"),
    "Where you are": (("scene",), "shared"),
    "What you know": (tuple(PREPOPULATED_FACT_KINDS), "shared"),
    "Recent events": (("episodic", "observation", "action"), "shared"),
}
_WHOSE_REACHES = {"own": {"own"}, "shared": {"own", "everyone"}, "everyone": {"everyone"}, "any": {"own", "everyone"}}


@dataclass
class Reach:
    """What the agents of a run can get of a writer's memory: `ways[(kind, whose)]` names the offered
    tools and pre-populated sections that return it (whose: "own" for an agent's, "everyone" for shared)."""

    mode: str
    tools: list[str]
    ways: dict[tuple[str, str], list[str]]

    def warning(self, kind: str, agent: str) -> str:
        """"" when the memory is reachable, else why not and what would reach it, in the writer's words."""
        whose = "own" if agent else "everyone"
        if self.ways.get((kind, whose)):
            return ""
        label = dict(Memory.Kind.choices).get(kind, kind)
        who = f"{agent}'s" if agent else "a shared"
        tools = [name for name, (kinds, reach) in TOOL_REACH.items()
                 if kind in kinds and whose in _WHOSE_REACHES[reach] and name not in self.tools]
        sections = [title for title, (kinds, reach) in PREPOPULATE_REACH.items()
                    if kind in kinds and whose in _WHOSE_REACHES[reach]]
        fixes = []
        if tools:
            fixes.append(f"offer {' or '.join(tools)}" if self.mode != "prepopulate"
                         else f"use the “Both” retrieval mode with {' or '.join(tools)} offered")
        if sections and self.mode == "tools":
            fixes.append(f"use the “Both” retrieval mode (pre-population “{sections[0]}”)")
        advice = (" To reach it, " + ", or ".join(fixes) + " when you start a run; or pick another kind or owner."
                  if fixes else " Pick another kind or owner.")
        return (f"Unreachable: no agent would ever get {who} “{label}” memory in this run "
                f"(retrieval mode {self.mode}; tools offered: {', '.join(self.tools) or 'none'}).{advice}")

    def unreachable(self) -> list[tuple[str, str]]:
        return [(kind, whose) for kind in Memory.Kind.values for whose in ("own", "everyone")
                if not self.ways.get((kind, whose))]


def reach(simulation: Simulation) -> Reach:
    """Which kinds of writer-formed memory the run's agents can get, with its tool set and mode,
    as the engine offers them (turns.turn_input and engine._converse)."""
    mode = simulation.retrieval_mode
    if simulation.tools_unsupported and mode != Simulation.RetrievalMode.PREPOPULATE:
        mode = Simulation.RetrievalMode.PREPOPULATE  # the model refused tools: the engine fell back
    chosen = set(simulation.tool_set or [])
    tools = [n for n in SIMULATION_TOOLS if n in chosen] \
        if mode in ("tools", "both") and simulation.max_tool_calls > 0 else []
    sources = [(name, TOOL_REACH[name]) for name in tools if name in TOOL_REACH]
    if mode in ("prepopulate", "both"):
        sources += [(f"pre-population “{title}”", entry) for title, entry in PREPOPULATE_REACH.items()]
    ways: dict[tuple[str, str], list[str]] = {}
    for name, (kinds, whose) in sources:
        for kind in kinds:
            for owner in _WHOSE_REACHES[whose]:
                ways.setdefault((kind, owner), []).append(name)
    return Reach(mode=mode, tools=tools, ways=ways)


# --- a memory's links: a small graph (bank page) ------------------------------------------------

@dataclass
class LinkNode:
    memory: Memory
    x: float
    y: float
    relation: str  # "rests on" (its evidence), "supports" (it is their evidence), "linked" (both ways)


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
        relation = ("linked" if other.pk in rests_on and other.pk in supports
                    else "rests on" if other.pk in rests_on else "supports")
        nodes.append(LinkNode(other, round(centre + radius * math.cos(angle), 1),
                              round(centre + radius * math.sin(angle), 1), relation))
    return nodes
