"""What a run's model calls cost, and the daily limit per user that pauses runs past it.

Tokens are counted as the run page counts them (selectors.TokenSummary): the speakers' prompts and
completions, and the prompts of the calls besides them (each line's judgement, reflections, day
summaries), which go to the bookkeeping model when the run has one. Each is priced from
settings.MODEL_PRICES, dollars per million tokens, input and output. A dry run or a replay costs
nothing; so does a model with no price (a local one: Ollama, llama.cpp), and the run says which
model had none, so a writer paying for one can add it (WONDA_MODEL_PRICES).
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field

from django.conf import settings
from django.db import connection
from django.utils import timezone

from chronicle.simulation.run.models import Simulation, Turn


@dataclass(frozen=True)
class Price:
    input: float   # dollars per million prompt tokens
    output: float  # dollars per million completion tokens


def price_for(model: str) -> Price | None:
    """The model's price: its name, else the longest name in the table it begins with (a dated
    version, "gpt-4o-mini-2024-07-18"), after any router's prefix ("openai/gpt-4o"); None: unpriced."""
    prices = settings.MODEL_PRICES
    names = {model.strip().lower(), model.strip().lower().rpartition("/")[2]}
    best = max((known for known in prices for name in names if name.startswith(known)), key=len, default=None)
    return Price(*prices[best]) if best else None


@dataclass
class RunCost:
    dollars: float = 0.0
    priced: dict[str, Price] = field(default_factory=dict)  # each model the calls went to, with its price
    unpriced: list[str] = field(default_factory=list)  # models with no price (counted at 0)
    offline: bool = False  # a dry run or a replay: no model was asked

    @property
    def words(self) -> str:
        if self.offline:
            return "$0 (no model was asked: a dry run or a replay)."
        parts = [f"${self.dollars:,.4f}"]
        parts += [f"{m} at ${p.input:g} in / ${p.output:g} out per million tokens" for m, p in self.priced.items()]
        if self.unpriced:
            parts.append(f"no price for {', '.join(self.unpriced)} (counted as free, as a local model is; "
                         "add it to WONDA_MODEL_PRICES if it is paid for)")
        return "; ".join(parts) + "."

    def as_dict(self) -> dict:
        return {"dollars": round(self.dollars, 6), "offline": self.offline, "unpriced": self.unpriced,
                "prices": {m: {"input": p.input, "output": p.output} for m, p in self.priced.items()}}


def cost(simulation: Simulation, *, prompt: int, completion: int, side: int) -> RunCost:
    """The cost of these tokens on this run's models (side: the prompts of the calls besides the speakers')."""
    if simulation.provider != Simulation.Provider.OPENAI:
        return RunCost(offline=True)
    side_model = simulation.bookkeeping_model if simulation.has_bookkeeping_model else simulation.model
    result = RunCost()
    for model, dollars_of in ((simulation.model, lambda p: prompt * p.input + completion * p.output),
                              (side_model, lambda p: side * p.input)):
        price = price_for(model)
        if price is None:
            if model not in result.unpriced:
                result.unpriced.append(model)
            continue
        result.priced[model] = price
        result.dollars += dollars_of(price) / 1_000_000
    return result


def run_cost(simulation: Simulation, tokens) -> RunCost:
    """A run's cost from its token summary (selectors.TokenSummary)."""
    return cost(simulation, prompt=tokens.prompt_tokens, completion=tokens.completion_tokens, side=tokens.side_tokens)


def _number(column: str, key: str) -> str:
    # A JSON value that is not a number counts 0, as the token summary counts it.
    return f"CASE WHEN jsonb_typeof(t.{column} -> '{key}') = 'number' THEN (t.{column} ->> '{key}')::float ELSE 0 END"


def spent_today(owner_id: int) -> float:
    """Dollars the user's runs spent since midnight (the server's time zone), on every turn finished
    since, failed ones too (their calls were made)."""
    midnight = timezone.localtime().replace(hour=0, minute=0, second=0, microsecond=0)
    sql = f"""
        SELECT t.simulation_id, SUM({_number('usage', 'prompt_tokens')}), SUM({_number('usage', 'completion_tokens')}),
               SUM({_number('context', 'aux_tokens')} + {_number('context', 'reflection_tokens')})
        FROM {Turn._meta.db_table} t JOIN {Simulation._meta.db_table} s ON s.id = t.simulation_id
        WHERE s.owner_id = %s AND s.provider = %s AND t.finished >= %s
        GROUP BY t.simulation_id"""
    with connection.cursor() as cursor:
        cursor.execute(sql, [owner_id, Simulation.Provider.OPENAI, midnight])
        rows = {sim: (p, c, s) for sim, p, c, s in cursor.fetchall()}
    runs = Simulation.objects.filter(pk__in=rows).only("pk", "provider", "model", "bookkeeping_model",
                                                       "bookkeeping_base_url")
    return sum(cost(run, prompt=int(rows[run.pk][0]), completion=int(rows[run.pk][1]),
                    side=int(rows[run.pk][2])).dollars for run in runs)


def over_daily_limit(simulation: Simulation) -> str:
    """Why the run may not go on today (its owner's runs spent the daily limit), or ""."""
    limit = settings.DAILY_COST_LIMIT
    if limit <= 0 or simulation.provider != Simulation.Provider.OPENAI:
        return ""
    spent = spent_today(simulation.owner_id)
    if spent < limit:
        return ""
    tomorrow = timezone.localtime() + datetime.timedelta(days=1)
    tomorrow = f"{tomorrow.day} {tomorrow:%B}"
    return (f"Paused: your runs' model calls have cost ${spent:,.2f} today, which reaches your daily limit of "
            f"${limit:,.2f}. Resume it from {tomorrow}, or ask whoever runs Wonda to raise WONDA_DAILY_COST_LIMIT.")
