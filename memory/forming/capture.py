"""Episodic capture: what an agent heard becomes its memory."""

from __future__ import annotations

import logging
import time
from itertools import groupby
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F

from memory.embedding.cache import embed_soon, embed_texts
from memory.embedding.errors import EmbeddingError
from memory.forming.distortion import TRAUMA_LINKS, Distortion, form, holds_trigger, trigger_pattern, triggers_for
from memory.forming.adaptive import duplicate_thresholds
from memory.forming.importance import (CONCERN_FLOOR, DUPLICATE_WINDOW_TURNS, CaptureFilters, Captured, Importance,
                                       Nearest, Skipped, concerns, heuristic_importance, llm_importance, nearest,
                                       profiles)
from memory.measuring import operations
from memory.living.after_turn import AfterTurn, judge_line
from memory.models import MAX_CONTENT_CHARS, Memory, MemoryBank
from memory.queue import queue
from memory.recalling.filters import EPISODE_WINDOW, episode_keys
from memory.recalling.held import judged_with
from memory.recalling.indexing import bank_index_wanted
from memory.recalling.scoring import initial_decay_rate
from memory.services.keys import keys_attach
from memory.services.memories import insert_keys, insert_memories
from memory.services.validation import validate_content


log = logging.getLogger(__name__)


def placeholder() -> list[float]:  # a line's vector while the embedder is down (never searched: the row is stale)
    return [1.0] + [0.0] * (settings.EMBEDDING_DIM - 1)


# The LLM scorer's time for one line, all listeners together: past it, the rest get the heuristic.
# It runs before the turn's transaction (capture_prepare), so no row lock waits on the model.
LLM_BUDGET_S = 10.0


@dataclass
class CapturePlan:
    """Everything capture decided for one line, before anything is written: the embedded line and
    its context keys, each listener's importance, and who does not keep it. capture_commit writes it."""

    bank: MemoryBank
    speaker: str
    turn: int
    content: str
    listeners: list[str]
    participants: list[str]
    vectors: dict[str, list[float]] = field(default_factory=dict)
    # Each listener's reply keys (memory.recalling.episode_keys): (text, the earlier lines it also keys).
    keys: dict[str, list[tuple[str, list[int]]]] = field(default_factory=dict)
    scores: dict[str, Importance] = field(default_factory=dict)
    skipped: list[Skipped] = field(default_factory=list)
    metadata: dict = field(default_factory=dict)
    prepare_ms: float = 0.0  # capture_prepare's own time, the LLM scorer's calls excluded
    model_ms: float = 0.0  # those calls' time
    # Distortion filters (memory.forming.distortion): a listener's own version of the line, with what it was,
    # and the earlier memories a trauma links the new one to.
    contents: dict[str, str] = field(default_factory=dict)
    distorted: dict[str, dict] = field(default_factory=dict)
    trauma_links: dict[str, list[int]] = field(default_factory=dict)
    after: AfterTurn | None = None  # the batched judgement (importance, relationships, facts), when asked
    reflect: dict[str, list[Memory]] = field(default_factory=dict)  # who the judgement asked to reflect, on what
    claims: list[str] = field(default_factory=list)  # what the listeners hold, for the line's stance on each
    secrets: list[str] = field(default_factory=list)  # the speaker's, for whether the line tells them
    before: tuple[str, ...] = ()  # what the speaker witnessed just before, in order: the judgement reads the line as a reply
    defer_keys: bool = False  # the context keys are embedded by a task after the commit
    keyword_only: bool = False  # the embedder was down: stored without vectors (stale), embedded when it is back
    once: bool = False  # the caller's commit happens once per line (a simulation's turn): no retry check
    location: str = ""  # where it was said (seed 001's episode metadata)
    judging: dict | None = None  # _judge's arguments until the vector is there (vector_at_commit)


