"""recall_facts: the facts an agent holds on a topic (lore, the writer's, what was learned or believed,
what it knows of others, insights) and the lines said on it, ranked together."""

from __future__ import annotations

from memory.recalling.confidence import calibrated
from memory.recalling.filters import MemoryFilter, Recalled, RecallResult
from memory.recalling.replies import with_replies
from memory.recalling.search import recall
from memory.recalling.tool_types import WITNESSED_KINDS, ToolContext, belief_of, entries, metadata_of
from memory.recalling.scoring import SIMILARITY

# recall_facts hands back a fact only when it is at least this likely to be about the topic (its
# calibrated confidence); below, it says there are none rather than padding with what is near.
FACT_CONFIDENCE_FLOOR = 0.1
# A line is handed back as saying something on the topic only when it matches it well: lines are
# many, and a near one is noise (what the briefing's "What this brings back" also asks of a line).
SAID_CONFIDENCE_FLOOR = 0.5


def recall_facts(ctx: ToolContext, args: dict):
    topic = args["topic"].strip()
    # Facts: lore, the writer's and what was learned or believed, what one knows of others, insights;
    # not the agent's own profile (query_self).
    flt = MemoryFilter(agent=ctx.agent, kinds=["semantic", "character_knowledge", "reflection"], shared=True)
    enhanced = ctx.enhanced(topic)
    # What the agent holds on the topic: its beliefs too, with whom it heard them from. confidence: the
    # probability that a memory this similar to the topic is one asked for (memory.recalling.confidence:
    # a logistic fit on locomo-dev), not the raw cosine; the floor goes before the window, so a fact on
    # screen is one the answer can say is there.
    results = ctx.recall_outside(lambda n: recall(ctx.bank, topic, filter=flt, k=n,
                                                  options=ctx.recall_options(enhance=enhanced)), 5, beliefs=False,
                                 keep=lambda r: calibrated(r.components[SIMILARITY]) >= FACT_CONFIDENCE_FLOOR)
    # What was said on it too: a fact the after-line judgement did not draw out (or an offline run,
    # which draws none) is still in the line that stated it, and a question found brings its answer.
    # Ranked with the facts by how likely each is to be about the topic, so a loose insight does not
    # push the line that says it out of the five.
    said_filter = MemoryFilter(agent=ctx.agent, kinds=list(WITNESSED_KINDS), shared=True)
    said = ctx.recall_outside(lambda n: recall(ctx.bank, topic, filter=said_filter, k=n,
                                               options=ctx.recall_options(enhance=enhanced)), 5,
                              keep=lambda r: calibrated(r.components[SIMILARITY]) >= SAID_CONFIDENCE_FLOOR)
    fact_ids = {r.memory.pk for r in results}
    found = Recalled(sorted([*results, *said], key=lambda r: -(r.components.get(SIMILARITY) or 0.0))[:5],
                     path=getattr(results, "path", "exact"),
                     in_front=getattr(results, "in_front", 0) + getattr(said, "in_front", 0))
    found = with_replies(ctx, found)
    facts = [_fact_entry(r, is_fact=r.memory.pk in fact_ids) for r in found]
    answer = {"topic": topic, "facts": facts}
    if not facts:
        answer["note"] = "No facts on this topic."
    return answer | metadata_of(found, enhanced), topic, flt, found


def _fact_entry(r: RecallResult, *, is_fact: bool) -> dict:
    """A fact as seed 001 gives it; a line said on the topic with when it was said and what answered it."""
    confidence = round(calibrated(r.components[SIMILARITY]), 4)
    if is_fact:
        return {"content": r.memory.content, "confidence": confidence, "memory_id": r.memory.pk} | belief_of(r.memory)
    return {k: v for k, v in entries([r], with_turn=True)[0].items() if k != "relevance"} | {"confidence": confidence}
