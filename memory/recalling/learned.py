"""What an agent has learned of another since the story began (query_character's "since" half):
the writer's starting notes are where it began, not all it knows."""

from __future__ import annotations

import re

from django.db.models import Q

from memory.living.relationships import standing
from memory.models import Memory
from memory.recalling.filters import RecallResult
from memory.recalling.tool_types import ToolContext

SINCE = 5  # the latest few facts and moving lines query_character tells
SAME_NOTE = 0.6  # two notes sharing this share of the shorter one's words say one thing
_WORDS = re.compile(r"[a-z']{3,}")


def learned_of(ctx: ToolContext, name: str) -> dict:
    """What the agent has learned of `name` since the story began, in order: the facts and beliefs
    that name them, and the lines of theirs that moved its trust or warmth; and how it stands now.
    Without it an agent asking about someone only ever heard the writer's starting notes."""
    mine = Memory.objects.in_bank(ctx.bank).for_agent(ctx.agent).active().filter(turn__gt=0)
    if ctx.current_turn:
        mine = mine.filter(turn__lt=ctx.current_turn)
    facts = mine.filter(kind="semantic", category__in=["learned", "belief"], content__iregex=rf"\m{re.escape(name)}\M")
    moved = mine.filter(category="reaction", speaker=name)
    answer: dict = {}
    for key, rows in (("learned_since", facts), ("moved_by", moved)):
        latest = list(rows.order_by("-turn", "-id").only("id", "content", "turn")[:SINCE])[::-1]
        if latest:
            answer[key] = [{"content": m.content, "turn": str(m.turn), "memory_id": m.pk} for m in latest]
    if heard := heard_of(mine, name, ctx.window_turns):
        answer["heard"] = heard
    return answer | standing_of(ctx, name)


def heard_of(mine, name: str, window_turns) -> list[dict]:
    """What the agent heard from or about `name` that mattered most to it (the importance it gave
    each line), in the order it was said, none the window shows: where a run drew no facts from the
    lines (offline), or the judgement missed one, the lines still tell what was learned."""
    lines = (mine.filter(kind="episodic").exclude(category="day")
             .filter(Q(speaker=name) | Q(content__iregex=rf"\m{re.escape(name)}\M"))
             .exclude(turn__in=list(window_turns or ())))
    best = list(lines.order_by("-importance", "-turn").only("id", "content", "turn")[:SINCE])
    return [{"content": m.content, "turn": str(m.turn), "memory_id": m.pk}
            for m in sorted(best, key=lambda m: (m.turn, m.pk))]


def standing_of(ctx: ToolContext, name: str) -> dict:
    """How the agent stands with `name` now, and what moved it last (memory.living.relationships)."""
    row = standing(ctx.bank, ctx.agent, before_turn=ctx.current_turn).get((ctx.agent, name))
    if row is None:
        return {}
    return {"relationship": {"trust": row.trust, "affinity": row.affinity, "last_changed_turn": row.turn,
                             "why": row.reason}}


def said_once(results: list[RecallResult]) -> list[RecallResult]:
    """The writer's notes on someone, each said once: the public face and a note that words it again
    (most of the same words) are one note."""
    kept: list[tuple[RecallResult, set[str]]] = []
    for result in results:
        words = set(_WORDS.findall(result.memory.content.lower()))
        if not words or not any(len(words & seen) >= SAME_NOTE * min(len(words), len(seen)) for _r, seen in kept):
            kept.append((result, words))
    return [result for result, _words in kept]