def capture_prepare(*, bank: MemoryBank, speaker: str, text: str, turn: int, listeners: Iterable[str],
                    metadata: dict | None = None, scorer: str | None = None,
                    ask: Callable[[str], str] | None = None, filters: CaptureFilters | None = None,
                    defer_keys: bool = False, said: str = "said", once: bool = False,
                    distortions: list[Distortion] | None = None, rewrite: Callable[[str], str] | None = None,
                    batched: bool = False, reflect: dict[str, list[Memory]] | None = None,
                    claims: list[str] | None = None, secrets: list[str] | None = None, before: Iterable[str] = (),
                    location: str = "", vector_at_commit: bool = False) -> CapturePlan:
    """The slow half of capture (embedding, importance, filters; the LLM scorer's calls), outside any
    transaction. It only reads: a turn stores what it heard in one short transaction afterwards.

    defer_keys: the in-reply-to keys (half the embedding time of a line) are embedded by a task
    after the commit instead of now, so a simulation's turn does not wait for them. `said` is the
    verb of the stored line: "{speaker} {said}: {text}" ("whispered to Sam" for a whisper). once: the
    caller stores this line at most once (a simulation's turn commits with its line, under its claim),
    so capture_commit need not look for the copies of an earlier attempt. distortions (memory.forming.distortion):
    each listener's formation filters rewrite its copy (`rewrite`, a prompt → answer callable, asks a
    model; else the offline rule), its association filters link the copy to earlier trigger memories.
    batched: the LLM scorer asks once for every listener (memory.living.after_turn), relationships and facts
    included, instead of once per listener; its answer is `plan.after`. reflect: who is due to
    reflect, with the memories it reflects on; the same call asks for their insights (`plan.reflect`). claims: what those who
    hear it hold (beliefs); the same call says what the line does with each (`plan.after.stances`).
    secrets: the speaker's; the same call says which the line tells (`plan.after.revealed`). before: what
    the speaker witnessed just before, in order ("Jordan said: …", "*the phone buzzes*"): the call reads it as a reply.
    vector_at_commit: the line is encoded on a thread from here on, and capture_commit waits for it
    (then scores and filters): a caller with writes of its own between the two has them overlap the
    encode (a simulation's turn stores its reply meanwhile)."""
    # Long on purpose: the steps before the turn's transaction in the order they must run, seen at once.
    started = time.perf_counter()
    # An answer that comes at once (a replay's rules) leaves nothing to encode behind: aside, the
    # encode would only share the two cores with the caller (unless vector_at_commit: its writes).
    waits = getattr(ask, "waits", True)
    clock = _ModelClock()
    ask, rewrite = clock.timed(ask), clock.timed(rewrite)
    content = validate_content(_line(speaker, text, said))
    listeners = list(dict.fromkeys(name for name in listeners if name))
    plan = CapturePlan(bank=bank, speaker=speaker, turn=turn, content=content, listeners=listeners,
                       participants=list(dict.fromkeys([speaker, *listeners])), metadata=dict(metadata or {}),
                       defer_keys=defer_keys, once=once, reflect=dict(reflect or {}) if batched else {},
                       claims=list(claims or []) if batched else [], secrets=list(secrets or []) if batched else [],
                       before=tuple(before) if batched else (), location=location[:200])
    # A retried turn stores nothing twice: capture_commit skips the listeners that already hold the
    # line (scoring them again here costs less than a query on every first attempt).
    if listeners and settings.RETRIEVAL_CONTEXT_KEYS and not defer_keys:
        earlier = earlier_lines(bank.pk, listeners, turn)
        plan.keys = {agent: episode_keys(content, lines) for agent, lines in earlier.items()}
    judged = batched and scorer == "llm" and ask is not None and any(name != speaker for name in listeners)
    if judged and content and waits:
        embed_soon([content])  # the line is encoded on its own thread while the model judges it
    if distortions:
        _distort(plan, distortions, rewrite)
    # The vector is waited for at the commit, the caller's own writes done meanwhile, unless a model
    # is asked per listener once it is there (that call must not hold the caller's transaction).
    later = vector_at_commit and not (scorer == "llm" and ask is not None and not batched)
    if later and content:
        embed_soon(_texts(plan))
    if judged:
        plan.after = _judge_batched(plan, ask)  # needs no vector: the listeners' identity and goals
    plan.judging = dict(scorer=scorer, ask=ask, filters=filters or CaptureFilters(), batched=batched)
    if not later:
        _vector_and_verdicts(plan)
    plan.prepare_ms, plan.model_ms = (time.perf_counter() - started - clock.seconds) * 1000, clock.seconds * 1000
    return plan


def _line(speaker: str, text: str, said: str) -> str:
    return f"{speaker} {said}: {text.strip()}" if text and text.strip() else ""


def capture_soon(*, speaker: str, text: str, said: str = "said") -> None:
    """Start encoding the line capture_prepare will store (its arguments), on a thread: the reads a
    caller makes before it (who reflects, what the listeners hold) then overlap the encode."""
    content = _line(speaker, text, said)
    if content and len(content) <= MAX_CONTENT_CHARS:
        embed_soon([content])


