"""Reads for the simulation pages: turns with their retrievals, token totals and the real saving."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Prefetch

from chronicle.simulation.models import Retrieval, Simulation, Turn


def turns_for_page(simulation: Simulation):
    return simulation.turns.order_by("index").prefetch_related(
        Prefetch("retrievals", queryset=Retrieval.objects.order_by("order", "id")))


@dataclass
class TokenSummary:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    full_definition_tokens: int = 0
    estimated: bool = False
    turns: int = 0

    @property
    def saving_percent(self) -> float | None:
        """1 − sent / full-definition cost; negative when the tool round trips cost more than they save."""
        if not self.full_definition_tokens:
            return None
        return round(100 * (1 - self.prompt_tokens / self.full_definition_tokens), 1)


def token_summary(turns) -> TokenSummary:
    summary = TokenSummary()
    for turn in turns:
        if turn.status != Turn.Status.DONE:
            continue
        summary.turns += 1
        summary.prompt_tokens += turn.prompt_tokens
        summary.completion_tokens += turn.completion_tokens
        summary.full_definition_tokens += turn.full_definition_tokens
        summary.estimated = summary.estimated or bool((turn.usage or {}).get("estimated"))
    return summary


def progress(simulation: Simulation, turns) -> dict:
    done = sum(1 for t in turns if t.status == Turn.Status.DONE)
    bank = simulation.bank
    return {
        "turns_done": done,
        "turn_percent": int(100 * done / simulation.max_turns) if simulation.max_turns else 0,
        "seed_percent": bank.seed_percent if bank else 0,
        "seed_done": bank.seed_done if bank else 0,
        "seed_total": bank.seed_total if bank else 0,
        "running_turn": next((t for t in turns if t.status == Turn.Status.RUNNING), None),
    }
