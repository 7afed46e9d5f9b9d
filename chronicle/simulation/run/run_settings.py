"""A run's settings, each listed once with where it goes.

Every other list of them is derived from RUN_SETTINGS: the new-run form's fields, what a scenario
file may carry, what an export leaves out (the secret), what a branch or a replay keeps, what a
sequel takes over, the model settings a paused run may change, the turn's input (TurnInput) and the
run page's header (option_labels). The values themselves are Simulation's fields (models.py);
tests/chronicle/simulation/test_run_settings.py checks each setting here is one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from memory.api import SIMULATION_TOOLS, said_date

# The most turns a run may have: Simulation.max_turns' ceiling, the longest script a replay plays and
# where "Run until I pause" stops. Long enough for a novel's worth of scenes; the run pages read a
# page of lines at a time, so their cost does not grow with it (manage.py bench_pages measures them).
MAX_TURNS = 10_000


def _as_is(value: Any) -> Any:
    return value


@dataclass(frozen=True)
class RunSetting:
    name: str  # the Simulation field that holds it
    file: bool = True  # a scenario file's "settings" may carry it (files get shared)
    secret: bool = False  # never exported nor shown back
    branch: bool = True  # a branch, and a replay, keep the parent's value
    sequel: bool = True  # a sequel's form starts from the parent's value
    form: bool = True  # a field of the new-run form as the model defines it (else a field the form makes itself)
    optional: bool = False  # the new-run form may leave it out: the model's default then
    model: bool = False  # how the model is called: changeable while the run is paused
    turn: str = ""  # the TurnInput attribute that takes it as stored ("": none, or derived in turn_input)
    for_turn: Callable[[Any], Any] = _as_is  # the value as the turn takes it
    label: Callable[[Any], str | list[str]] | None = None  # its words in the run page's header ("": none)


# --- the header's words (option_labels), each reading the run --------------------------------------

def _tools_label(run) -> str:
    if run.retrieval_mode == run.RetrievalMode.PREPOPULATE:
        return ""
    tools = list(run.tool_set or [])
    return f"all {len(tools)} tools" if set(tools) >= set(SIMULATION_TOOLS) else f"tools: {', '.join(tools) or 'none'}"


def _query_label(run) -> str:
    enhanced = [name for on, name in ((run.query_context, "scene context"), (run.query_temporal, "turn boost"),
                                      (run.query_synonyms, "synonyms")) if on]
    return f"query enhancement: {', '.join(enhanced) or 'off'}"


def _scorer_label(run) -> str:
    scorer = "heuristic"
    if run.importance_scorer == run.ImportanceScorer.LLM and run.provider == run.Provider.OPENAI:
        scorer = "model"
    elif run.importance_scorer == run.ImportanceScorer.LLM and run.provider == run.Provider.REPLAY:
        scorer = "heuristic (the calls a model would get are counted)"
    return f"importance: {scorer}"


def _kept_label(run) -> str:
    floor, duplicates = run.capture_importance_floor, run.capture_duplicate_threshold
    adaptive = run.capture_adaptive_duplicates
    kept = [text for on, text in ((floor, f"importance ≥ {floor:g}"),
                                  (duplicates < 1 and not adaptive, f"no duplicates ≥ {duplicates:g}"),
                                  (adaptive, f"no duplicates by each one's own threshold (≤ {min(duplicates, 0.97):g})"),
                                  (run.capture_only_concerning, "only what concerns them")) if on]
    return f"keeps: {', '.join(kept)}" if kept else ""


def _distortions_label(run) -> list[str]:
    return [f"{f.agent}: {f.label()} ({f.stage})" for f in run.distortion_filters]


# In the order the header says them (a group of settings is said by its first: query enhancement, keeps).
RUN_SETTINGS: tuple[RunSetting, ...] = (
    RunSetting("title", sequel=False),
    RunSetting("max_turns"),
    RunSetting("speaking_order"),
    RunSetting("retrieval_mode"),
    RunSetting("scoring", turn="scoring"),
    RunSetting("weights", form=False, turn="weights", for_turn=lambda weights: weights or None),
    RunSetting("provider", model=True),
    RunSetting("base_url", model=True),
    RunSetting("model", model=True),
    RunSetting("api_key", secret=True, file=False, sequel=False, model=True),
    RunSetting("temperature", model=True),
    RunSetting("max_tokens", model=True),
    RunSetting("seed"),
    RunSetting("max_tool_calls", model=True, turn="max_tool_calls"),
    RunSetting("timeout_s", model=True),
    RunSetting("pace_s"),
    RunSetting("tool_set", form=False, turn="tool_set", for_turn=lambda tools: list(tools or []), label=_tools_label),
    RunSetting("query_context", turn="query_context", label=_query_label),
    RunSetting("query_temporal", turn="query_temporal"),
    RunSetting("query_synonyms", turn="query_synonyms"),
    RunSetting("association_weight", optional=True, turn="associations",
               label=lambda run: f"follows links ×{run.association_weight:g}" if run.association_weight else ""),
    RunSetting("consult_memories", turn="consult_memories",
               label=lambda run: "consults memories" if run.consult_memories else ""),
    RunSetting("confidence_gating", turn="confidence_gating",
               label=lambda run: "confidence gating" if run.confidence_gating else ""),
    RunSetting("greeting_by", form=False,
               label=lambda run: f"opens with {run.greeting_by}'s greeting" if run.greeting_by else ""),
    RunSetting("importance_scorer", optional=True, label=_scorer_label),
    RunSetting("capture_importance_floor", optional=True, label=_kept_label),
    RunSetting("capture_duplicate_threshold", optional=True),
    RunSetting("capture_adaptive_duplicates", optional=True),
    RunSetting("capture_only_concerning"),
    RunSetting("stage_directions"),
    RunSetting("minutes_per_turn", optional=True, turn="minutes_per_turn",
               label=lambda run: f"clock: {run.minutes_per_turn:g} min a turn" if run.minutes_per_turn else ""),
    RunSetting("story_start", optional=True,
               label=lambda run: f"story starts {said_date(run.story_start.replace(tzinfo=None), with_time=True)}"
               if run.story_start else ""),
    RunSetting("planted_beliefs"),
    RunSetting("distortions", label=_distortions_label),
    RunSetting("reflection_threshold", optional=True, label=lambda run: f"reflects at {run.reflection_threshold:g}"),
    RunSetting("consolidation_budget", optional=True,
               label=lambda run: f"consolidates past {run.consolidation_budget} lines" if run.consolidation_budget
               else "consolidates only on request"),
    RunSetting("sequel_carry", sequel=False),
    # A replay's script is the file's own top-level "script"; the writer's seats are nobody's from a
    # command line (it has nobody to wait for).
    RunSetting("script", file=False, form=False, sequel=False),
    RunSetting("pause_after", form=False, sequel=False),
    RunSetting("tool_prompt", optional=True, turn="tool_prompt"),
    RunSetting("seats", file=False, form=False),
)

SETTING_FIELDS = tuple(s.name for s in RUN_SETTINGS)
SECRET_SETTINGS = tuple(s.name for s in RUN_SETTINGS if s.secret)
FILE_SETTINGS = tuple(s.name for s in RUN_SETTINGS if s.file)
BRANCH_SETTINGS = tuple(s.name for s in RUN_SETTINGS if s.branch)
NOT_INHERITED = tuple(s.name for s in RUN_SETTINGS if not s.sequel)  # a sequel's own (and the secret)
FORM_SETTINGS = tuple(s.name for s in RUN_SETTINGS if s.form)
OPTIONAL_WITH_DEFAULT = tuple(s.name for s in RUN_SETTINGS if s.optional)
LLM_SETTING_FIELDS = tuple(s.name for s in RUN_SETTINGS if s.model)
EXPORTED_SETTINGS = tuple(s.name for s in RUN_SETTINGS if not s.secret)


def turn_values(run) -> dict[str, Any]:
    """The settings a turn's input takes as stored, by TurnInput attribute (turn_inputs.turn_input adds the rest)."""
    return {s.turn: s.for_turn(getattr(run, s.name)) for s in RUN_SETTINGS if s.turn}


def option_labels(run) -> list[str]:
    """The run's memory options in words, for the run page's header."""
    labels = []
    for setting in RUN_SETTINGS:
        words = setting.label(run) if setting.label is not None else ""
        labels += [words] if isinstance(words, str) and words else list(words or [])
    return labels
