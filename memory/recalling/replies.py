"""A question found, its answer with it.

Asked "What are Melanie's pets called?", a search finds "Caroline said: What are their names?" before
"Melanie said: Luna and Oliver!": a question is worded like a question, and the line that answers it
often shares none of its words. So where a line that asks something is found, the next line, when
someone else said it and the agent heard it (and the window does not show it), comes with it as its
reply: in the same place of the list, taking no other memory's.
"""

from __future__ import annotations

import re
from dataclasses import replace

from memory.models import Memory
from memory.recalling.filters import Recalled, RecallResult
from memory.recalling.tool_types import restates_window

_SPOKEN = re.compile(r"^[^:]{1,80}? (?:said|whispered to [^:]{1,80}):\s*", re.DOTALL)
_ASIDE = re.compile(r"\*[^*]*\*|\[[^\]]*\]")  # stage business and a shared photo's caption ask nothing


def asks(content: str) -> bool:
    """Whether a line asks something (any of its sentences a question)."""
    spoken = _SPOKEN.match(content or "")
    return bool(spoken) and "?" in _ASIDE.sub(" ", content[spoken.end():])


def with_replies(ctx, results: list[RecallResult]) -> list[RecallResult]:
    """The results, each line that asks something with the line that answered it as its reply."""
    asked = {r.memory.turn: r.memory for r in results
             if r.memory.kind == "episodic" and r.memory.turn is not None and asks(r.memory.content)}
    if not asked:
        return results
    rows = (Memory.objects.in_bank(ctx.bank).for_agent(ctx.agent).active()
            .filter(kind="episodic", turn__in=[turn + 1 for turn in asked]).exclude(category="day")
            .order_by("turn", "id"))
    window = getattr(ctx, "window_turns", frozenset())
    found = {r.memory.pk for r in results}
    replies = {}
    for reply in rows:
        question = asked.get(reply.turn - 1)
        if question is not None and reply.turn - 1 not in replies and reply.speaker != question.speaker \
                and reply.pk not in found and not restates_window(reply, window):
            replies[reply.turn - 1] = reply
    if not replies:
        return results
    answered = [replace(r, reply=replies.get(r.memory.turn)) if asked.get(r.memory.turn) is r.memory else r
                for r in results]
    return Recalled(answered, path=getattr(results, "path", "exact"), in_front=getattr(results, "in_front", 0))
