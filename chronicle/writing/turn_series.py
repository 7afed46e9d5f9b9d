"""The analytics page's per-turn series, added up by the database in columns of turns.

Up to MAX_COLUMNS turns a column is one turn, as before; a longer run's columns are spans of turns
("101–125") holding the mean per turn over the span (memories formed: their sum). Each series is one
grouped query, so a 10,000-turn run costs the page what a 200-turn run does.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import connection
from django.db.models import Count, F

from chronicle.simulation.models import Retrieval, Simulation, Turn

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


# Every call's sections of each done turn (jsonb); a turn without sections counts its prompt as
# "unsplit" (from before sections were recorded), and every turn its completion.
TOKENS_SQL = """
    SELECT t.index / %(width)s, s.value ->> 'kind', SUM(COALESCE((s.value ->> 'tokens')::float, 0))
    FROM {table} t
    CROSS JOIN LATERAL jsonb_array_elements(CASE WHEN jsonb_typeof(t.context -> 'calls') = 'array'
                                                 THEN t.context -> 'calls' ELSE '[]'::jsonb END) c
    CROSS JOIN LATERAL jsonb_array_elements(CASE WHEN jsonb_typeof(c.value -> 'sections') = 'array'
                                                 THEN c.value -> 'sections' ELSE '[]'::jsonb END) s
    WHERE t.simulation_id = %(run)s AND t.status = %(done)s AND (%(agent)s = '' OR t.agent = %(agent)s)
    GROUP BY 1, 2
    UNION ALL
    SELECT t.index / %(width)s, 'unsplit', SUM(COALESCE((t.usage ->> 'prompt_tokens')::float, 0))
    FROM {table} t
    WHERE t.simulation_id = %(run)s AND t.status = %(done)s AND (%(agent)s = '' OR t.agent = %(agent)s)
      -- silent: a turn whose context has no calls (a line written by hand) has no sections, not an error
      AND NOT COALESCE(jsonb_path_exists(t.context, 'strict $.calls[*].sections[*]', '{{}}', true), false)
    GROUP BY 1
    UNION ALL
    SELECT t.index / %(width)s, 'completion', SUM(COALESCE((t.usage ->> 'completion_tokens')::float, 0))
    FROM {table} t
    WHERE t.simulation_id = %(run)s AND t.status = %(done)s AND (%(agent)s = '' OR t.agent = %(agent)s)
    GROUP BY 1"""


def tokens(simulation: Simulation, cols: Columns, agent: str = "") -> dict[int, dict[str, float]]:
    sums: dict[int, dict[str, float]] = {}
    for key, kind, total in _grouped(TOKENS_SQL, simulation, cols, agent):
        if total:
            sums.setdefault(key, {})[kind or ""] = sums.get(key, {}).get(kind or "", 0) + float(total)
    return sums


# Each turn's time split: the model's (llm_ms; a turn from before it was recorded: its wall time
# less the memory's), the memory system's (memory_ms) and the rest.
LATENCY_SQL = """
    SELECT key, SUM(CASE WHEN llm IS NULL THEN GREATEST(wall - mem, 0) ELSE llm END),
           SUM(mem), SUM(CASE WHEN llm IS NULL THEN 0 ELSE GREATEST(wall - mem - llm, 0) END)
    FROM (SELECT t.index / %(width)s AS key, (t.context ->> 'llm_ms')::float AS llm,
                 COALESCE((t.context ->> 'memory_ms')::float, 0) AS mem,
                 COALESCE(EXTRACT(EPOCH FROM t.finished - t.started) * 1000, 0) AS wall
          FROM {table} t
          WHERE t.simulation_id = %(run)s AND t.status = %(done)s AND (%(agent)s = '' OR t.agent = %(agent)s)) turns
    GROUP BY key"""


def latency(simulation: Simulation, cols: Columns, agent: str = "") -> dict[int, dict[str, float]]:
    return {key: {"llm": float(llm or 0), "memory": float(mem or 0), "rest": float(rest or 0)}
            for key, llm, mem, rest in _grouped(LATENCY_SQL, simulation, cols, agent)}
