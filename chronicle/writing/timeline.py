"""The bank timeline: per agent and per turn, what its memory did — formed, reinforced, reflected,
consolidated, archived — as stacked bars (server-rendered SVG, no script) and a list.

Formed and reflected memories carry their turn. Reinforcement is the access log's turn. Consolidating
and archiving are not turn events (a worker or the writer does them, maybe after the run), so they
are placed at the last turn finished when they happened (updated_at against Turn.finished).
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field

from django.db.models import Count, Sum

from chronicle.simulation.models import Simulation, Turn
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
        for number in range(1, self.turns + 1):
            cells = []
            for lane in self.lanes:
                said = [f"{lane.counts[key][number]} {label}" for key, label, _c in SERIES[2:]
                        if lane.counts[key].get(number)]
                if said:
                    cells.append(f"{lane.agent}: {', '.join(said)}")
            if cells:
                rows.append({"turn": number, "events": cells})
        return rows


def _by_agent_turn(rows, agent_field: str, into: dict[str, Lane], key: str, count_field: str = "n") -> None:
    for row in rows:
        lane = into.get(row[agent_field])
        if lane is not None and row["turn"] is not None and row[count_field]:
            lane.counts[key][row["turn"]] = lane.counts[key].get(row["turn"], 0) + int(row[count_field])


def bank_timeline(simulation: Simulation, *, agent: str = "") -> Timeline:
    names = [agent] if agent in simulation.cast_names else simulation.cast_names
    lanes = {name: Lane(name) for name in names}
    finished = list(Turn.objects.filter(simulation=simulation, status=Turn.Status.DONE, finished__isnull=False)
                    .order_by("finished").values_list("finished", "index"))
    finished = [(when, index + 1) for when, index in finished]  # a turn's number is its index + 1
    last_turn = max([number for _f, number in finished], default=0)
    if simulation.bank_id is not None:
        memories = Memory.objects.in_bank(simulation.bank).filter(agent__in=names)
        _by_agent_turn(memories.filter(source=Memory.Source.EARNED).order_by().values("agent", "turn")
                       .annotate(n=Count("id")), "agent", lanes, "formed")
        _by_agent_turn(memories.filter(kind=Memory.Kind.REFLECTION).order_by().values("agent", "turn")
                       .annotate(n=Count("id")), "agent", lanes, "reflected")
        _by_agent_turn(MemoryAccess.objects.filter(memory__bank=simulation.bank, memory__agent__in=names)
                       .order_by().values("memory__agent", "turn").annotate(n=Sum("count")), "memory__agent",
                       lanes, "reinforced")
        times = [when for when, _n in finished]
        numbers = [number for _when, number in finished]
        for key, status in (("consolidated", Memory.Status.CONSOLIDATED), ("archived", Memory.Status.ARCHIVED)):
            for name, when in memories.filter(status=status).values_list("agent", "updated_at"):
                at = bisect_right(times, when)
                number = numbers[at - 1] if at else 1
                lanes[name].counts[key][number] = lanes[name].counts[key].get(number, 0) + 1
        last_turn = max([last_turn] + [n for lane in lanes.values() for c in lane.counts.values() for n in c])
    # A long run's chart has a column per span of turns (their sum), not thousands of thin bars.
    width = max(1, -(-last_turn // MAX_COLUMNS))
    columns = {name: {key: _spans(lane.counts[key], width) for key, _l, _c in SERIES} for name, lane in lanes.items()}
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
