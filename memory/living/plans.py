"""An agent's plan for the scene, and how its goals are going (seed 000's goal progress updates,
seed 003's plans: "goal-oriented action sequences… strategy adjustments").

- A plan (kind `plan`): made at an agent's first turn in a scene or story day from its goals and who
  is there; revised when a line it hears goes against one of its goals. A revised plan supersedes
  the one before (still searchable, its end dated). The header shows the current one.
- Goal progress (kind `goal_progress`): a heard line near one of the agent's goals that moved how it
  feels: "Closer to: keep the orchard whole — Rowan: “I'll sign.”", or "Further from: …".

With a model, the judgement of a line gives them in the same call (memory.living.after_turn's
"plans" and per-listener "progress"); without one, the rules below, from the goals a line touches
and the feeling it left (memory.living.mood). Both are memories like any other: retrieved, shown in
the bank, edited by the writer. Neither counts towards reflection nor mood (INNER_KINDS): what
they say was counted already, in the line they come from.
"""

from __future__ import annotations

import re

from memory.models import Memory, MemoryBank
from memory.services.memories import memory_create, metadata_with

PLAN_IMPORTANCE = 4.0  # a working note: at 6 it outranked the sheet on questions about oneself and the others
PROGRESS_IMPORTANCE = 6.5
PROGRESS_FLOOR = 0.2   # a line that moved the listener less than this did not move its goal
AGAINST = -0.3         # a line near a goal that leaves the listener this low overturns its plan
QUOTE_CHARS = 90
# A plan is asked for by what it is ("what am I going to do?" drew it into every question about what one does).
PLAN_KEYS = ["what is my plan?", "what is my strategy here?"]
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_ACTION = re.compile(r"\*[^*]*\*")


def current_plans(bank: MemoryBank | int, agents: list[str]) -> dict[str, Memory]:
    """Each agent's current plan: its latest active plan not superseded."""
    rows = (Memory.objects.filter(bank=bank, agent__in=agents, kind=Memory.Kind.PLAN, status=Memory.Status.ACTIVE,
                                  metadata__plan__isnull=False, metadata__superseded_turn__isnull=True)
            .order_by("agent", "-turn", "-id").distinct("agent"))
    return {m.agent: m for m in rows}


def _listing(names: list[str]) -> str:
    return " and ".join([", ".join(names[:-1]), names[-1]]) if len(names) > 1 else (names[0] if names else "")


def _lower_first(text: str) -> str:
    text = " ".join(text.split()).rstrip(".")
    return text[:1].lower() + text[1:] if text[:2] != text[:2].upper() else text


def plan_text(goals: list[str], others: list[str], place: str = "") -> str:
    """A short plan in the agent's words: its first goal, how it will go about it with those here,
    then its next goal."""
    goals = [_lower_first(g) for g in goals if g.strip()]
    if not goals:
        return ""
    where = f" at {place}" if place else ""
    first = f"My plan{where}: {goals[0]}."
    step = (f" First I'll find out where {_listing(others)} stand{'s' if len(others) == 1 else ''} on it"
            if others else " First I'll get my thoughts in order")
    then = f", then {goals[1]}." if len(goals) > 1 else ", and not let it drop."
    return first + step + then


def quote(text: str) -> str:
    """A line's sentence as a memory quotes it: stage business out, a clause or two."""
    said = " ".join(_ACTION.sub(" ", text).split())
    sentence = _SENTENCE.split(said)[0] if said else ""
    return sentence if len(sentence) <= QUOTE_CHARS else sentence[:QUOTE_CHARS].rsplit(" ", 1)[0] + "…"


def revised_text(goal: str, speaker: str, line: str, others: list[str]) -> str:
    """A plan changed by a line that went against a goal."""
    helpers = [o for o in others if o != speaker]
    way = f"win {_listing(helpers)} over first" if helpers else f"come back to it when {speaker} has cooled"
    return (f"Change of plan after {speaker} said “{quote(line)}”: I still mean to {_lower_first(goal)}, "
            f"but not head-on; I'll {way}.")


def plan_make(*, bank: MemoryBank, agent: str, turn: int, text: str, day: str = "", why: str = "",
              by: str = "rule") -> Memory | None:
    """The agent's plan from `turn` (the one before superseded). day: the story day or scene it is for;
    why: what overturned the one before; by: "rule" or "model"."""
    text = " ".join(str(text or "").split())[:600]
    if not text:
        return None
    # The plan before ends here (still searchable, its end dated), as memories_supersede marks a fact.
    (Memory.objects.filter(bank=bank, agent=agent, kind=Memory.Kind.PLAN, metadata__plan__isnull=False,
                           metadata__superseded_turn__isnull=True, turn__lte=turn)
     .update(metadata=metadata_with(superseded_turn=turn)))
    return memory_create(bank=bank, agent=agent, kind=Memory.Kind.PLAN, category="plan", content=text,
                         source=Memory.Source.EARNED, turn=turn, importance=PLAN_IMPORTANCE, keys=PLAN_KEYS,
                         metadata={"plan": {"day": day, "by": by, **({"why": why} if why else {})}})


def progress_text(goal: str, closer: bool, speaker: str, line: str) -> str:
    return f"{'Closer to' if closer else 'Further from'}: {_lower_first(goal)} — {speaker}: “{quote(line)}”"


def after_line(*, bank: MemoryBank, speaker: str, line: str, turn: int, memories: list[Memory],
               feelings: dict[str, float], others: dict[str, list[str]], judged_progress: dict | None = None,
               judged_plans: dict[str, str] | None = None) -> list[Memory]:
    """What a heard line does to each listener's goals and plan. feelings: how it left each listener
    (mood.feel_line); memories: their memories of it (related_goals set: the goals it touches);
    others: who else each listener is with; judged_*: the model's, where it judged the line
    ({name: (goal, closer)} and {name: new plan}). Returns the memories made."""
    made: list[Memory] = []
    plans = current_plans(bank, [m.agent for m in memories if m.agent != speaker])
    for memory in memories:
        name = memory.agent
        if name == speaker:
            continue
        feeling = feelings.get(name, 0.0)
        if judged_progress is not None:  # the model judged the line: what it left out did not move
            goal, closer = judged_progress.get(name, (None, False))
        elif memory.related_goals and abs(feeling) >= PROGRESS_FLOOR:
            goal, closer = memory.related_goals[0], feeling > 0
        else:
            goal = None
        if goal:
            made.append(memory_create(
                bank=bank, agent=name, kind=Memory.Kind.GOAL_PROGRESS, category="goal_progress",
                content=progress_text(goal, closer, speaker, line), source=Memory.Source.EARNED, turn=turn,
                importance=PROGRESS_IMPORTANCE, speaker=speaker, related_goals=[goal], evidence=[memory],
                emotional_valence=round(max(-1.0, min(1.0, feeling)), 3),
                metadata={"progress": {"goal": goal, "closer": bool(closer)}}))
        new = (judged_plans or {}).get(name) if judged_plans is not None else None
        if new is None and judged_plans is None and name in plans and memory.related_goals and feeling <= AGAINST:
            new = revised_text(memory.related_goals[0], speaker, line, others.get(name, []))
        if new:
            plan = plan_make(bank=bank, agent=name, turn=turn, text=new, day=plans[name].metadata["plan"].get("day", "")
                             if name in plans else "", why=f"{speaker}: “{quote(line)}”",
                             by="model" if judged_plans is not None else "rule")
            if plan is not None:
                made.append(plan)
    return made
