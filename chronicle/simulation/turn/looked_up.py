"""What an agent looked up with its tools stays with it (tools mode's working memory, after Letta's
core memory): the memories its tools handed back at a turn are kept in its conversation before that
turn's line, as the notes of the pre-populated modes are, until the window moves past them. A tool's
answer used to last one turn, so each character asked query_self(secrets) again nearly every turn.
"""

from __future__ import annotations

from chronicle.simulation.prompting.context import count_tokens
from chronicle.simulation.prompting.prompts import LOOKED_UP, NOTE_OPENING
from chronicle.simulation.turn.types import TurnInput, TurnOutcome
from memory.models import Memory

# Tokens the kept lookups of one turn may take (it stays in every call until the window moves): the
# first found first, the rest a lookup away.
LOOKED_UP_BUDGET = 300
NOT_KEPT = ("prepopulate", "pinned")


def keep_looked_up(turn: TurnInput, outcome: TurnOutcome, *, shown: set[int]) -> None:
    """Add what the turn's tool calls found (each memory once, none the conversation already shows,
    none of what the call was briefed with: `shown`) to the turn's note (outcome.context["note"]),
    which its next turns repeat where it was. What the system message shows every turn (the sheet's
    core, in the modes that brief) is left to it: a kept copy would take it out of there."""
    seen = set(turn.kept) | set(shown)
    lines: list[str] = []
    ids: list[int] = []
    for retrieval in outcome.retrievals:
        if retrieval["tool"] in NOT_KEPT or retrieval.get("error"):
            continue
        for snap in retrieval.get("results") or []:
            memory_id = snap.get("memory_id")
            if memory_id is None or memory_id in seen or snap.get("excluded") or not snap.get("content"):
                continue
            seen.add(memory_id)
            label = snap.get("turn")
            # By its id, as a later tool answer names it ("already_given"), and its turn.
            when = f" (turn {label})" if label and label > 0 else ""
            line = f"- #{memory_id}{when} {snap['content']}"
            if lines and count_tokens("\n".join([*lines, line])) > LOOKED_UP_BUDGET:
                continue
            lines.append(line)
            ids.append(memory_id)
    if not lines:
        return
    note = outcome.context.get("note") or {}
    text = note.get("text") or f"{NOTE_OPENING}{turn.number}, you recall:"
    outcome.context["note"] = {"text": f"{text}\n## {LOOKED_UP}\n" + "\n".join(lines),
                               "ids": [*(note.get("ids") or []), *ids]}


def notes_without_excluded(turn: TurnInput) -> dict[int, str]:
    """The earlier notes as the conversation repeats them, less the lines of any memory the writer
    excluded at this turn: an exclusion keeps a memory out of the agent's context, kept notes too
    (the conversation differs from there on, as the writer asked)."""
    notes = {number: note["text"] for number, note in turn.kept_notes.items()}
    if not turn.excluded or not notes:
        return notes
    # By content: a branch's notes were written with its parent's memory ids, its exclusions name its own copies.
    contents = list(Memory.objects.filter(pk__in=turn.excluded).values_list("content", flat=True))
    return {number: "\n".join(line for line in text.split("\n") if not any(c and c in line for c in contents))
            for number, text in notes.items()}
