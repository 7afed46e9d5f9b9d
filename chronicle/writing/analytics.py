"""A run's numbers, drawn: what its bank holds and how its agents used it (the analytics page).

Everything is per simulation (its bank) and, with `agent`, per agent. Each chart comes with its own
table (chronicle.writing.charts). Reads only: a few aggregate queries; the per-turn series are summed
by the database in columns of turns (chronicle.writing.turn_series), so a long run costs the same.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db import connection
from django.db.models import Case, Count, F, Q, Value, When

from chronicle.simulation.context import KIND_LABELS
from chronicle.simulation.models import Simulation
from chronicle.writing import turn_series
from chronicle.writing.charts import Chart, stacked
from chronicle.writing.wording import kind_label
from memory.models import Memory

KIND_COLOURS = {  # memory kinds, in the order the chart stacks them
    "character": "#5b6ee1", "scene": "#8e9bf0", "character_knowledge": "#b061c9", "episodic": "#4f9de0",
    "observation": "#2f8f83", "action": "#6bbf59", "semantic": "#e0a030", "emotional": "#c0504d",
    "procedural": "#9a9a9a", "reflection": "#8e44ad", "plan": "#d0d0d0",
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


def analytics(simulation: Simulation, *, agent: str = "") -> Analytics:
    agent = agent if agent in simulation.cast_names else ""
    result = Analytics(simulation=simulation, agent=agent)
    cols = turn_series.columns(simulation, agent)
    result.turns = sum(cols.turns.values())
    memories = Memory.objects.none()
    if simulation.bank_id is not None:
        memories = Memory.objects.in_bank(simulation.bank).filter(Q(agent=agent) | Q(agent="") if agent else Q())
    result.memories = memories.filter(status=Memory.Status.ACTIVE).count()
    result.charts = [_by_kind(memories, cols.width), _importance(memories), _tools(simulation, cols, agent),
                     _tokens(simulation, cols, agent), _latency(simulation, cols, agent)]
    result.use, counts = _use(simulation, agent)
    _most_and_never(result, memories, counts)
    return result


def _by_kind(memories, width: int = 1) -> Chart:
    """Active memories by kind and by the turn they were formed (before the story: turn 0 or none), in
    columns of `width` turns (a long run's: their sum over the span)."""
    rows = (memories.filter(status=Memory.Status.ACTIVE).order_by()
            .annotate(key=Case(When(turn__gt=0, then=(F("turn") - 1) / width + 1), default=Value(0)))
            .values("key", "kind").annotate(n=Count("id")))
    last = max([r["key"] for r in rows], default=0)
    spans = [f"{(k - 1) * width + 1}–{k * width}" if width > 1 else str(k) for k in range(1, last + 1)]
    columns = ["before"] + spans
    values: list[dict[str, float]] = [{} for _ in columns]
    for row in rows:
        values[row["key"]][row["kind"]] = values[row["key"]].get(row["kind"], 0) + row["n"]
    present = {kind for cell in values for kind in cell}
    series = [(kind, kind.replace("_", " "), colour) for kind, colour in KIND_COLOURS.items() if kind in present]
    return stacked(id="kinds", title="Memories by kind, over turns", x_name="turn ", columns=columns, values=values,
                   series=series, caption="Active memories by the turn they were formed: “before” holds what the "
                   "writer gave (cards, scene, planted beliefs), then each turn's lines, observations and insights."
                   + (f" Each column is {width} turns." if width > 1 else ""))


def _importance(memories) -> Chart:
    """How important the memories are: ten bins from 0 to 10, by where they came from."""
    columns = [f"{n}–{n + 1}" for n in range(10)]
    values: list[dict[str, float]] = [{} for _ in columns]
    rows = (memories.filter(status=Memory.Status.ACTIVE).order_by().values("source", "importance")
            .annotate(n=Count("id")))
    for row in rows:
        at = min(max(int(row["importance"] or 0), 0), 9)
        values[at][row["source"]] = values[at].get(row["source"], 0) + row["n"]
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


def _tokens(simulation: Simulation, cols: turn_series.Columns, agent: str) -> Chart:
    """Prompt tokens per turn by context section (as the turn view's context window counts them)."""
    values = cols.means(turn_series.tokens(simulation, cols, agent))
    present = {kind for cell in values for kind in cell}
    series = [(kind, label, SECTION_COLOURS[kind]) for kind, label in KIND_LABELS.items() if kind in present]
    series += [s for s in [("unsplit", "prompt (not split)", "#bbbbbb"), ("completion", "the reply", "#333333")]
               if s[0] in present]
    return stacked(id="tokens", title="Tokens per turn", x_name="turn ", series=series, values=values,
                   columns=cols.labels,
                   caption="What each turn sent the model, by section of its context window (every call of "
                   "the turn added up), and what the model wrote back. Open a turn to see the sections' text."
                   + _spans(cols))


def _latency(simulation: Simulation, cols: turn_series.Columns, agent: str) -> Chart:
    """Each turn's time: the model's and the memory system's (and the rest: queues, the database)."""
    values = cols.means(turn_series.latency(simulation, cols, agent))
    return stacked(id="latency", title="Time per turn", x_name="turn ", unit=" ms", values=values,
                   columns=cols.labels,
                   series=[("llm", "the model", "#c0504d"), ("memory", "memory (searches, capture)", "#2f8f83"),
                           ("rest", "the rest", "#d0d0d0")],
                   caption="Milliseconds per turn: waiting for the model, the memory system's own work "
                   "(searches, embedding and storing the line, scoring it), and everything else." + _spans(cols))


def _use(simulation: Simulation, agent: str) -> tuple[list[AgentUse], dict[int, int]]:
    """Per agent: results returned, distinct memories among them, and what its searches could reach;
    and how often each memory came back (every agent together)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT r.agent, (e->>'memory_id')::bigint, count(*) FROM chronicle_retrieval r "
            "JOIN chronicle_turn t ON t.id = r.turn_id, jsonb_array_elements(r.results) e "
            "WHERE t.simulation_id = %s AND t.status = 'done' AND (%s = '' OR r.agent = %s) "
            "AND e ? 'memory_id' GROUP BY 1, 2",
            [simulation.pk, agent, agent])
        rows = cursor.fetchall()
    per_agent: dict[str, list[int]] = {}
    counts: dict[int, int] = {}
    for name, memory_id, n in rows:
        per_agent.setdefault(name, [0, 0])
        per_agent[name][0] += n
        per_agent[name][1] += 1
        counts[memory_id] = counts.get(memory_id, 0) + n
    reach: dict[str, int] = {}
    if simulation.bank_id is not None:
        active = Memory.objects.in_bank(simulation.bank).active()
        shared = active.filter(agent="").count()
        reach = {row["agent"]: row["n"] + shared
                 for row in active.exclude(agent="").order_by().values("agent").annotate(n=Count("id"))}
    names = [agent] if agent else simulation.cast_names
    return [AgentUse(agent=name, retrievals=per_agent.get(name, [0, 0])[0], distinct=per_agent.get(name, [0, 0])[1],
                     reachable=reach.get(name, 0)) for name in names], counts


def _most_and_never(result: Analytics, memories, counts: dict[int, int]) -> None:
    top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:TOP]
    found = memories.in_bulk([pk for pk, _n in top]) if top else {}
    result.most = [{"memory": found[pk], "count": n} for pk, n in top if pk in found]
    never = memories.filter(status=Memory.Status.ACTIVE).exclude(pk__in=list(counts))
    result.never_count = never.count()
    result.never = list(never.order_by("-importance", "turn", "pk")[:TOP])


MAP_SIZE = 560  # the map's square, in SVG units
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
    pad = 8
    for pk, x, y in kept:
        row = rows[pk]
        key = row[field]
        counts[key] = counts.get(key, 0) + 1
        content = row["content"] if len(row["content"]) <= 200 else row["content"][:199] + "…"
        span = MAP_SIZE - 2 * pad
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
