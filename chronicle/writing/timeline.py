"""The bank timeline: per agent and per turn, what its memory did — formed, reinforced, reflected,
consolidated, archived — as stacked bars (server-rendered SVG, no script) and a list.

Formed and reflected memories carry their turn. Reinforcement is the access log's turn. Consolidating
and archiving are not turn events (a worker or the writer does them, maybe after the run), so they
are placed at the last turn finished when they happened (updated_at against Turn.finished).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db import connection

from chronicle.simulation.run.models import Simulation, Turn
from chronicle.writing.charts import Bar
from memory.models import Memory, MemoryAccess

SERIES = [  # key, label, colour (the same in the chart, its legend and the list)
    ("formed", "formed", "#4c78a8"),
    ("reinforced", "reinforced", "#9fb6cd"),
    ("reflected", "reflected", "#8e44ad"),
    ("consolidated", "consolidated", "#e67e22"),
    ("archived", "archived", "#c0392b"),
]
WIDTH, HEIGHT, GUTTER = 720, 90, 28  # one agent's chart, in SVG units; GUTTER holds the y labels
MAX_COLUMNS = 200  # past this many turns a column spans several


@dataclass
class Lane:
    agent: str
    # series → counts: per column of turns for BY_COLUMN (formed, reinforced), else per turn (the list).
    counts: dict[str, dict[int, int]] = field(default_factory=lambda: {key: {} for key, _l, _c in SERIES})
    bars: list[Bar] = field(default_factory=list)

    def totals(self) -> list[tuple[str, str, int]]:
        return [(label, colour, sum(self.counts[key].values())) for key, label, colour in SERIES]


@dataclass
class Timeline:
    turns: int
    peak: int
    lanes: list[Lane]
    series = SERIES
    width, height, gutter = WIDTH, HEIGHT, GUTTER

    def events(self) -> list[dict]:
        """The list under the chart: the turns where an agent reflected, or memories were consolidated
        or archived (lines are kept and memories reinforced nearly every turn: the chart shows those)."""
        rows = []
        marked = {number for lane in self.lanes for key, _l, _c in SERIES[2:] for number in lane.counts[key]}
        for number in sorted(n for n in marked if 1 <= n <= self.turns):
            cells = []
            for lane in self.lanes:
                said = [f"{lane.counts[key][number]} {label}" for key, label, _c in SERIES[2:]
                        if lane.counts[key].get(number)]
                if said:
                    cells.append(f"{lane.agent}: {', '.join(said)}")
            if cells:
                rows.append({"turn": number, "events": cells})
        return rows


# Everything the timeline draws, counted by the database in one statement (it never sends a row per
# turn): the last turn it spans and so the width of its columns (MAX_COLUMNS at most); per agent, the
# lines formed and the recalls (the access log) per column; the reflections, and the memories
# consolidated or archived, per turn (the list under the chart names those turns). A consolidation or
# an archiving is placed at the last turn finished when it happened (turn 1 if none had): the turns'
# finish times and the memories' update times in one ordered stream, each memory taking the number of
# the turn before it.
TIMELINE_SQL = """
    WITH mine AS MATERIALIZED (
        SELECT id, agent, kind, source, status, turn, updated_at FROM {memory}
        WHERE bank_id = %(bank)s AND agent = ANY(%(names)s)),
    formed AS (SELECT agent, turn, count(*) AS n FROM mine WHERE source = 'earned' AND turn IS NOT NULL GROUP BY 1, 2),
    reflected AS (SELECT agent, turn, count(*) AS n FROM mine WHERE kind = 'reflection' AND turn IS NOT NULL
                  GROUP BY 1, 2),
    reinforced AS MATERIALIZED (
        SELECT m.agent, a.turn, sum(a.count) AS n FROM {access} a JOIN mine m ON m.id = a.memory_id
        WHERE a.turn IS NOT NULL GROUP BY 1, 2 HAVING sum(a.count) <> 0),
    moved AS (SELECT agent, status, updated_at FROM mine WHERE status IN ('consolidated', 'archived')),
    done AS (SELECT index + 1 AS number, finished FROM {turn}
             WHERE simulation_id = %(run)s AND status = 'done' AND finished IS NOT NULL),
    stream AS (
        SELECT at, number, agent, status, count(number) OVER (ORDER BY at, ord ROWS UNBOUNDED PRECEDING) AS run_of
        FROM (SELECT finished AS at, 0 AS ord, number, NULL AS agent, NULL AS status FROM done
              WHERE EXISTS (SELECT 1 FROM moved)
              UNION ALL SELECT updated_at, 1, NULL, agent, status FROM moved) events),
    placed AS (
        SELECT agent, status, COALESCE(first_value(number) OVER (PARTITION BY run_of ORDER BY number NULLS LAST), 1)
               AS turn FROM stream),
    span AS (
        SELECT GREATEST((SELECT max(number) FROM done), (SELECT max(turn) FROM formed),
                        (SELECT max(turn) FROM reflected), (SELECT max(turn) FROM reinforced),
                        (SELECT max(turn) FROM placed WHERE agent IS NOT NULL), 0) AS last),
    width AS (SELECT GREATEST(1, ceil(last / %(columns)s::float))::int AS w FROM span)
    SELECT 'last', NULL, last, NULL FROM span
    UNION ALL SELECT 'formed', agent, CASE WHEN turn >= 1 THEN (turn - 1) / w ELSE -1 END, sum(n)
              FROM formed, width GROUP BY 2, 3
    UNION ALL SELECT 'reinforced', agent, CASE WHEN turn >= 1 THEN (turn - 1) / w ELSE -1 END, sum(n)
              FROM reinforced, width GROUP BY 2, 3
    UNION ALL SELECT 'reflected', agent, turn, n FROM reflected
    UNION ALL SELECT status, agent, turn, count(*) FROM placed WHERE agent IS NOT NULL GROUP BY 1, 2, 3"""
BY_COLUMN = ("formed", "reinforced")  # counted per column by the database; the others per turn


def bank_timeline(simulation: Simulation, *, agent: str = "") -> Timeline:
    names = [agent] if agent in simulation.cast_names else simulation.cast_names
    lanes = {name: Lane(name) for name in names}
    last_turn = 0
    sql = TIMELINE_SQL.format(memory=Memory._meta.db_table, access=MemoryAccess._meta.db_table,
                              turn=Turn._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(sql, {"bank": simulation.bank_id, "names": names, "run": simulation.pk, "columns": MAX_COLUMNS})
        for key, name, at, n in cursor.fetchall():
            if key == "last":
                last_turn = int(at or 0)
            elif name in lanes and at is not None and n:
                lanes[name].counts[key][at] = lanes[name].counts[key].get(at, 0) + int(n)
    # A long run's chart has a column per span of turns (their sum), not thousands of thin bars.
    width = max(1, -(-last_turn // MAX_COLUMNS))
    columns = {name: {key: lane.counts[key] if key in BY_COLUMN else _spans(lane.counts[key], width)
                      for key, _l, _c in SERIES} for name, lane in lanes.items()}
    peak = max([sum(cols[key].get(c, 0) for key, _l, _c in SERIES)
                for cols in columns.values() for c in range(-(-last_turn // width))], default=0)
    for name, lane in lanes.items():
        lane.bars = _bars(columns[name], last_turn, width, peak)
    return Timeline(turns=last_turn, peak=peak, lanes=list(lanes.values()))


def _spans(counts: dict[int, int], width: int) -> dict[int, int]:
    """Counts by turn number as counts by column (turns 1..width are column 0)."""
    out: dict[int, int] = {}
    for number, n in counts.items():
        out[(number - 1) // width] = out.get((number - 1) // width, 0) + n
    return out


def _bars(columns: dict[str, dict[int, int]], turns: int, width: int, peak: int) -> list[Bar]:
    """Stacked bars, one column per `width` turns, on one scale for every agent (peak = the tallest column)."""
    if not turns or not peak:
        return []
    count = -(-turns // width)
    step = (WIDTH - GUTTER) / count
    bars = []
    for column in range(count):
        first = column * width + 1
        when = f"Turn {first}" if width == 1 else f"Turns {first}–{min(first + width - 1, turns)}"
        base = HEIGHT
        for key, label, colour in SERIES:
            n = columns[key].get(column, 0)
            if not n:
                continue
            height = n / peak * (HEIGHT - 4)
            base -= height
            bars.append(Bar(x=round(GUTTER + column * step, 2), y=round(base, 2),
                            width=round(max(step - (1 if step > 3 else 0), 0.5), 2), height=round(height, 2),
                            colour=colour, title=f"{when}: {n} {label}"))
    return bars
