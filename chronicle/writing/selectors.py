"""Reads for the writer's pages: overrides of a turn, the reading view's rows, the branch tree, diffs."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field

from django.db.models import Prefetch

from chronicle.simulation.models import Retrieval, Simulation, Turn
from chronicle.writing.models import ChronicleEntry, Edit, TurnOverride
from memory.models import Memory


@dataclass
class Overrides:
    excluded: frozenset[int] = frozenset()
    pinned: list[dict] = field(default_factory=list)
    line: str = ""


def turn_overrides(*, simulation: Simulation, index: int) -> Overrides:
    rows = list(TurnOverride.objects.at(simulation, index))
    excluded = frozenset(r.memory_id for r in rows if r.kind == TurnOverride.Kind.EXCLUDE and r.memory_id)
    pin_ids = [r.memory_id for r in rows if r.kind == TurnOverride.Kind.PIN and r.memory_id]
    memories = {m.pk: m for m in Memory.objects.in_bank(simulation.bank).active().filter(pk__in=pin_ids)} \
        if simulation.bank_id else {}
    pinned = [
        {"memory_id": m.pk, "content": m.content, "agent": m.agent, "kind": m.kind, "category": m.category,
         "turn": m.turn, "speaker": m.speaker, "score": 1.0, "components": {}, "matched_key": None}
        for m in (memories.get(pk) for pk in pin_ids) if m is not None and m.pk not in excluded
    ]
    line = next((r.content for r in rows if r.kind == TurnOverride.Kind.LINE), "")
    return Overrides(excluded=excluded, pinned=pinned, line=line)


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


def branch_root(simulation: Simulation, owner) -> Simulation:
    root = simulation
    seen = {root.pk}
    while root.parent_id and root.parent_id not in seen:
        parent = Simulation.objects.owned_by(owner).filter(pk=root.parent_id).first()
        if parent is None:
            break
        seen.add(parent.pk)
        root = parent
    return root


@dataclass
class BranchNode:
    simulation: Simulation
    children: list["BranchNode"] = field(default_factory=list)


def branch_tree(simulation: Simulation, owner) -> BranchNode:
    """The tree of runs this one belongs to: from its root down, every branch of every branch."""
    root = branch_root(simulation, owner)
    mine = list(Simulation.objects.owned_by(owner).only("id", "title", "parent_id", "branch_turn", "status", "created")
                .order_by("created", "id"))
    children: dict[int, list[Simulation]] = {}
    for sim in mine:
        if sim.parent_id:
            children.setdefault(sim.parent_id, []).append(sim)

    def build(sim: Simulation, depth: int = 0) -> BranchNode:
        node = BranchNode(sim)
        if depth < 50:
            node.children = [build(c, depth + 1) for c in children.get(sim.pk, [])]
        return node

    return build(root)


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
    from django.utils.html import escape

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
    from django.utils.safestring import mark_safe

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
