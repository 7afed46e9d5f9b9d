"""Opinions (seed 004's fourth network, beside World, Experience and Observation): what an agent
thinks of a person, with a confidence that evidence moves. Kept apart from facts (semantic) and
from beliefs about claims (memory.recalling.held): an opinion is a judgement, not a report.

A line that moves how a listener stands with its speaker (memory.living.relationships) is evidence:
the listener's opinion of the speaker is written again from where it stands now (the model's words
where a model judged the line, else the standing in words), more sure when the line agrees with
what it thought, less when it goes against it. When the opinion's words change, the one before is
superseded and archived (kept in the bank as what it thought then, out of the searches); when they
do not, the one it holds is revised in place, its confidence and evidence moved (a long friendship
would otherwise leave hundreds of "What I think of …: some fondness" for every search to wade through).
"""

from __future__ import annotations

from memory.living.relationships import describe
from memory.models import Memory, MemoryBank, Relationship
from memory.services.memories import memory_create, metadata_with

FIRST = 0.4        # a first impression
AGREES = 0.15      # each line that bears it out
DISAGREES = 0.3    # a line that goes against it costs more than one that agrees gains
IMPORTANCE = 5.5
# Seed 004's four memory networks, by kind: what the HTTP API and the bank call each of Wonda's kinds.
SEED004_NETWORKS = {
    "world": ["semantic", "character", "character_knowledge", "scene"],
    "experience": ["episodic", "emotional", "action", "procedural", "plan", "goal_progress"],
    "opinion": ["opinion", "reflection", "metacognition"],
    "observation": ["observation"],
}


def certainty(confidence: float) -> str:
    if confidence >= 0.75:
        return "I'm sure of it now"
    if confidence >= 0.5:
        return "I'm fairly sure"
    return "a first impression"


def current(bank: MemoryBank | int, agent: str, of: str) -> Memory | None:
    return (Memory.objects.filter(bank=bank, agent=agent, kind=Memory.Kind.OPINION, about=of, status=Memory.Status.ACTIVE,
                                  metadata__superseded_turn__isnull=True).order_by("-turn", "-id").first())


def opinions_after_line(*, bank: MemoryBank, moved: list[Relationship], turn: int, memories: list[Memory] = (),
                        judged: dict[str, str] | None = None) -> list[Memory]:
    """Each moved listener's opinion of the speaker, written again (see the module). judged: the
    model's one sentence per listener, where it gave one. Returns the opinions made."""
    heard = {m.agent: m for m in memories}
    made = []
    for row in moved:
        sign = 1 if row.affinity_change + 0.5 * row.trust_change >= 0 else -1
        before = current(bank, row.agent, row.other)
        held = (before.metadata or {}).get("opinion", {}) if before is not None else {}
        if before is None:
            confidence, count = FIRST, 1
        else:
            step = AGREES if held.get("sign") == sign else -DISAGREES
            confidence, count = min(0.95, max(0.05, float(held.get("confidence", FIRST)) + step)), int(held.get("evidence", 0)) + 1
        said = " ".join(str((judged or {}).get(row.agent) or "").split())[:400]
        opinion = f"What I think of {row.other}: {said or describe(row)}."
        text = f"{opinion} {certainty(confidence)[0].upper()}{certainty(confidence)[1:]}."
        held_now = {"of": row.other, "confidence": round(confidence, 2), "evidence": count, "sign": sign,
                    "by": "model" if said else "rule"}
        if before is not None and before.content.startswith(opinion):
            made.append(_revised(before, text=text, held=held_now, turn=turn, evidence=heard.get(row.agent)))
            continue
        if before is not None:  # what it thought then: kept in the bank, out of the searches
            Memory.objects.filter(pk=before.pk).update(metadata=metadata_with(superseded_turn=turn),
                                                       status=Memory.Status.ARCHIVED)
        made.append(memory_create(
            bank=bank, agent=row.agent, kind=Memory.Kind.OPINION, category="opinion", about=row.other, content=text,
            source=Memory.Source.EARNED, turn=turn, importance=IMPORTANCE, speaker=row.other,
            evidence=[heard[row.agent]] if row.agent in heard else [],
            # No extra key: "what do I think of X?" is near every question naming X, so a rule's "some
            # fondness" took first place from the line or insight a question about X was after.
            metadata={"opinion": held_now}))
    return made


def _revised(memory: Memory, *, text: str, held: dict, turn: int, evidence: Memory | None) -> Memory:
    """The opinion it holds, in the same words, more or less sure: revised where it is (its vector
    stays: the words that carry its meaning did not change)."""
    memory.content = text
    memory.metadata = {**(memory.metadata or {}), "opinion": held, "revised_turn": turn}
    memory.save(update_fields=["content", "metadata", "updated_at"])
    if evidence is not None:
        memory.evidence.add(evidence)
    return memory
