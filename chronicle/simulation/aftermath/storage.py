"""What the capture filters kept and left out (seed 003's storage report): each turn records its
listeners' copies kept and filtered out, by agent and reason (storage_counts, in the turn's
context); storage_report sums a run's turns for the analytics page.

Seed 003 aims at a 60 % storage reduction from its filters; the report says how far a run's
settings went: filtered ÷ (kept + filtered), over the copies of the lines heard.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from django.db import connection

from chronicle.simulation.run.models import Turn

REASONS = ("duplicate", "importance", "unconcerned")  # the capture filters' reasons (memory's Skipped)
SEED_AIM = 0.6  # seed 003: 60 % fewer memories stored


def storage_counts(captured) -> dict:
    """The turn's context fields: copies kept by agent, and those left out by agent and reason."""
    left: dict[str, Counter] = {}
    for skipped in captured.skipped:
        left.setdefault(skipped.agent, Counter())[skipped.reason] += 1
    return {"kept_by": dict(Counter(m.agent for m in captured)),
            "not_kept_by": {agent: dict(reasons) for agent, reasons in left.items()}}


@dataclass
class AgentStorage:
    agent: str
    kept: int = 0
    filtered: dict[str, int] = field(default_factory=dict)

    @property
    def left_out(self) -> int:
        return sum(self.filtered.values())

    @property
    def reduction(self) -> float | None:
        """The share of its copies the filters left out; None when it heard nothing."""
        heard = self.kept + self.left_out
        return self.left_out / heard if heard else None


@dataclass
class StorageReport:
    agents: list[AgentStorage]
    total: AgentStorage
    reasons: tuple[str, ...] = REASONS
    aim: float = SEED_AIM


def storage_report(simulation, *, agent: str = "") -> StorageReport:
    """A run's turns summed (the done ones that recorded it): each agent's copies kept and left out
    by reason, and everyone's; `agent`: that one only."""
    table = Turn._meta.db_table
    with connection.cursor() as cursor:
        # Summed in the database: a 5,000-turn run's contexts stay there.
        cursor.execute(
            f"SELECT k.key, NULL, sum(k.value::int) FROM {table} t, jsonb_each_text(t.context->'kept_by') k "
            f"WHERE t.simulation_id = %s AND t.status = 'done' GROUP BY k.key "
            f"UNION ALL SELECT a.key, r.key, sum(r.value::int) FROM {table} t, "
            f"jsonb_each(t.context->'not_kept_by') a, jsonb_each_text(a.value) r "
            f"WHERE t.simulation_id = %s AND t.status = 'done' GROUP BY a.key, r.key",
            [simulation.pk, simulation.pk])
        rows = cursor.fetchall()
    by_agent: dict[str, AgentStorage] = {}
    for name, reason, n in rows:
        if agent and name != agent:
            continue
        row = by_agent.setdefault(name, AgentStorage(name))
        if reason is None:
            row.kept += int(n)
        else:
            row.filtered[reason] = row.filtered.get(reason, 0) + int(n)
    order = {name: i for i, name in enumerate(simulation.cast_names)}
    agents = sorted(by_agent.values(), key=lambda a: (order.get(a.agent, len(order)), a.agent))
    total = AgentStorage("everyone", kept=sum(a.kept for a in agents))
    for row in agents:
        for reason, n in row.filtered.items():
            total.filtered[reason] = total.filtered.get(reason, 0) + n
    return StorageReport(agents=agents, total=total)
