"""The turn inspector's context window and score bars (built by chronicle.simulation's context and selectors)."""

from django import template

from chronicle.simulation.prompting.context import context_window
from chronicle.simulation.measuring.score_parts import score_breakdown
from memory.api import DEFAULT_SCORING

register = template.Library()


@register.simple_tag
def context_window_of(turn):
    return context_window(turn) if turn is not None else None


@register.simple_tag
def score_parts(result, simulation=None):
    if not isinstance(result, dict):
        return None
    return score_breakdown(result, scoring=getattr(simulation, "scoring", "") or DEFAULT_SCORING,
                           weights=getattr(simulation, "weights", None))
