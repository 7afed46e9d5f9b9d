"""Questions anchored on an event: "what did Orla say the moment the power went out?", "what did
Declan do right after the wave took the bollards?". The event is found first (the agent's best
memory of it); the lines said around it are then searched for the question, and come first.
An anchor is a clause after the question's own words, so "When did she adopt the dog?" has none."""

from __future__ import annotations

import re
from datetime import timedelta

from django.db.models import Max, Min

from memory.models import Memory
from memory.recalling.filters import MemoryFilter
from memory.recalling.search import recall

_ANCHOR = re.compile(
    r"^(?P<ask>.{6,}?)\s+(?:on\s+)?(?P<how>right after|just after|soon after|shortly after|after|just before|right before|"
    r"before|the moment|as soon as|while|when|on the (?:morning|afternoon|evening|night|day)(?: (?:that|when|of))?|"
    r"the (?:morning|afternoon|evening|night|day)(?: (?:that|when|of))?)\s+(?P<event>.{6,}?)[?.!\s]*$",
    re.IGNORECASE)
# Turns around the event that a line "when" or "after" it may be said in: a reply comes a few lines on.
AROUND = {"before": (-8, 0), "after": (0, 8), "at": (-2, 5)}
EVENT_KINDS = ["episodic", "observation", "action"]
KEPT_AHEAD, ANCHORED = 3, 2  # query_memory: its own first three, then two of the lines around the event


def anchor_of(query: str) -> tuple[str, str] | None:
    """(how, event) of a question anchored on an event, or None: how is before, after, at or day."""
    match = _ANCHOR.match((query or "").strip())
    if not match:
        return None
    how = match.group("how").lower()
    kind = ("day" if re.search(r"morning|afternoon|evening|night|day", how)
            else "before" if "before" in how else "after" if "after" in how else "at")
    return kind, match.group("event")


def anchored_turns(ctx, query: str) -> tuple[int, int] | None:
    """The turns around the event a question is anchored on, as the agent remembers it; None when
    the question names none or the agent remembers no such event."""
    anchor = anchor_of(query)
    if anchor is None:
        return None
    how, event = anchor
    found = recall(ctx.bank, event, filter=MemoryFilter(agent=ctx.agent, kinds=EVENT_KINDS), k=1,
                   options=ctx.recall_options())
    if not found or found[0].memory.turn is None:
        return None
    memory = found[0].memory
    if how == "day" and memory.story_time is not None:  # "on the morning the ferry turned back": that story day
        day = memory.story_time.replace(hour=0, minute=0, second=0, microsecond=0)
        span = (Memory.objects.filter(bank=ctx.bank, agent__in=[ctx.agent, ""], turn__isnull=False,
                                      story_time__gte=day, story_time__lt=day + timedelta(days=1))
                .aggregate(first=Min("turn"), last=Max("turn")))
        if span["first"] is not None:
            return span["first"], span["last"]
    low, high = AROUND.get(how, AROUND["at"])
    return max(1, memory.turn + low), memory.turn + high
