"""A run's numbers, drawn: what its bank holds and how its agents used it (the analytics page).

Everything is per simulation (its bank) and, with `agent`, per agent. Each chart comes with its own
table (chronicle.writing.charts). Reads only: a few aggregate queries; the per-turn series are summed
by the database in columns of turns (chronicle.writing.turn_series), the bank's counts and what came
back to whom in one statement (COUNTS_SQL), so a long run costs the same queries and rows as a short one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db import connection
from django.db.models import Q

from chronicle.simulation.prompting.context import KIND_LABELS
from chronicle.simulation.run.models import Retrieval, Simulation, Turn
from chronicle.writing import turn_series
from chronicle.writing.charts import Chart, stacked
from chronicle.writing.mood_chart import MoodChart, mood_chart
from chronicle.writing.wording import kind_label
from memory.models import Memory

KIND_COLOURS = {  # memory kinds, in the order the chart stacks them
    "character": "#5b6ee1", "scene": "#8e9bf0", "character_knowledge": "#b061c9", "episodic": "#4f9de0",
    "observation": "#2f8f83", "action": "#6bbf59", "semantic": "#e0a030", "emotional": "#c0504d",
    "procedural": "#9a9a9a", "reflection": "#8e44ad", "plan": "#d0d0d0",
    "goal_progress": "#7fb069", "metacognition": "#b07fb0", "opinion": "#c9a227",
}
SECTION_COLOURS = {  # the turn inspector's context-window colours (templates/chronicle/simulation/_styles.html)
    "instructions": "#5b6ee1", "tool_instructions": "#8e9bf0", "header": "#3f8f8a", "prompt_options": "#b061c9",
    "prepopulated": "#2f8f83", "pinned": "#e0a030", "tools": "#c0504d", "transcript": "#4f9de0",
    "tool_call": "#9a9a9a", "tool_result": "#6bbf59", "format": "#d0d0d0",
}
TOOL_PALETTE = ["#4f9de0", "#e0a030", "#6bbf59", "#c0504d", "#8e44ad", "#2f8f83", "#b061c9", "#9a9a9a"]
SOURCE_SERIES = [("gifted", "gifted (the writer's cards)", "#8e9bf0"), ("writer", "written in the bank", "#b061c9"),
                 ("earned", "earned in the run", "#4f9de0"), ("reflection", "reflections", "#8e44ad"),
                 ("consolidation", "summaries", "#e67e22")]
TOP = 10  # rows in the most- and never-retrieved tables


@dataclass
class AgentUse:
    agent: str
    retrievals: int  # results returned to the agent, counted each time
    distinct: int  # different memories among them
    reachable: int  # active memories its searches can reach (its own and the shared ones)

    @property
    def diversity(self) -> float:
        return self.distinct / self.retrievals if self.retrievals else 0.0

    @property
    def coverage(self) -> float:
        return min(self.distinct / self.reachable, 1.0) if self.reachable else 0.0


@dataclass
class Analytics:
    simulation: Simulation
    agent: str
    charts: list[Chart] = field(default_factory=list)
    use: list[AgentUse] = field(default_factory=list)
    most: list[dict] = field(default_factory=list)
    never: list[Memory] = field(default_factory=list)
    never_count: int = 0
    memories: int = 0
    turns: int = 0
    mood: MoodChart | None = None


def analytics(simulation: Simulation, *, agent: str = "") -> Analytics:
    agent = agent if agent in simulation.cast_names else ""
    result = Analytics(simulation=simulation, agent=agent)
    cols = turn_series.columns(simulation, agent)
    result.turns = sum(cols.turns.values())
    counts = _counts(result, cols.width)
    result.charts = [_by_kind(counts["kind"], cols.width), _importance(counts["importance"]),
                     _tools(simulation, cols, agent)]
    series = turn_series.tokens_and_latency(simulation, cols, agent)
    result.charts += [_tokens(series.tokens, cols), _latency(series.latency, cols)]
    result.mood = mood_chart(simulation, agent)
    return result


def _by_kind(rows: list[tuple], width: int = 1) -> Chart:
    """Active memories by kind and by the turn they were formed (before the story: turn 0 or none), in
    columns of `width` turns (a long run's: their sum over the span). rows: (kind, column, n)."""
    last = max([key for _kind, key, _n in rows], default=0)
    spans = [f"{(k - 1) * width + 1}–{k * width}" if width > 1 else str(k) for k in range(1, last + 1)]
    columns = ["before"] + spans
    values: list[dict[str, float]] = [{} for _ in columns]
    for kind, key, n in rows:
        values[key][kind] = values[key].get(kind, 0) + n
    present = {kind for cell in values for kind in cell}
    series = [(kind, kind.replace("_", " "), colour) for kind, colour in KIND_COLOURS.items() if kind in present]
    return stacked(id="kinds", title="Memories by kind, over turns", x_name="turn ", columns=columns, values=values,
                   series=series, caption="Active memories by the turn they were formed: “before” holds what the "
                   "writer gave (cards, scene, planted beliefs), then each turn's lines, observations and insights."
                   + (f" Each column is {width} turns." if width > 1 else ""))


def _importance(rows: list[tuple]) -> Chart:
    """How important the memories are: ten bins from 0 to 10, by where they came from. rows: (source,
    bin, n)."""
    columns = [f"{n}–{n + 1}" for n in range(10)]
    values: list[dict[str, float]] = [{} for _ in columns]
    for source, at, n in rows:
        values[at][source] = values[at].get(source, 0) + n
    present = {key for cell in values for key in cell}
    return stacked(id="importance", title="Importance", x_name="importance ", columns=columns, values=values,
                   series=[s for s in SOURCE_SERIES if s[0] in present],
                   caption="How many memories score each importance (0–10), by where they came from. A flat "
                   "5 everywhere means nothing scored them.")


def _spans(cols: turn_series.Columns) -> str:
    return f" Each column is {cols.width} turns: the mean per turn over them." if cols.width > 1 else ""


def _tools(simulation: Simulation, cols: turn_series.Columns, agent: str) -> Chart:
    """Searches per turn, by tool (pre-populated sections count as one search each)."""
    sums = turn_series.tools(simulation, cols, agent)
    tools = sorted({tool for cell in sums.values() for tool in cell}, key=lambda t: (t == "prepopulate", t))
    series = [(tool, "pre-populated searches" if tool == "prepopulate" else tool, TOOL_PALETTE[i % len(TOOL_PALETTE)])
              for i, tool in enumerate(tools)]
    return stacked(id="tools", title="Tool calls per turn", x_name="turn ", series=series, values=cols.means(sums),
                   columns=cols.labels,
                   caption="The memory tools the speaking agent called each turn, and the searches Wonda ran "
                   "to pre-populate its prompt." + _spans(cols))


def _tokens(sums: dict[int, dict[str, float]], cols: turn_series.Columns) -> Chart:
    """Prompt tokens per turn by context section (as the turn view's context window counts them)."""
    values = cols.means(sums)
    present = {kind for cell in values for kind in cell}
    series = [(kind, label, SECTION_COLOURS[kind]) for kind, label in KIND_LABELS.items() if kind in present]
    series += [s for s in [("unsplit", "prompt (not split)", "#bbbbbb"), ("completion", "the reply", "#333333")]
               if s[0] in present]
    return stacked(id="tokens", title="Tokens per turn", x_name="turn ", series=series, values=values,
                   columns=cols.labels,
                   caption="What each turn sent the model, by section of its context window (every call of "
                   "the turn added up), and what the model wrote back. Open a turn to see the sections' text."
                   + _spans(cols))


def _latency(sums: dict[int, dict[str, float]], cols: turn_series.Columns) -> Chart:
    """Each turn's time: the model's and the memory system's (and the rest: queues, the database)."""
    values = cols.means(sums)
    return stacked(id="latency", title="Time per turn", x_name="turn ", unit=" ms", values=values,
                   columns=cols.labels,
                   series=[("llm", "the model", "#c0504d"), ("memory", "memory (searches, capture)", "#2f8f83"),
                           ("rest", "the rest", "#d0d0d0")],
                   caption="Milliseconds per turn: waiting for the model, the memory system's own work "
                   "(searches, embedding and storing the line, scoring it), and everything else." + _spans(cols))


# The bank's and the searches' numbers in one statement, each table read once however long the run:
# the results of every search of the run's done turns per (agent, memory) — the per-agent totals, the
# TOP memories that came back most, the TOP most important active ones that never did and how many
# those are — and the active memories by agent (what each can reach), by kind and column of turns,
# and by source and importance (ten bins; 10 falls in the last).
COUNTS_SQL = """
    WITH hits AS MATERIALIZED (
        SELECT r.agent, (e.value ->> 'memory_id')::bigint AS id, count(*) AS n
        FROM {retrieval} r JOIN {turn} t ON t.id = r.turn_id CROSS JOIN LATERAL jsonb_array_elements(r.results) e
        WHERE t.simulation_id = %(run)s AND t.status = 'done' AND (%(agent)s = '' OR r.agent = %(agent)s)
          AND e.value ? 'memory_id'
        GROUP BY 1, 2),
    held AS MATERIALIZED (
        SELECT id, agent, kind, source, turn, importance FROM {memory} WHERE bank_id = %(bank)s AND status = 'active'),
    mine AS (SELECT * FROM held WHERE %(agent)s = '' OR agent IN (%(agent)s, '')),
    never AS (SELECT * FROM mine m WHERE NOT EXISTS (SELECT 1 FROM hits h WHERE h.id = m.id))
    SELECT 'agent', agent, NULL::bigint, sum(n)::bigint, count(*) FROM hits GROUP BY agent
    UNION ALL (SELECT 'most', NULL, id, sum(n)::bigint, NULL FROM hits WHERE id IS NOT NULL
               GROUP BY id ORDER BY 4 DESC, 3 LIMIT %(top)s)
    UNION ALL (SELECT 'never', NULL, id, NULL, NULL FROM never ORDER BY importance DESC, turn, id LIMIT %(top)s)
    UNION ALL SELECT 'never_count', NULL, NULL, count(*), NULL FROM never
    UNION ALL SELECT 'reach', agent, NULL, count(*), NULL FROM held GROUP BY agent
    UNION ALL SELECT 'kind', kind, CASE WHEN turn > 0 THEN (turn - 1) / %(width)s + 1 ELSE 0 END, count(*), NULL
              FROM mine GROUP BY 2, 3
    UNION ALL SELECT 'importance', source, LEAST(GREATEST(floor(COALESCE(importance, 0)), 0), 9)::bigint, count(*),
                     NULL FROM mine GROUP BY 2, 3"""


def _counts(result: Analytics, width: int) -> dict[str, list[tuple]]:
    """Per agent: results returned, distinct memories among them, and what its searches could reach
    (its own active memories and the shared ones); the memories that came back most, and those that
    never did (set on `result`). Returns the rows of the kinds and importance charts. Two queries
    however long the run: COUNTS_SQL, then the few memories shown."""
    simulation, agent = result.simulation, result.agent
    sql = COUNTS_SQL.format(retrieval=Retrieval._meta.db_table, turn=Turn._meta.db_table, memory=Memory._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(sql, {"run": simulation.pk, "agent": agent, "bank": simulation.bank_id, "top": TOP,
                             "width": width})
        rows = cursor.fetchall()
    by: dict[str, list[tuple]] = {}
    for what, name, number, n, distinct in rows:
        by.setdefault(what, []).append((name, number, n, distinct))
    per_agent = {name: (n, distinct) for name, _id, n, distinct in by.get("agent", [])}
    most = [(pk, n) for _name, pk, n, _d in by.get("most", [])]
    never = [pk for _name, pk, _n, _d in by.get("never", [])]
    result.never_count = next((n for _name, _id, n, _d in by.get("never_count", [])), 0)
    held = {name: n for name, _id, n, _d in by.get("reach", [])}
    shared = held.get("", 0)
    result.memories = held.get(agent, 0) + shared if agent else sum(held.values())
    names = [agent] if agent else simulation.cast_names
    result.use = [AgentUse(agent=name, retrievals=per_agent.get(name, (0, 0))[0],
                           distinct=per_agent.get(name, (0, 0))[1],
                           reachable=held[name] + shared if held.get(name) else 0) for name in names]
    memories = Memory.objects.none()
    if simulation.bank_id is not None:
        memories = Memory.objects.in_bank(simulation.bank).filter(Q(agent=agent) | Q(agent="") if agent else Q())
    found = memories.defer("embedding").in_bulk([pk for pk, _n in most] + never) if most or never else {}
    result.most = [{"memory": found[pk], "count": n} for pk, n in most if pk in found]
    result.never = [found[pk] for pk in never if pk in found]
    return {"kind": [(kind, key, n) for kind, key, n, _d in by.get("kind", [])],
            "importance": [(source, at, n) for source, at, n, _d in by.get("importance", [])]}


MAP_SIZE = 560  # the map's square, in SVG units
MAP_POINT_R = 4  # a point's radius (templates/chronicle/writing/bank_map.html)
MAP_DRAWN = 3_000  # points drawn at most: a bigger bank is sampled evenly (the page says so)
AGENT_PALETTE = ["#4f9de0", "#c0504d", "#6bbf59", "#8e44ad", "#e0a030", "#2f8f83", "#b061c9", "#5b6ee1"]


@dataclass
class MapPoint:
    x: float
    y: float
    colour: str
    memory: dict
    href: str


@dataclass
class MemoryMap:
    points: list[MapPoint]
    legend: list[tuple[str, str, int]]  # label, colour, how many drawn
    total: int  # points in the map (before sampling and the agent filter)
    explained: list[float]
    size: int = MAP_SIZE
    point_r: int = MAP_POINT_R

    @property
    def sampled(self) -> bool:
        return len(self.points) < self.total


def memory_map(simulation: Simulation, bank_map, *, colour: str = "agent", agent: str = "", href=None) -> MemoryMap:
    """The map's points as drawn: coloured by agent or by kind, with what each memory says (its hover)
    and where a click opens it (href(memory) → URL)."""
    points = bank_map.points if bank_map is not None else []
    wanted = {pk for pk, _x, _y in points}
    rows = {}
    if points:
        rows = {row["pk"]: row for row in Memory.objects.filter(pk__in=wanted, bank_id=simulation.bank_id)
                .filter(Q(agent=agent) | Q(agent="") if agent else Q())
                .values("pk", "agent", "kind", "category", "turn", "content")}
    kept = [p for p in points if p[0] in rows]
    if len(kept) > MAP_DRAWN:  # evenly by id: the same sample on every visit
        step = len(kept) / MAP_DRAWN
        kept = [kept[int(i * step)] for i in range(MAP_DRAWN)]
    field = "kind" if colour == "kind" else "agent"
    if field == "kind":
        colours = {k: c for k, c in KIND_COLOURS.items() if any(rows[p[0]]["kind"] == k for p in kept)}
    else:
        names = simulation.cast_names + sorted({rows[p[0]]["agent"] for p in kept} - set(simulation.cast_names) - {""})
        colours = {name: AGENT_PALETTE[i % len(AGENT_PALETTE)] for i, name in enumerate(names)} | {"": "#999999"}
    drawn, counts = [], {}
    pad = MAP_POINT_R * 3  # a point (and its hover ring) whole at the border, not cut by the frame
    for pk, x, y in kept:
        row = rows[pk]
        key = row[field]
        counts[key] = counts.get(key, 0) + 1
        content = row["content"] if len(row["content"]) <= 200 else row["content"][:199] + "…"
        span = MAP_SIZE - 2 * pad
        x, y = min(max(x, 0.0), 1.0), min(max(y, 0.0), 1.0)  # a layout's stray point stays on the map
        drawn.append(MapPoint(x=round(pad + x * span, 1), y=round(pad + (1 - y) * span, 1),
                              colour=colours.get(key, "#999999"), memory=row | {"content": content},
                              href=href(row) if href else ""))
    legend = [(_legend_label(field, key), colour, counts[key]) for key, colour in colours.items() if counts.get(key)]
    return MemoryMap(points=drawn, legend=legend, total=len(points),
                     explained=[round(100 * e, 1) for e in (bank_map.explained if bank_map else [])])


def _legend_label(field: str, key: str) -> str:
    if field == "kind":
        return kind_label(key)
    return key or "shared (everyone)"
