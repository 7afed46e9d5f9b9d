"""How much of a bank a filter's other conditions keep (tags, importance, turns, source…), by the
planner's own estimate: what decides whether such a filter walks the bank's HNSW index or scans.

memory_termstat counts a bank's memories by agent and kind exactly; the other conditions it cannot
count. Counting them means reading every row they match, which is the exact scan's own cost (a tag a
third of a 100,000-memory bank carries: ~30,000 rows, ~50 ms). The planner's statistics (the tags'
most common elements, the columns' histograms) estimate the share instead, for the price of
planning two statements; the estimate changes only when the table is analysed, so it is kept a
while in this process.
"""

from __future__ import annotations

import json
import time

from django.db import connection

from memory.recalling.filters import MemoryFilter

SHARE_TTL_S = 300.0  # statistics change when the table is analysed (autovacuum: minutes apart at best)
_shares: dict[tuple, tuple[float, float]] = {}


def other_conditions(flt: MemoryFilter) -> MemoryFilter:
    """The filter less what memory_termstat counts (agent, kinds, whose): what is left to estimate."""
    kept = {k: v for k, v in flt.to_dict().items() if k not in {"agent", "kinds", "shared"}}
    return MemoryFilter(**kept)


def _estimated_rows(where: str, params: list) -> float:
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (FORMAT JSON) SELECT 1 FROM memory_memory m WHERE {where}", params)
        plan = cursor.fetchone()[0]
    plan = json.loads(plan) if isinstance(plan, str) else plan
    return float(plan[0]["Plan"]["Plan Rows"])


def _key(flt: MemoryFilter, bank_id: int) -> tuple:
    # The whole filter: a tag one agent's memories never carry may be common in the bank.
    where, params = flt.where(bank_id)
    return bank_id, where, repr(params)


def kept_share(flt: MemoryFilter, bank_id: int) -> float:
    """The share of the bank's active memories the filter's other conditions keep (0…1): what a
    search with them saw (share_seen), else the planner's estimate, rows estimated with them over
    rows estimated without them (both the bank's, so an estimate of the bank's size that is off
    cancels out). The planner knows the table, not the bank: a tag only this bank uses is rarer to it
    than it is here, until a search has seen how many hold it."""
    key = _key(flt, bank_id)
    now = time.monotonic()
    hit = _shares.get(key)
    if hit is not None and now - hit[1] < SHARE_TTL_S:
        return hit[0]
    others = other_conditions(flt)
    where, params = others.where(bank_id)
    bank_where, bank_params = MemoryFilter(statuses=others.statuses).where(bank_id)
    share = min(1.0, _estimated_rows(where, params) / max(_estimated_rows(bank_where, bank_params), 1.0))
    _keep(key, share, now)
    return share


def share_seen(flt: MemoryFilter, bank_id: int, share: float) -> None:
    """What a search found the other conditions keep (the scan's count over termstat's), kept in
    place of the estimate."""
    _keep(_key(flt, bank_id), min(1.0, max(0.0, share)), time.monotonic())


def _keep(key: tuple, share: float, now: float) -> None:
    if len(_shares) > 10_000:
        _shares.clear()
    _shares[key] = (share, now)