class _ModelClock:
    """Seconds spent waiting for a model (the LLM scorer, a rewrite): the model's time, not memory's."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def timed(self, model: Callable[[str], str] | None) -> Callable[[str], str] | None:
        if model is None:
            return None

        def call(prompt: str) -> str:
            before = time.perf_counter()
            try:
                return model(prompt)
            finally:
                self.seconds += time.perf_counter() - before
        return call


def _distort(plan: CapturePlan, distortions: list[Distortion], rewrite: Callable[[str], str] | None) -> None:
    """Each listener's formation filters rewrite its copy; its association filters link the copy to
    the earlier memories that hold its trauma's words."""
    for name in plan.listeners:
        formed = form(plan.content, agent=name, speaker=plan.speaker, filters=distortions, rewrite=rewrite)
        if formed is not None:
            plan.contents[name] = validate_content(formed.content)
            plan.distorted[name] = formed.metadata
        words = triggers_for(name, distortions)
        held = holds_trigger(plan.contents.get(name, plan.content), words) if words else []
        if held:
            plan.trauma_links[name] = list(
                Memory.objects.in_bank(plan.bank).active().filter(agent=name, content__iregex=trigger_pattern(words))
                .exclude(turn=plan.turn).order_by(F("turn").desc(nulls_last=True), "-id")  # the latest lines first, the sheet after
                .values_list("id", flat=True)[:TRAUMA_LINKS])
            plan.distorted[name] = {**plan.distorted.get(name, {}), "association": {
                "filter": f"trauma ({', '.join(words)})", "triggers": held, "linked": plan.trauma_links[name]}}


def _texts(plan: CapturePlan) -> list[str]:
    texts = list(dict.fromkeys([plan.content, *(text for keys in plan.keys.values() for text, _ids in keys)]))
    return texts + [text for text in dict.fromkeys(plan.contents.values()) if text not in texts]


def _vector_and_verdicts(plan: CapturePlan) -> None:
    """The line's vectors, then what they decide: each listener's importance and the filters' verdicts."""
    judging, plan.judging = plan.judging, None
    if judging is None:
        return
    _embed(plan)
    plan.scores, plan.skipped = _judge(bank=plan.bank, speaker=plan.speaker, content=plan.content,
                                       vector=plan.vectors.get(plan.content), turn=plan.turn, names=plan.listeners,
                                       after=plan.after, **judging)


def _embed(plan: CapturePlan) -> None:
    """The line, its keys and the listeners' own versions, in one model call."""
    texts = _texts(plan)
    try:
        plan.vectors = dict(zip(texts, embed_texts(texts)))
    except EmbeddingError:
        # Degraded mode: the line is still remembered, without its vector (out of vector search, like
        # an edited memory) until memory.tasks.reembed_stale_task runs once the embedder is back.
        plan.keyword_only, plan.keys = True, {}


@transaction.atomic(savepoint=False)  # inside a turn's transaction: no savepoint's two round trips
def capture_commit(plan: CapturePlan) -> Captured:
    """Write what capture_prepare decided: one memory per listener that keeps the line."""
    _vector_and_verdicts(plan)  # vector_at_commit: the encode started in capture_prepare, finished here
    existing = {} if plan.once else _existing(plan)
    dropped = {s.agent for s in plan.skipped}
    new = []
    for name in plan.listeners:
        if name in existing or name in dropped:
            continue
        data = dict(plan.metadata)
        if name in plan.scores:
            data["importance"] = plan.scores[name].as_metadata()
        if name in plan.distorted:
            data["distortion"] = plan.distorted[name]
        content = plan.contents.get(name, plan.content)
        if plan.keyword_only:
            data["keyword_only"] = True
        new.append(Memory(
            bank=plan.bank, agent=name, kind=Memory.Kind.EPISODIC, category="dialogue", speaker=plan.speaker,
            turn=plan.turn, content=content, location=plan.location,
            embedding=plan.vectors[content] if content in plan.vectors else placeholder(),
            embedding_stale=content not in plan.vectors, participants=plan.participants, source=Memory.Source.EARNED,
            importance=plan.scores[name].score if name in plan.scores else 5.0, metadata=data,
            decay_rate=initial_decay_rate(Memory.Kind.EPISODIC, plan.scores[name].score if name in plan.scores else 5.0),
        ))
    insert_memories(new)  # vectors in binary (bulk_create formats them as text)
    # Each key leads to the new line and to the earlier lines in it: a line is also found by what
    # it was answered with.
    _insert_keys([(pk, text) for m in new for text, earlier in plan.keys.get(m.agent, []) if text in plan.vectors
                  for pk in (m.pk, *earlier)], plan.vectors)
    if plan.defer_keys and new and settings.RETRIEVAL_CONTEXT_KEYS and not plan.keyword_only:
        ids = [m.pk for m in new]
        transaction.on_commit(lambda: _queue_keys(ids))
    links = Memory.evidence.through  # a trauma's links, both ways (as associate_memories makes them)
    links.objects.bulk_create(
        [links(from_memory_id=m.pk, to_memory_id=other) for m in new for other in plan.trauma_links.get(m.agent, [])]
        + [links(from_memory_id=other, to_memory_id=m.pk) for m in new for other in plan.trauma_links.get(m.agent, [])],
        ignore_conflicts=True)
    by_agent = existing | {m.agent: m for m in new}
    operations.captured(len(new), [s.reason for s in plan.skipped])
    if new:
        bank_index_wanted(plan.bank.pk, added=len(new))
    return Captured([by_agent[name] for name in plan.listeners if name in by_agent], plan.skipped)


