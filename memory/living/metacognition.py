"""Metacognition (seed 003: "self-evaluation and strategy adjustment… goal prioritisation changes"):
beside each reflection, the agent's judgement of how its approach is working, a `metacognition`
memory resting on its plan and the progress it noted since (memory.living.plans).

With a model, the reflection's own answer gives it (the judgement of a line asks for an
"approach" with the insights, so no call is added); offline, a rule reads the balance of steps
closer and setbacks since the plan was made, and what that means for the goals: keep on, change
tack, or put another goal first. With no progress noted since the plan there is nothing to weigh,
and no metacognition is made.
"""

from __future__ import annotations

from memory.models import Memory, MemoryBank
from memory.services.memories import memory_create

IMPORTANCE = 5.0
HEAD = "How my approach is working"


def _goal(text: str) -> str:
    return " ".join(text.split()).rstrip(".")


def assessment(plan: Memory | None, progress: list[Memory]) -> str:
    """The offline judgement, in the agent's words, from its plan and the progress since."""
    if plan is None and not progress:
        return ""
    by_goal: dict[str, list[bool]] = {}
    for memory in progress:
        moved = (memory.metadata or {}).get("progress") or {}
        if moved.get("goal"):
            by_goal.setdefault(_goal(moved["goal"]), []).append(bool(moved.get("closer")))
    closer = sum(v for marks in by_goal.values() for v in marks)
    further = sum(not v for marks in by_goal.values() for v in marks)
    if not by_goal:
        # Nothing to weigh: no judgement to make (a note saying so only crowded questions about oneself).
        return ""
    worst = max(by_goal, key=lambda g: (sum(not v for v in by_goal[g]) - sum(by_goal[g]), g))
    best = max(by_goal, key=lambda g: (sum(by_goal[g]) - sum(not v for v in by_goal[g]), g))
    if further > closer:
        other = next((g for g in by_goal if g != worst and sum(by_goal[g]) > 0), "")
        shift = f" For now {other} is where I'm getting somewhere, so that comes first." if other else ""
        return (f"{HEAD}: not well. {worst[0].upper() + worst[1:]} keeps slipping ({further} setback"
                f"{'s' if further != 1 else ''} against {closer} step{'s' if closer != 1 else ''} forward), so pushing the same "
                f"way will not work; I should change tack.{shift}")
    return (f"{HEAD}: it's working. I'm {closer} step{'s' if closer != 1 else ''} closer to {best}"
            f"{f' against {further} setback' + ('s' if further != 1 else '') if further else ''}; I'll keep on as I am.")


def assess(*, bank: MemoryBank, agent: str, turn: int, said: str = "", reflections: list[Memory] = ()) -> Memory | None:
    """The agent's metacognition beside a reflection at `turn`: `said` (the model's, from the same
    answer as the insights) or the offline assessment. Its evidence: the plan, the progress, the insights."""
    plan = (Memory.objects.filter(bank=bank, agent=agent, kind=Memory.Kind.PLAN, status=Memory.Status.ACTIVE)
            .order_by("-turn", "-id").first())
    since = plan.turn if plan is not None and plan.turn is not None else 0
    progress = list(Memory.objects.filter(bank=bank, agent=agent, kind=Memory.Kind.GOAL_PROGRESS,
                                          status=Memory.Status.ACTIVE, turn__gte=since, turn__lte=turn).order_by("turn", "id"))
    text = " ".join(str(said or "").split())[:600] or assessment(plan, progress)
    if not text:
        return None
    evidence = [m for m in [plan, *progress, *reflections] if m is not None]
    return memory_create(bank=bank, agent=agent, kind=Memory.Kind.METACOGNITION, category="metacognition",
                         content=text, source=Memory.Source.REFLECTION, turn=turn, importance=IMPORTANCE,
                         evidence=evidence, keys=["how is my approach working?", "should I change my approach?"],
                         metadata={"metacognition": {"by": "model" if said else "rule", "closer": sum(
                             1 for m in progress if (m.metadata or {}).get("progress", {}).get("closer")),
                             "further": sum(1 for m in progress if not (m.metadata or {}).get("progress", {}).get("closer"))}})
