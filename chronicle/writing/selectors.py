"""Reads for the writer's pages: the reading view's rows, history, diffs, and the turn inspector's
(the bank as it stood at a turn, a turn's overrides as the inspector shows them).

The bank page's reads are in bank_selectors.py and a writer's memory's reach in reach.py; both are
re-exported here, so the pages (and tests) read one module."""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from django.db.models import Prefetch
from django.utils.html import escape
from django.utils.safestring import mark_safe

from chronicle.simulation.run.models import Retrieval, Simulation, Turn, TurnOverride
from chronicle.simulation.control.pins import pin_refusal
from chronicle.simulation.run.selectors import Overrides, turn_overrides  # noqa: F401  (the writer's pages read them too)
from chronicle.writing.bank_selectors import (BANK_PAGE_SIZE, SEARCH_K, BankCard, BankFilters, LinkNode,
                                              bank_card_page, bank_search, line_copies, memory_links)
from chronicle.writing.models import ChronicleEntry, Edit
from chronicle.writing.reach import PREPOPULATE_REACH, TOOL_REACH, Reach, reach
from memory.models import Memory
from memory.api import MemoryFilter, recollection

__all__ = [
    "turns_with_entries", "lines_with_entries", "entry_text", "entry_for", "history", "ComparedRow", "compare",
    "turn_began", "memory_marks", "with_marks", "mark_retrievals", "turn_search_results", "turn_search",
    "InspectorOverrides", "inspector_overrides", "override_row",
    # bank_selectors.py (the bank page's view pages by selectors.BANK_PAGE_SIZE: tests patch it here)
    "SEARCH_K", "bank_search", "BANK_PAGE_SIZE", "BankFilters", "BankCard", "line_copies", "bank_card_page",
    "LinkNode", "memory_links",
    # reach.py
    "TOOL_REACH", "PREPOPULATE_REACH", "Reach", "reach",
]


def turns_with_entries(simulation: Simulation):
    return (simulation.turns.order_by("index").select_related("entry")
            .prefetch_related(Prefetch("retrievals", queryset=Retrieval.objects.order_by("order", "id"))))


def lines_with_entries(simulation: Simulation):
    """The reading view's lines: each with the writer's entry, without what was sent to the model or
    the retrievals (a long run is read a page at a time: line_pages.LinePage.of)."""
    return simulation.turns.order_by("index").select_related("entry").defer("prompt_messages", "context")


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


REPLACED_BELOW = 0.5  # lines sharing less than this share of their words read as one line replaced by another


def _marked(a: str, b: str) -> tuple[str, str]:
    """The difference as HTML, everything escaped: a line edited here and there word by word (removed
    words in <del>, added in <ins>); a line that is mostly new as a whole line replaced (all of it in
    <del> on one side, <ins> on the other), not a scatter of unstruck common words."""
    left_words, right_words = a.split(), b.split()
    matcher = difflib.SequenceMatcher(a=left_words, b=right_words, autojunk=False)
    if left_words and right_words and matcher.ratio() < REPLACED_BELOW:
        return (f'<del class="replaced">{escape(" ".join(left_words))}</del>',
                f'<ins class="replaced">{escape(" ".join(right_words))}</ins>')
    left, right = [], []
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
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


def compare(left: Simulation, right: Simulation, page=None) -> list[ComparedRow]:
    """Both runs' lines aligned by turn index (one page of them: a line_pages.LinePage; None: all), with
    the differences marked as changes from the other run to this one: this run's own words are
    additions (<ins>), the other's words it lacks removals."""
    lefts, rights = lines_with_entries(left), lines_with_entries(right)
    if page is not None:
        lefts, rights = page.of(lefts), page.of(rights)
    lefts = {t.index: t for t in lefts}
    rights = {t.index: t for t in rights}
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
    results = recollection.recall(simulation.bank, query, filter=flt, k=k + len(gone), scoring=simulation.scoring,
                                  weights=simulation.weights or None, current_turn=turn.number)
    return [r for r in results if r.memory.pk not in gone][:k]


def turn_search(simulation: Simulation, turn: Turn, query: str) -> list[dict]:
    """turn_search_results as the inspector's rows: ranked 1..k, marked where changed since the turn."""
    found = turn_search_results(simulation, turn, query)
    rows = [dict(r.snapshot(), rank=i + 1) for i, r in enumerate(found)]
    return with_marks(rows, memory_marks(simulation, turn, [r["memory_id"] for r in rows]))


# --- pins (the rule: chronicle.simulation.control.pins) ------------------------------------------------

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


def other_retrievals_with(turn: Turn, memory: Memory, retrieval_id) -> list[int]:
    """The turn's other retrievals that returned this memory: their rows show its Exclude / Pin too."""
    return [r.pk for r in turn.retrievals.exclude(pk=retrieval_id or 0).only("pk", "results")
            if any(row.get("memory_id") == memory.pk for row in r.results or [])]


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
