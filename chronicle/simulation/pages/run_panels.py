"""The run page's side panels, read in a few bounded queries whatever the run's length: how each one
stands with the others (Relationships) and who holds the planted beliefs (Who believes what).

A 5,000-turn run can hold thousands of relationship rows and beliefs whose histories have hundreds of
steps; the panels show each pair's chart at the chart's own resolution, its latest changes, and each
belief's first and latest steps, and say how many more there are.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from django.db import connection
from django.db.models import Count, F, Window
from django.db.models.functions import FirstValue, RowNumber

from chronicle.simulation.story.beliefs import SURE
from chronicle.simulation.run.models import Simulation
from memory.models import Memory, Relationship

CHART_WIDTH, CHART_HEIGHT, CHART_GUTTER = 360, 80, 24
CHANGES_SHOWN = 20  # a pair's latest changes listed under its chart
EXACT_STEPS = 2  # a chart column (one SVG unit) with up to this many changes draws each (more: 4 points, no more)
HISTORY_SHOWN = 12  # a belief's steps listed: its first, then the latest


@dataclass
class PairChart:
    agent: str
    other: str
    trust: float
    affinity: float
    trust_points: str
    affinity_points: str
    changes: list[dict]  # the latest CHANGES_SHOWN, oldest first
    earlier: int = 0  # changes before those, drawn but not listed
    first_turn: int | None = None  # the turn of the first of them
    width, height, gutter = CHART_WIDTH, CHART_HEIGHT, CHART_GUTTER

    @property
    def zero_y(self) -> float:
        return CHART_HEIGHT / 2


# Each pair's changes by chart column (one SVG unit of x: a 5,000-turn run has 15 turns in one): a
# column with few changes brings each (drawn exactly), a busier one its first and last turn, its
# lowest, highest and last values (drawn as one upright stroke, the same to the eye). The last turn is
# counted once (MATERIALIZED): inlined, a planner without statistics counted it again for every row.
COLUMNS_SQL = """
    WITH span AS MATERIALIZED (SELECT GREATEST(%(turns)s, max(turn)) AS last FROM {table} WHERE bank_id = %(bank)s)
    SELECT r.agent, r.other, floor(%(span)s::float * LEAST(r.turn, s.last) / GREATEST(s.last, 1)) AS col, s.last,
           count(*), min(r.turn), max(r.turn), min(r.trust), max(r.trust), min(r.affinity), max(r.affinity),
           (array_agg(r.trust ORDER BY r.turn DESC, r.id DESC))[1], (array_agg(r.affinity ORDER BY r.turn DESC, r.id DESC))[1],
           CASE WHEN count(*) <= %(exact)s
                THEN array_agg(ARRAY[r.turn, r.trust, r.affinity] ORDER BY r.turn, r.id) END
    FROM {table} r CROSS JOIN span s
    WHERE r.bank_id = %(bank)s
    GROUP BY r.agent, r.other, col, s.last
    ORDER BY r.agent, r.other, col"""


def relationship_charts(simulation: Simulation) -> list[PairChart]:
    """Each pair whose standing changed (agent → other): trust and affinity as step lines from 0 at
    the start to the last turn, −1 at the bottom, +1 at the top, and the latest changes that moved them."""
    if simulation.bank_id is None:
        return []
    span = CHART_WIDTH - CHART_GUTTER
    with connection.cursor() as cursor:
        cursor.execute(COLUMNS_SQL.format(table=Relationship._meta.db_table),
                       {"bank": simulation.bank_id, "turns": simulation.max_turns, "span": span,
                        "exact": EXACT_STEPS})
        rows = cursor.fetchall()
    if not rows:
        return []
    last = max(rows[0][3] or 1, 1)

    def x(turn: int) -> float:
        return round(CHART_GUTTER + span * min(turn, last) / last, 1)

    def y(value: float) -> float:
        return round(CHART_HEIGHT / 2 - value * (CHART_HEIGHT / 2 - 4), 1)

    lines: dict[tuple[str, str], _Line] = {}
    for agent, other, _col, _last, _n, first, final, t_lo, t_hi, a_lo, a_hi, t_last, a_last, steps in rows:
        line = lines.setdefault((agent, other), _Line(trust=[(x(0), y(0.0))], affinity=[(x(0), y(0.0))]))
        if steps is not None:  # each change: across at the old value, then up or down to the new one
            for turn, trust, affinity in steps:
                line.trust += [(x(turn), y(line.trust_now)), (x(turn), y(trust))]
                line.affinity += [(x(turn), y(line.affinity_now)), (x(turn), y(affinity))]
                line.trust_now, line.affinity_now = trust, affinity
        else:  # many changes within one unit of x: one upright stroke through all they reached
            line.trust += [(x(first), y(line.trust_now)), (x(first), y(t_lo)), (x(first), y(t_hi)), (x(final), y(t_last))]
            line.affinity += [(x(first), y(line.affinity_now)), (x(first), y(a_lo)), (x(first), y(a_hi)),
                              (x(final), y(a_last))]
            line.trust_now, line.affinity_now = t_last, a_last
    listed = _latest_changes(simulation.bank_id)
    charts = []
    for (agent, other), line in lines.items():
        line.trust.append((x(last), y(line.trust_now)))
        line.affinity.append((x(last), y(line.affinity_now)))
        changes = listed.get((agent, other), [])
        earlier = changes[0]["all"] - len(changes) if changes else 0
        charts.append(PairChart(
            agent=agent, other=other, trust=line.trust_now, affinity=line.affinity_now,
            trust_points=" ".join(f"{a},{b}" for a, b in line.trust),
            affinity_points=" ".join(f"{a},{b}" for a, b in line.affinity),
            changes=changes, earlier=earlier, first_turn=changes[0]["first"] if earlier else None))
    return charts


@dataclass
class _Line:
    """A pair's two step lines as they are drawn, and where each stands so far."""
    trust: list[tuple[float, float]]
    affinity: list[tuple[float, float]]
    trust_now: float = 0.0
    affinity_now: float = 0.0


