"""Seed 003's dynamic similarity threshold: how similar a line may be to a listener's recent
memories before it is a near-duplicate, set per listener from those memories themselves.

A fixed threshold treats every character alike. A listener whose recent memories are varied (a
market day, many people, many subjects) has each of them far from the others, so a line 0.9 like one
of them is a repeat; a listener in one long argument on one subject has every line close to the
last, and 0.9 is just the argument going on. So each listener's threshold is how close its recent
memories usually come to one another (the ADAPTIVE_QUANTILE of each one's similarity to its
nearest other), plus ADAPTIVE_MARGIN, kept between ADAPTIVE_FLOOR and the writer's threshold (the
most a kept line may resemble one): "too similar" means more alike than this listener's memories
usually are.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from memory.embedding.cache import vector_cursor

ADAPTIVE_FLOOR = 0.8      # never lower: below it, lines that only share a subject would be dropped
ADAPTIVE_CEILING = 0.97   # the writer's threshold when none is set (the near-duplicate filter's usual value)
ADAPTIVE_MARGIN = 0.05
ADAPTIVE_QUANTILE = 0.9
ADAPTIVE_SAMPLE = 40      # the listener's latest episodic memories of the window that set its threshold
ADAPTIVE_MIN_SAMPLE = 5   # with fewer, the writer's threshold stands (too few to say what is usual)


def duplicate_thresholds(*, bank_id: int, agents: Sequence[str], turn: int, since: int, ceiling: float) -> dict[str, float]:
    """Each listener's near-duplicate threshold (see the module): from its latest ADAPTIVE_SAMPLE
    episodic memories of turns since..turn − 1; the ceiling for one with fewer than ADAPTIVE_MIN_SAMPLE."""
    if not agents:
        return {}
    with vector_cursor() as cursor:
        cursor.execute(
            "SELECT agent, embedding FROM (SELECT m.agent, m.embedding, row_number() OVER (PARTITION BY m.agent "
            "ORDER BY m.turn DESC, m.id DESC) AS r FROM memory_memory m WHERE m.bank_id = %s AND m.agent = ANY(%s) "
            "AND m.status = 'active' AND m.kind = 'episodic' AND m.turn < %s AND m.turn >= %s "
            "AND NOT m.embedding_stale) s WHERE r <= %s",
            [bank_id, list(agents), turn, since, ADAPTIVE_SAMPLE], prepare=False, binary=True)
        rows = cursor.fetchall()
    vectors: dict[str, list] = {}
    for agent, vector in rows:
        vectors.setdefault(agent, []).append(np.asarray(vector, dtype=np.float32))
    return {agent: usual_closeness(vectors.get(agent, []), ceiling) for agent in agents}


def usual_closeness(vectors: list, ceiling: float) -> float:
    """The threshold from one listener's recent vectors (see the module)."""
    if len(vectors) < ADAPTIVE_MIN_SAMPLE:
        return ceiling
    units = np.array(vectors)
    units /= np.maximum(np.linalg.norm(units, axis=1, keepdims=True), 1e-12)
    sims = units @ units.T
    np.fill_diagonal(sims, -1.0)
    usual = float(np.quantile(sims.max(axis=1), ADAPTIVE_QUANTILE)) + ADAPTIVE_MARGIN
    return round(min(ceiling, max(ADAPTIVE_FLOOR, usual)), 3)
