"""The analytics page's per-turn series, added up by the database in columns of turns.

Up to MAX_COLUMNS turns a column is one turn, as before; a longer run's columns are spans of turns
("101–125") holding the mean per turn over the span (memories formed: their sum). Each series is
summed by a grouped query (tokens and time in one pass), so a 10,000-turn run costs the page the same
queries and rows as a 200-turn run.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import connection
from django.db.models import Count, F

from chronicle.simulation.run.models import Retrieval, Simulation, Turn

MAX_COLUMNS = 200


@dataclass(frozen=True)
class Columns:
    width: int  # turns a column spans
    keys: list[int]  # column keys (index // width) that hold a done turn, in order
    turns: dict[int, int]  # key → done turns in it

    def label(self, key: int) -> str:
        first = key * self.width + 1
        return str(first) if self.width == 1 else f"{first}–{first + self.width - 1}"

    @property
    def labels(self) -> list[str]:
        return [self.label(key) for key in self.keys]

    def means(self, sums: dict[int, dict[str, float]]) -> list[dict[str, float]]:
        """Each column's sums as means per turn (the same numbers when a column is one turn)."""
        return [{k: round(v / self.turns[key], 1) for k, v in sums.get(key, {}).items()} for key in self.keys]


def _done(simulation: Simulation, agent: str):
    done = Turn.objects.filter(simulation=simulation, status=Turn.Status.DONE)
    return done.filter(agent=agent) if agent else done


def columns(simulation: Simulation, agent: str = "") -> Columns:
    lines = (simulation.turns.order_by("-index").values_list("index", flat=True).first() or 0) + 1
    width = max(1, -(-lines // MAX_COLUMNS))
    rows = (_done(simulation, agent).order_by().annotate(key=F("index") / width).values("key")
            .annotate(n=Count("id")).values_list("key", "n"))
    turns = dict(rows)
    return Columns(width=width, keys=sorted(turns), turns=turns)


def tools(simulation: Simulation, cols: Columns, agent: str = "") -> dict[int, dict[str, float]]:
    rows = (Retrieval.objects.filter(turn__simulation=simulation, turn__status=Turn.Status.DONE)
            .filter(**({"agent": agent} if agent else {})).order_by()
            .annotate(key=F("turn__index") / cols.width).values("key", "tool").annotate(n=Count("id")))
    sums: dict[int, dict[str, float]] = {}
    for row in rows:
        sums.setdefault(row["key"], {})[row["tool"]] = row["n"]
    return sums


def _grouped(sql: str, simulation: Simulation, cols: Columns, agent: str) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(sql.format(table=Turn._meta.db_table),
                       {"width": cols.width, "run": simulation.pk, "done": Turn.Status.DONE, "agent": agent})
        return cursor.fetchall()


# One pass over the run's done turns (each turn's context read once) for two charts' series, as
# (column, series, sum) rows:
# - tokens: every call's sections of each turn by kind (jsonb); a turn without sections counts its
#   prompt as "unsplit" (from before sections were recorded), and every turn its completion;
# - time ("time:" series): the model's (llm_ms; a turn from before it was recorded: its wall time less
#   the memory's), the memory system's (memory_ms) and the rest.
SERIES_SQL = """
    SELECT t.index / %(width)s, x.series, SUM(x.value)
    FROM {table} t
    CROSS JOIN LATERAL (SELECT (t.context ->> 'llm_ms')::float AS llm,
                               COALESCE((t.context ->> 'memory_ms')::float, 0) AS mem,
                               COALESCE(EXTRACT(EPOCH FROM t.finished - t.started) * 1000, 0) AS wall,
                               CASE WHEN jsonb_typeof(t.context -> 'calls') = 'array'
                                    THEN t.context -> 'calls' ELSE '[]'::jsonb END AS calls) v
    CROSS JOIN LATERAL (
        SELECT s.value ->> 'kind', COALESCE((s.value ->> 'tokens')::float, 0)
        FROM jsonb_array_elements(v.calls) c
        CROSS JOIN LATERAL jsonb_array_elements(CASE WHEN jsonb_typeof(c.value -> 'sections') = 'array'
                                                     THEN c.value -> 'sections' ELSE '[]'::jsonb END) s
        UNION ALL
        SELECT 'unsplit', COALESCE((t.usage ->> 'prompt_tokens')::float, 0)
        -- silent: a turn whose context has no calls (a line written by hand) has no sections, not an error
        WHERE NOT COALESCE(jsonb_path_exists(t.context, 'strict $.calls[*].sections[*]', '{{}}', true), false)
        UNION ALL SELECT 'completion', COALESCE((t.usage ->> 'completion_tokens')::float, 0)
        UNION ALL SELECT 'time:llm', CASE WHEN v.llm IS NULL THEN GREATEST(v.wall - v.mem, 0) ELSE v.llm END
        UNION ALL SELECT 'time:memory', v.mem
        UNION ALL SELECT 'time:rest', CASE WHEN v.llm IS NULL THEN 0 ELSE GREATEST(v.wall - v.mem - v.llm, 0) END
    ) x(series, value)
    WHERE t.simulation_id = %(run)s AND t.status = %(done)s AND (%(agent)s = '' OR t.agent = %(agent)s)
    GROUP BY 1, 2"""


@dataclass(frozen=True)
class Series:
    tokens: dict[int, dict[str, float]]  # column key → section kind (and unsplit, completion) → tokens
    latency: dict[int, dict[str, float]]  # column key → llm, memory, rest → ms


def tokens_and_latency(simulation: Simulation, cols: Columns, agent: str = "") -> Series:
    tokens: dict[int, dict[str, float]] = {}
    latency: dict[int, dict[str, float]] = {}
    for key, series, total in _grouped(SERIES_SQL, simulation, cols, agent):
        if series and series.startswith("time:"):
            latency.setdefault(key, {"llm": 0.0, "memory": 0.0, "rest": 0.0})[series[5:]] = float(total or 0)
        elif total:
            tokens.setdefault(key, {})[series or ""] = tokens.get(key, {}).get(series or "", 0) + float(total)
    return Series(tokens=tokens, latency=latency)