def _latest_changes(bank_id: int) -> dict[tuple[str, str], list[dict]]:
    """Each pair's latest CHANGES_SHOWN changes, oldest first, each with how many the pair has in all."""
    pair = [F("agent"), F("other")]
    rows = (Relationship.objects.filter(bank_id=bank_id)
            .annotate(rank=Window(RowNumber(), partition_by=pair, order_by=[F("turn").desc(), F("id").desc()]),
                      all=Window(Count("id"), partition_by=pair),
                      first=Window(FirstValue("turn"), partition_by=pair, order_by=[F("turn").asc(), F("id").asc()]))
            .filter(rank__lte=CHANGES_SHOWN).order_by("agent", "other", "turn", "id")
            .values("agent", "other", "turn", "trust_change", "affinity_change", "reason", "evidence_id", "all", "first"))
    by_pair: dict[tuple[str, str], list[dict]] = {}
    for row in rows:
        by_pair.setdefault((row["agent"], row["other"]), []).append(
            {"turn": row["turn"], "trust": row["trust_change"], "affinity": row["affinity_change"],
             "reason": row["reason"], "memory_id": row["evidence_id"], "all": row["all"], "first": row["first"]})
    return by_pair


# The belief memories with their histories cut in the database: the first step (how the belief
# reached its holder) and the latest, and how many there are in all.
BELIEFS_SQL = """
    SELECT id, agent, turn, (metadata -> 'belief') - 'history', h.steps,
           CASE WHEN %(shown)s::int IS NULL OR h.steps <= %(shown)s::int THEN h.history
                ELSE jsonb_build_array(h.history -> 0)
                     || jsonb_path_query_array(h.history, '$[last - $n to last]', jsonb_build_object('n', %(shown)s::int - 2))
           END
    FROM {table} m
    CROSS JOIN LATERAL (SELECT CASE WHEN jsonb_typeof(m.metadata #> '{{belief,history}}') = 'array'
                                    THEN m.metadata #> '{{belief,history}}' ELSE '[]'::jsonb END AS history) hh
    CROSS JOIN LATERAL (SELECT hh.history, jsonb_array_length(hh.history) AS steps) h
    WHERE bank_id = %(bank)s AND status = 'active' AND category = 'belief' AND metadata ? 'belief'
    ORDER BY turn, id"""


def who_believes(simulation, *, shown: int | None = None) -> list[dict]:
    """Per planted claim, everyone who holds a belief about it: how it reached them, how sure they
    are now, whether they heard it denied, and its history over the turns (`shown`: its first step
    and the latest, `earlier` saying how many between are left out; None: every step)."""
    if simulation.bank_id is None:
        return []
    with connection.cursor() as cursor:
        cursor.execute(BELIEFS_SQL.format(table=Memory._meta.db_table), {"bank": simulation.bank_id, "shown": shown})
        rows = cursor.fetchall()
    claims: dict[int, dict] = {}
    for pk, agent, turn, data, steps, history in rows:
        # Django leaves jsonb undecoded on a raw cursor (its JSONField decodes its own columns).
        data, history = (json.loads(v) if isinstance(v, str) else v for v in (data, history))
        claim = claims.setdefault(data["id"], {"claim": data["claim"], "true": data["true"], "holders": []})
        history = history or [{"turn": turn, "confidence": data["confidence"], "source_chain": data["source_chain"],
                               "stance": "asserts"}]
        claim["holders"].append({"holder": agent, "source_chain": data["source_chain"],
                                 "confidence": data["confidence"], "turn": turn, "memory_id": pk,
                                 "stance": data.get("stance") or "asserts", "disputed": data.get("disputed"),
                                 "history": history, "earlier": max(steps - len(history), 0)})
    return [claims[key] for key in sorted(claims)]


def beliefs_as_shown(claims: list[dict]) -> list[dict]:
    """who_believes as the run page reads it: each claim *held by* those who hold it now and *heard,
    not held, by* the rest; a holder's "disputed" badge only if they ever held it; each step marked
    where a confidence figure would mislead (someone who never held it, hearing it denied)."""
    shown = []
    for claim in claims:
        holders = []
        for h in claim["holders"]:
            history = _told_again([dict(step) for step in h["history"]])
            ever_held = any(float(step.get("confidence") or 0) > 0 for step in history)
            holders.append({**h, "history": history, "holds": holds(h["stance"], h["confidence"]),
                            "show_disputed": bool(h["disputed"]) and ever_held})
        shown.append({**claim, "holders": holders,
                      "held_by": [h["holder"] for h in holders if h["holds"]],
                      "not_held_by": [h["holder"] for h in holders if not h["holds"]]})
    return shown


def holds(stance: str, confidence) -> bool:
    """Whether a holder believes the claim now: not denying it, and sure enough to pass it on as true
    (beliefs.SURE), so a claim heard denied down to 0.05 is not counted as held."""
    return stance != "denies" and float(confidence or 0) >= SURE


def _told_again(history: list[dict]) -> list[dict]:
    """Marks a denial heard by someone who already did not believe the claim (confidence 0 before
    it): the page says they heard it denied, with no confidence figure that reads as a drop."""
    before = None
    for step in history:
        now = float(step.get("confidence") or 0)
        step["again"] = step.get("stance") == "denies" and before is not None and before <= 0
        step["no_figure"] = step.get("stance") == "denies" and now <= 0 and (before is None or before <= 0)
        before = now
    return history
