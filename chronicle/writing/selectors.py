"""Reads for the writer's pages: the reading view's rows, a turn's overrides as the inspector shows them, the bank page and its search, history, diffs."""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from django.db.models import Prefetch
from django.utils.html import escape
from django.utils.safestring import mark_safe

from chronicle.simulation.models import Retrieval, Simulation, Turn, TurnOverride
from chronicle.simulation.selectors import Overrides, turn_overrides  # noqa: F401  (the writer's pages read them too)
from chronicle.writing.models import ChronicleEntry, Edit
from memory.models import Memory
from memory.retrieval import MemoryFilter, recall


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
    """Both runs' lines aligned by turn index, with the differences marked."""
    lefts = {t.index: t for t in turns_with_entries(left)}
    rights = {t.index: t for t in turns_with_entries(right)}
    rows = []
    for index in sorted(set(lefts) | set(rights)):
        lt, rt = lefts.get(index), rights.get(index)
        ltext = entry_text(lt) if lt else ""
        rtext = entry_text(rt) if rt else ""
        same = lt is not None and rt is not None and lt.agent == rt.agent and ltext == rtext
        lhtml, rhtml = _marked(ltext, rtext)
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


@dataclass
class InspectorOverrides:
    """A turn's overrides as the inspector shows them (pins as the writer made them, archived or not)."""

    excluded: set[int]
    pinned_ids: set[int]
    pinned: list[TurnOverride]
    line: str


def inspector_overrides(simulation: Simulation, index: int) -> InspectorOverrides:
    rows = list(TurnOverride.objects.at(simulation, index))
    pinned = [o for o in rows if o.kind == TurnOverride.Kind.PIN]
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
    return {"simulation": simulation, "turn": turn, "r": row, "retrieval": retrieval,
            "excluded": overrides.excluded, "pinned_ids": overrides.pinned_ids}


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
