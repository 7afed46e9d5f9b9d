"""Conversation sessions consolidated by story time (seed 003): an agent's lines heard within one
window of story time (an hour by default) are one session, and a session of several lines becomes
one summary memory, its lines kept as "consolidated" (undone like any consolidation).

Story time is the memories' own (Memory.story_time, the date the run's calendar gave their turn):
this module reads nothing of the calendar. A line without a story date is in no session; the last
session is left alone while it may still be going on (it ended less than a window before the
agent's latest dated memory, or after `before` when given).
"""

from __future__ import annotations

import logging
import time
from datetime import datetime, timedelta

from memory.living.consolidation import MAX_CANDIDATES, ConsolidationResult, Summarize, _summarise, summarizer
from memory.measuring import operations
from memory.models import Memory, MemoryBank

log = logging.getLogger(__name__)

SESSION_MINUTES = 60   # seed 003: 1-hour sessions
MIN_SESSION_LINES = 3  # seed 003 summarises "extended interactions": a remark and its answer stay as they are

# The summary's prompt: a conversation, not seed 004's "similar memories".
SESSION_PROMPT = ("You are summarising {n} lines of one conversation, in the order they were said, into a single "
                  "concise memory of it. Keep who said what that matters, decisions, promises and facts; drop "
                  "small talk.\n\nLines:\n{memories}\n\nAnswer with the summary only.")


def session_summarizer(ask, context: str = "") -> Summarize:
    """The model's summary of a session (SESSION_PROMPT), for consolidate_sessions' `summarize`."""
    return summarizer(ask, context=context, prompt=SESSION_PROMPT)


def sessions(memories: list[Memory], *, window: timedelta) -> list[list[Memory]]:
    """Dated memories in story order, cut into sessions: a session is every line within `window`
    of its first line's story time; the next line after that opens the next session."""
    found: list[list[Memory]] = []
    for memory in sorted(memories, key=lambda m: (m.story_time, m.turn or 0, m.pk)):
        if found and memory.story_time - found[-1][0].story_time < window:
            found[-1].append(memory)
        else:
            found.append([memory])
    return found


def session_summary(members: list[Memory]) -> str:
    """Offline: when and over which turns, how many lines, the first and the last."""
    turns = sorted(m.turn for m in members if m.turn is not None)
    span = f", turns {turns[0]}–{turns[-1]}" if turns and turns[0] != turns[-1] else ""
    when = members[0].story_time.strftime("%Y-%m-%d %H:%M")
    return (f"A conversation of {len(members)} lines ({when}{span}), from “{members[0].content}” "
            f"to “{members[-1].content}”")


def consolidate_sessions(bank: MemoryBank, agent: str, *, minutes: float = SESSION_MINUTES,
                         min_lines: int = MIN_SESSION_LINES, before: datetime | None = None,
                         tags: list[str] | None = None, summarize: Summarize | None = None) -> list[ConsolidationResult]:
    """The agent's ended conversation sessions of at least `min_lines` dialogue lines, each made one
    summary (the model's through `summarize`, prompt SESSION_PROMPT; else session_summary), as
    important as its most important line, its lines' tags merged."""
    started = time.perf_counter()
    window = timedelta(minutes=minutes)
    rows = (Memory.objects.in_bank(bank).for_agent(agent).active()
            .filter(kind=Memory.Kind.EPISODIC, category="dialogue", story_time__isnull=False, embedding_stale=False))
    if tags:
        rows = rows.filter(tags__overlap=list(tags))
    latest = Memory.objects.in_bank(bank).for_agent(agent).exclude(story_time=None).order_by("-story_time") \
        .values_list("story_time", flat=True).first()
    end = min(before, latest) if before is not None and latest is not None else (before or latest)
    if end is None:
        return []
    pool = list(rows.filter(story_time__lt=end).order_by("story_time", "turn", "id")[:MAX_CANDIDATES])
    ended = [s for s in sessions(pool, window=window) if s[0].story_time + window <= end]
    results = []
    for members in ended:
        if len(members) < min_lines:
            continue
        used: list[str] = []
        result = _summarise(bank, agent, members, _with_fallback(summarize, session_summary(members), used))
        made = result.summary.metadata["consolidation"]
        made["summarizer"] = result.summarizer = used[0]
        made["session"] = {"from": members[0].story_time.isoformat(), "to": members[-1].story_time.isoformat(),
                           "minutes": minutes}
        result.summary.story_time = members[-1].story_time
        result.summary.save(update_fields=["metadata", "story_time"])
        results.append(result)
    operations.consolidated(len(results), sum(len(r.originals) for r in results), seconds=time.perf_counter() - started)
    return results


def _with_fallback(summarize: Summarize | None, offline: str, used: list[str]) -> Summarize:
    """The model's summary when it gives one, else the session's offline one (not the similarity
    consolidation's "most central line": a conversation's lines are not alike); `used` gets which."""
    def write(contents: list[str]) -> str:
        if summarize is not None:
            try:
                text = (summarize(contents) or "").strip()
            except Exception:  # a model that fails must not lose the session: the offline summary stands in
                log.warning("session consolidation: summarize failed, using the offline summary", exc_info=True)
                text = ""
            if text:
                used.append("llm")
                return text
        used.append("extractive")
        return offline
    return write