def earlier_lines(bank_id: int, agents: list[str], turn: int) -> dict[str, list[tuple[int, str]]]:
    """Each agent's episodic lines before this turn that its reply keys take in (the latest first,
    EPISODE_WINDOW − 1 of them): one statement for every listener."""
    with connection.cursor() as cursor:
        # A LATERAL walk per agent, newest first: a few rows each, however long the run.
        cursor.execute(
            "SELECT a.agent, m.id, m.content FROM unnest(%s::text[]) a(agent) CROSS JOIN LATERAL "
            "(SELECT id, content, turn FROM memory_memory m WHERE m.bank_id = %s AND m.kind = 'episodic' "
            "AND m.agent = a.agent AND m.turn < %s ORDER BY m.turn DESC, m.id DESC LIMIT %s) m "
            "ORDER BY a.agent, m.turn DESC, m.id DESC", [list(agents), bank_id, turn, EPISODE_WINDOW - 1])
        earlier: dict[str, list[tuple[int, str]]] = {}
        for agent, pk, content in cursor.fetchall():
            earlier.setdefault(agent, []).append((pk, content))
    return earlier


def memory_keys_add(*, memory_ids: list[int]) -> int:
    """The reply keys of these episodic memories, made after the fact (defer_keys), as
    capture_prepare would have (memory.recalling.episode_keys): the pair of the listener's line
    before and this one, the window of its last three lines; each also a key of the earlier lines
    in it (found by what they were answered with). Returns the lines keyed."""
    memories = list(Memory.objects.filter(pk__in=memory_ids, kind=Memory.Kind.EPISODIC, turn__isnull=False))
    keyed = []  # (memory, its keys)
    # One query per line (its listeners' copies share bank and turn), as capture_prepare does it.
    for (bank_id, turn), copies in groupby(sorted(memories, key=lambda m: (m.bank_id, m.turn, m.agent)),
                                           key=lambda m: (m.bank_id, m.turn)):
        copies = list(copies)
        earlier = earlier_lines(bank_id, [m.agent for m in copies], turn)
        keyed += [(m, keys) for m in copies if (keys := episode_keys(m.content, earlier.get(m.agent, [])))]
    keyed_ids = keys_attach(pairs=[(pk, text) for m, keys in keyed for text, earlier in keys for pk in (m.pk, *earlier)])
    return sum(1 for m, _keys in keyed if m.pk in keyed_ids)


def _queue_keys(memory_ids: list[int]) -> None:
    # No broker: the lines are kept, only found a little less well by what they answer.
    queue("memory_keys_task", memory_ids, failure=f"could not queue the context keys of memories {memory_ids}")


def remember_utterance(**kwargs) -> Captured:
    """Seed 000's episodic capture: "{speaker} said: {text}", once per listener, with turn and speaker.

    Takes capture_prepare's arguments. scorer "heuristic" or "llm" (with `ask`, a prompt → answer
    callable) scores each copy (memory.forming.importance; stored in importance and metadata["importance"]);
    None keeps the flat 5.0 (evaluation and benchmarks compare retrieval, not scoring). `filters`
    (seed 003) may leave a listener without the line: the answer lists the kept memories and, in
    `.skipped`, who did not keep it and why.

    With RETRIEVAL_CONTEXT_KEYS each new copy also gets reply keys (memory.recalling.episode_keys):
    the listener's previous line and this one, embedded together, and its last three lines, so a
    line that only makes sense as a reply ("Yes, last Sunday!") is found by what it answers, and by
    what answered it (evaluate_retrieval: docs/memory.md).
    """
    return capture_commit(capture_prepare(**kwargs))


