"""How each agent's mood moved over a run (memory.living.mood), drawn as one line an agent.

Read from each finished turn's `context["moods"]` ({name: [valence, word]}, recorded after its line:
chronicle.simulation.aftermath.feelings), so the chart shows what the inspector showed turn by turn.
A long run is sampled: at most POINTS turns, evenly spaced, each its turn's own mood.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from chronicle.simulation.run.models import Simulation, Turn

WIDTH, HEIGHT, GUTTER = 720, 120, 34
POINTS = 200
PALETTE = ["#4f9de0", "#c0504d", "#6bbf59", "#e0a030", "#8e44ad", "#2f8f83", "#b061c9", "#9a9a9a"]


@dataclass
class MoodLine:
    agent: str
    colour: str
    points: str  # the SVG polyline's "x,y x,y …"
    rows: list[tuple[int, float, str]] = field(default_factory=list)  # (turn, valence, word)


@dataclass
class MoodChart:
    lines: list[MoodLine]
    width: int = WIDTH
    height: int = HEIGHT
    gutter: int = GUTTER

    @property
    def empty(self) -> bool:
        return not any(line.rows for line in self.lines)

    @property
    def middle(self) -> float:
        return self.height / 2


def mood_chart(simulation: Simulation, agent: str = "") -> MoodChart:
    """Each agent's mood after every (sampled) finished turn; one agent's with `agent`."""
    turns = list(Turn.objects.filter(simulation=simulation, status=Turn.Status.DONE, context__has_key="moods")
                 .order_by("index").values_list("index", "context__moods"))
    if len(turns) > POINTS:
        step = len(turns) / POINTS
        turns = [turns[int(i * step)] for i in range(POINTS)]
    names = [agent] if agent else simulation.cast_names
    last = max((index for index, _m in turns), default=0) + 1
    lines = []
    for position, name in enumerate(names):
        rows = [(index + 1, float(moods[name][0]), str(moods[name][1]))
                for index, moods in turns if isinstance(moods, dict) and isinstance(moods.get(name), list)]
        points = " ".join(f"{_x(number, last):.1f},{_y(valence):.1f}" for number, valence, _word in rows)
        lines.append(MoodLine(name, PALETTE[position % len(PALETTE)], points, rows))
    return MoodChart(lines)


def _x(number: int, last: int) -> float:
    return GUTTER + (WIDTH - GUTTER) * (number - 0.5) / max(last, 1)


def _y(valence: float) -> float:
    return HEIGHT / 2 - (HEIGHT / 2 - 4) * max(-1.0, min(1.0, valence))
