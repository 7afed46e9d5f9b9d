"""Server-rendered SVG charts (no script, nothing from a CDN) with their numbers as a table.

A Chart is geometry plus the table it was drawn from: templates/chronicle/writing/_chart.html draws
the bars (each with a hover title), the axis, the legend and, under a <details>, the same numbers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

LABEL_EVERY_UP_TO = 12  # a chart with at most this many columns labels each one
WIDTH, HEIGHT, GUTTER, FOOT = 720, 150, 34, 16  # SVG units; GUTTER holds the y labels, FOOT the x labels


@dataclass
class Bar:
    x: float
    y: float
    width: float
    height: float
    colour: str
    title: str


@dataclass
class Chart:
    """Stacked columns, one per x label, over series (key, label, colour). rows: the table under it."""

    id: str
    title: str
    caption: str
    series: list[tuple[str, str, str]]
    columns: list[str]
    values: list[dict[str, float]]
    unit: str = ""
    bars: list[Bar] = field(default_factory=list)
    peak: float = 0.0
    width: int = WIDTH
    height: int = HEIGHT
    gutter: int = GUTTER
    foot: int = FOOT

    @property
    def empty(self) -> bool:
        return not self.peak

    @property
    def ticks(self) -> list[tuple[float, str]]:
        """The x labels with their x positions: every column's when there are few (a histogram's ten
        bins, each labelled under its bar), else six evenly spaced (first, last and between)."""
        n = len(self.columns)
        if not n:
            return []
        step = (self.width - self.gutter) / n
        picks = sorted({0, n - 1, *(round(i * (n - 1) / 5) for i in range(1, 5))}) if n > LABEL_EVERY_UP_TO else range(n)
        return [(round(self.gutter + (i + 0.5) * step, 2), self.columns[i]) for i in picks]

    @property
    def peak_label(self) -> str:
        return _number(self.peak)

    @cached_property  # the page asks three times (its rows, their count); drawn once the chart is built
    def table(self) -> list[list[str]]:
        """The chart's numbers: one row per column, one cell per series, and the total."""
        rows = []
        for label, cell in zip(self.columns, self.values):
            if not any(cell.get(key) for key, _l, _c in self.series):
                continue
            rows.append([label, *(_number(cell.get(key, 0)) for key, _l, _c in self.series),
                         _number(sum(cell.get(key, 0) for key, _l, _c in self.series))])
        return rows

    @cached_property
    def totals(self) -> list[tuple[str, str, str]]:
        return [(label, colour, _number(sum(cell.get(key, 0) for cell in self.values)))
                for key, label, colour in self.series]

    @property
    def aria(self) -> str:
        return f"{self.title}: " + ", ".join(f"{label} {n}" for label, _c, n in self.totals)


def stacked(*, id: str, title: str, caption: str, series: list[tuple[str, str, str]], columns: list[str],
            values: list[dict[str, float]], unit: str = "", x_name: str = "") -> Chart:
    """Columns of stacked bars on one scale: the tallest column reaches the top."""
    chart = Chart(id=id, title=title, caption=caption, series=series, columns=columns, values=values, unit=unit)
    chart.peak = max((sum(cell.get(key, 0) for key, _l, _c in series) for cell in values), default=0)
    if not chart.peak or not columns:
        return chart
    step = (WIDTH - GUTTER) / len(columns)
    for i, (label, cell) in enumerate(zip(columns, values)):
        base = float(HEIGHT)
        for key, name, colour in series:
            value = cell.get(key, 0)
            if not value:
                continue
            height = value / chart.peak * (HEIGHT - 4)
            base -= height
            chart.bars.append(Bar(x=round(GUTTER + i * step, 2), y=round(base, 2),
                                  width=round(max(step - (1 if step > 3 else 0), 0.5), 2), height=round(height, 2),
                                  colour=colour, title=f"{x_name}{label}: {_number(value)}{unit} {name}"))
    return chart


def _number(value: float) -> str:
    if isinstance(value, float) and not value.is_integer():
        return f"{value:.1f}" if abs(value) >= 10 else f"{value:.2f}"
    return str(int(value))