def _existing(plan: CapturePlan) -> dict[str, Memory]:
    return {
        m.agent: m
        for m in Memory.objects.in_bank(plan.bank).filter(
            kind=Memory.Kind.EPISODIC, turn=plan.turn, speaker=plan.speaker,
            content__in=[plan.content, *plan.contents.values()],
            agent__in=plan.listeners,
        )
    }


def _judge_batched(plan: CapturePlan, ask) -> AfterTurn:
    """The model's one call after the line (memory.living.after_turn): every listener's importance,
    relationships and facts, the due agents' insights, the line's stance on the claims held."""
    known = profiles(bank=plan.bank, agents=plan.listeners)
    return judge_line(speaker=plan.speaker, content=plan.content, turn=plan.turn,
                      profiles={name: known.get(name, "") for name in plan.listeners}, ask=ask,
                      reflect={agent: [m.content for m in pool] for agent, pool in plan.reflect.items()},
                      claims=plan.claims, secrets=plan.secrets, before=plan.before, took=plan.contents,
                      **judged_with(plan.bank.pk, plan.speaker, plan.listeners, bool(plan.claims), list(plan.reflect)))


def _judge(*, bank: MemoryBank, speaker: str, content: str, vector, turn: int, names: list[str],
           scorer: str | None, ask, filters: CaptureFilters, batched: bool = False,
           after: AfterTurn | None = None) -> tuple[dict[str, Importance], list[Skipped]]:
    """Each listener's importance and the filters' verdicts. Batched, `after` is the model's one call
    for every listener (_judge_batched); without it (a line nobody else heard) the rule scores it."""
    if not names or (scorer is None and not filters.importance_floor and filters.duplicate_threshold is None
                     and not filters.only_concerning):
        return {}, []
    # Without a vector (the embedder is down) nothing is near: no duplicate, no "concerns me" test.
    near = nearest(bank=bank, agents=names, vector=vector, turn=turn) if vector is not None else {}
    limits = duplicate_thresholds(bank_id=bank.pk, agents=names, turn=turn, since=turn - DUPLICATE_WINDOW_TURNS,
                                  ceiling=filters.duplicate_threshold) \
        if filters.adaptive_duplicates and filters.duplicate_threshold is not None and vector is not None else {}
    scores: dict[str, Importance] = {}
    skipped: list[Skipped] = []
    started = time.monotonic()
    for name in names:
        mine = near.get(name) or Nearest()
        if filters.duplicate_threshold is not None and mine.recent is not None \
                and mine.recent >= limits.get(name, filters.duplicate_threshold):
            skipped.append(Skipped(agent=name, reason="duplicate", content=content, similarity=round(mine.recent, 3),
                                   duplicate_of=mine.recent_id, threshold=limits.get(name)))
            continue
        concern = concerns(mine)
        # The speaker always keeps its own line: what it said is its business, whatever the topic.
        if filters.only_concerning and name != speaker and concern is not None and concern < CONCERN_FLOOR:
            skipped.append(Skipped(agent=name, reason="unconcerned", content=content, similarity=round(concern, 3)))
            continue
        if batched and scorer == "llm":
            score = heuristic_importance(text=content, near=mine)
            if after is None:
                score.scorer = "heuristic"  # nobody else heard it: the rule scores it, no call
            elif name in after.importance:
                score.score, score.scorer, score.raw = after.importance[name], "llm-batch", after.raw[:500]
            else:
                score.scorer, score.raw = "heuristic-fallback", (after.error or "no score for this listener")[:500]
        elif scorer == "llm" and ask is not None and time.monotonic() - started < LLM_BUDGET_S:
            score = llm_importance(name=name, text=content, near=mine, ask=ask)
        else:
            score = heuristic_importance(text=content, near=mine)
            if scorer == "llm":
                score.scorer = "heuristic-budget" if ask is not None else "heuristic"
        if filters.importance_floor and score.score < filters.importance_floor:
            skipped.append(Skipped(agent=name, reason="importance", content=content, importance=score.score))
            continue
        scores[name] = score
    return scores, skipped


def _insert_keys(pairs: list[tuple[int, str]], vectors: dict[str, object]) -> None:
    """Reply keys: (memory id, the key's text) pairs, each text's vector from vectors; the stored query
    is the text's first 300 characters, trimmed (MemoryKey.query's length)."""
    insert_keys([pk for pk, _ in pairs], [text[:300].strip() for _, text in pairs], [vectors[text] for _, text in pairs])
