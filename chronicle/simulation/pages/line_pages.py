"""A long run read a page of lines at a time, and its run-wide figures counted in SQL.

A run may have 10,000 turns (run_settings.MAX_TURNS): the run page, its 2 s poll, the review and the
branch comparison show one page of lines (PAGE_LINES turns) and read only those rows; the token
totals and the progress are aggregates. Pages are fixed ranges of turn indexes (page 3: turns
201–300), so an address stays right while a live run grows.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import connection
from django.db.models import BigIntegerField, Count, FloatField, Max, Q, Sum
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Cast, Coalesce

from chronicle.simulation.run import costs
from chronicle.simulation.run.selectors import TokenSummary
from chronicle.simulation.run.models import Simulation, Turn

PAGE_LINES = 100


@dataclass(frozen=True)
class LinePage:
    number: int  # 1-based
    count: int  # pages in all (at least 1)
    size: int
    lines: int  # turns in all (the highest index + 1)

    @property
    def start(self) -> int:
        """The first turn index on this page."""
        return (self.number - 1) * self.size

    @property
    def end(self) -> int:
        """One past the last turn index on this page."""
        return self.number * self.size

    @property
    def first_turn(self) -> int:
        return self.start + 1

    @property
    def last_turn(self) -> int:
        return min(self.end, self.lines)

    @property
    def is_latest(self) -> bool:
        return self.number == self.count

    @property
    def previous(self) -> int | None:
        return self.number - 1 if self.number > 1 else None

    @property
    def next(self) -> int | None:
        return self.number + 1 if self.number < self.count else None

    @property
    def numbers(self) -> list[int | None]:
        """The pages to link: the first, the last and two either side of this one (None: a gap)."""
        shown = sorted({1, self.count, *range(max(1, self.number - 2), min(self.count, self.number + 2) + 1)})
        out: list[int | None] = []
        for n in shown:
            if out and n - out[-1] > 1:
                out.append(None)
            out.append(n)
        return out

    def turn_index(self, params) -> int:
        """The index of the turn `?turn=N` names, kept on this page (the first of it when out of range)."""
        index = (_whole(params.get("turn")) or 0) - 1
        return index if self.holds(index) and index < self.lines else self.start

    def holds(self, index: int) -> bool:
        return self.start <= index < self.end

    def of(self, turns):
        """This page's rows of a run's turns (a queryset): a range scan of the (simulation, index) index."""
        return turns.filter(index__gte=self.start, index__lt=self.end)


def _whole(value: str | None) -> int | None:
    value = str(value if value is not None else "").strip()
    return int(value) if value.isdigit() and len(value) < 9 else None


def line_page(simulation: Simulation, params, *, latest: bool = True, size: int = PAGE_LINES) -> LinePage:
    """The page `params` ask for: `?turn=N` (the page with turn N), `?page=N`, else the latest page
    (the run page: where a live run is) or the first (`latest=False`: the review reads from the start).
    Out of range: the nearest page. One query, on the index."""
    lines = (simulation.turns.aggregate(last=Max("index"))["last"] or -1) + 1
    return page_at(lines, params, latest=latest, size=size)


def page_at(lines: int, params, *, latest: bool = True, size: int = PAGE_LINES) -> LinePage:
    count = max(1, -(-lines // size))
    turn, number = _whole(params.get("turn")), _whole(params.get("page"))
    if turn:
        number = (turn - 1) // size + 1
    if not number:
        number = count if latest else 1
    return LinePage(number=min(max(number, 1), count), count=count, size=size, lines=lines)


# --- the run-wide figures, counted by the database -----------------------------------------------

def _number(key: str, column: str = "usage"):
    return Cast(KeyTextTransform(key, column), FloatField())


@dataclass
class RunFigures:
    done: int
    seat_waiting: bool  # a turn waits for the writer's line
    running: Turn | None  # the turn being worked on, if any


def run_figures(simulation: Simulation) -> RunFigures:
    """How far the run is (two small queries, whatever its length)."""
    counts = simulation.turns.aggregate(done=Count("pk", filter=Q(status=Turn.Status.DONE)),
                                        seat=Count("pk", filter=Q(status=Turn.Status.SEAT)))
    running = (simulation.turns.filter(status=Turn.Status.RUNNING).order_by("index")
               .only("id", "index", "agent", "status", "heartbeat", "started").first())
    return RunFigures(done=counts["done"], seat_waiting=bool(counts["seat"]), running=running)


def run_tokens(simulation: Simulation) -> TokenSummary:
    """selectors.token_summary over every done turn of the run, summed in SQL (two queries)."""
    done = simulation.turns.filter(status=Turn.Status.DONE)
    sums = done.aggregate(
        turns=Count("pk"), prompt=Coalesce(Sum(_number("prompt_tokens")), 0.0),
        completion=Coalesce(Sum(_number("completion_tokens")), 0.0), calls=Coalesce(Sum(_number("calls")), 0.0),
        full=Coalesce(Sum("full_definition_tokens"), 0, output_field=BigIntegerField()),
        estimated=Count("pk", filter=Q(usage__estimated=True)),
        tools_tokens=Max(_number("tools_tokens", "context")), tool_count=Max(_number("tool_count", "context")),
        side=Coalesce(Sum(_number("aux_tokens", "context")), 0.0) + Coalesce(Sum(_number("reflection_tokens", "context")), 0.0),
        side_calls=Coalesce(Sum(_number("aux_calls", "context")), 0.0))
    summary = TokenSummary(prompt_tokens=int(sums["prompt"]), completion_tokens=int(sums["completion"]),
                        full_definition_tokens=int(sums["full"]), estimated=bool(sums["estimated"]),
                        turns=sums["turns"], calls=int(sums["calls"]), by_kind=_tokens_by_kind(simulation),
                        tools_tokens=int(sums["tools_tokens"] or 0), tool_count=int(sums["tool_count"] or 0),
                        side_tokens=int(sums["side"]), side_calls=int(sums["side_calls"]),
                        bookkeeping_model=simulation.bookkeeping_model if simulation.has_bookkeeping_model else "")
    summary.cost = costs.run_cost(simulation, summary)
    return summary


def _tokens_by_kind(simulation: Simulation) -> dict[str, int]:
    """Each context section kind's tokens over the run (the context's "totals" of every done turn)."""
    table = Turn._meta.db_table
    # Written in SQL: jsonb_each over each turn's totals; anything not a number counts 0, as in Python.
    sql = f"""
        SELECT kv.key, SUM(CASE WHEN jsonb_typeof(kv.value) = 'number' THEN (kv.value #>> '{{}}')::float ELSE 0 END)
        FROM {table} t
        CROSS JOIN LATERAL jsonb_each(CASE WHEN jsonb_typeof(t.context -> 'totals') = 'object'
                                           THEN t.context -> 'totals' ELSE '{{}}'::jsonb END) kv
        WHERE t.simulation_id = %s AND t.status = %s
        GROUP BY kv.key"""
    with connection.cursor() as cursor:
        cursor.execute(sql, [simulation.pk, Turn.Status.DONE])
        return {key: int(total or 0) for key, total in cursor.fetchall()}
