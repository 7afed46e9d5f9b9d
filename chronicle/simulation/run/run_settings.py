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

from django.conf import settings as django_settings

from memory.api import DEFAULT_SCORING, story_time, tools_offered

# The most turns a run may have: Simulation.max_turns' ceiling, the longest script a replay plays and
# where "Run until I pause" stops. Long enough for a novel's worth of scenes; the run pages read a
# page of lines at a time, so their cost does not grow with it (manage.py bench_pages measures them).
MAX_TURNS = 10_000


MAX_TIMEOUT_S = 600  # the longest a turn waits for one model answer

NEEDS_SERVER = "An OpenAI-compatible server needs a base URL and a model name."
NEEDS_BOOKKEEPING_SERVER = ("A bookkeeping model needs its server's base URL and its name; leave both blank "
                            "for the run's own model to judge each line.")


def _as_is(value: Any) -> Any:
    return value


# The defaults read when a run is made (not when this module is loaded): the server's configuration
# may change between runs (WONDA_REFLECTION_THRESHOLD and its kin).

def default_tool_set() -> list[str]:
    return list(tools_offered.DEFAULT_SIMULATION_TOOLS)


def default_reflection_threshold() -> float:
    return float(django_settings.REFLECTION_THRESHOLD)


def default_consolidation_budget() -> int:
    return int(django_settings.CONSOLIDATION_BUDGET)


def default_association_weight() -> float:
    return float(django_settings.ASSOCIATION_WEIGHT)


@dataclass(frozen=True)
class RunSetting:
    name: str  # the Simulation field that holds it
    default: Any = ""  # the field's default (a callable: called for each new run); TurnInput's too
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
    remembered: bool = False  # the writer's last model run gives the new-run form's value
    server: str = ""  # the Django setting that gives it when neither the writer nor a file does (the model's server)


# --- the header's words (option_labels), each reading the run --------------------------------------

def _tools_label(run) -> str:
    if run.retrieval_mode == run.RetrievalMode.PREPOPULATE:
        return ""
    tools = list(run.tool_set or [])
    return f"all {len(tools)} tools" if set(tools) >= set(tools_offered.SIMULATION_TOOLS) else f"tools: {', '.join(tools) or 'none'}"


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
    RunSetting("max_turns", default=6),
    RunSetting("speaking_order", default="round_robin"),
    # Pre-populate by default: one call a turn, the cheaper mode at equal reach (docs/simulations.md).
    RunSetting("retrieval_mode", default="prepopulate"),
    RunSetting("scoring", default=DEFAULT_SCORING, turn="scoring"),
    RunSetting("weights", default=dict, form=False, turn="weights", for_turn=lambda weights: weights or None),
    RunSetting("provider", default="scripted", model=True, remembered=True, server="LLM_PROVIDER"),
    RunSetting("base_url", model=True, remembered=True, server="LLM_BASE_URL"),
    RunSetting("model", model=True, remembered=True, server="LLM_MODEL"),
    RunSetting("api_key", secret=True, file=False, sequel=False, model=True),
    RunSetting("bookkeeping_base_url", remembered=True),
    RunSetting("bookkeeping_model", remembered=True,
               label=lambda run: f"bookkeeping: {run.bookkeeping_model} at {run.bookkeeping_base_url}"
               if run.has_bookkeeping_model else ""),
    RunSetting("bookkeeping_api_key", secret=True, file=False, sequel=False),
    RunSetting("temperature", default=0.7, model=True, remembered=True),
    RunSetting("max_tokens", default=300, model=True, remembered=True),
    RunSetting("seed", default=None),
    RunSetting("max_tool_calls", default=6, model=True, turn="max_tool_calls"),
    RunSetting("timeout_s", default=60, model=True, remembered=True, server="LLM_TIMEOUT"),
    RunSetting("pace_s", default=0),
    RunSetting("tool_set", default=default_tool_set, form=False, turn="tool_set", for_turn=lambda tools: list(tools or []), label=_tools_label),
    RunSetting("query_context", default=False, turn="query_context", label=_query_label),
    # On by default: R@10 on locomo-dev 0.729 → 0.748 together; context injection lowered it (off).
    RunSetting("query_temporal", default=True, turn="query_temporal"),
    RunSetting("query_synonyms", default=True, turn="query_synonyms"),
    RunSetting("association_weight", default=default_association_weight, optional=True, turn="associations",
               label=lambda run: f"follows links ×{run.association_weight:g}" if run.association_weight else ""),
    RunSetting("consult_memories", default=False, turn="consult_memories",
               label=lambda run: "consults memories" if run.consult_memories else ""),
    RunSetting("confidence_gating", default=False, turn="confidence_gating",
               label=lambda run: "confidence gating" if run.confidence_gating else ""),
    RunSetting("greeting_by", form=False,
               label=lambda run: f"opens with {run.greeting_by}'s greeting" if run.greeting_by else ""),
    RunSetting("importance_scorer", default="llm", optional=True, label=_scorer_label),
    RunSetting("capture_importance_floor", default=0, optional=True, label=_kept_label),
    RunSetting("capture_duplicate_threshold", default=1.0, optional=True),
    RunSetting("capture_adaptive_duplicates", default=False, optional=True),
    RunSetting("capture_only_concerning", default=False),
    RunSetting("stage_directions"),
    RunSetting("minutes_per_turn", default=0, optional=True, turn="minutes_per_turn",
               label=lambda run: f"clock: {run.minutes_per_turn:g} min a turn" if run.minutes_per_turn else ""),
    RunSetting("story_start", default=None, optional=True,
               label=lambda run: f"story starts {story_time.said_date(run.story_start.replace(tzinfo=None), with_time=True)}"
               if run.story_start else ""),
    RunSetting("planted_beliefs"),
    RunSetting("distortions", label=_distortions_label),
    RunSetting("reflection_threshold", default=default_reflection_threshold, optional=True, label=lambda run: f"reflects at {run.reflection_threshold:g}"),
    RunSetting("consolidation_budget", default=default_consolidation_budget, optional=True,
               label=lambda run: f"consolidates past {run.consolidation_budget} lines" if run.consolidation_budget
               else "consolidates only on request"),
    RunSetting("sequel_carry", sequel=False),
    # A replay's script is the file's own top-level "script"; the writer's seats are nobody's from a
    # command line (it has nobody to wait for).
    RunSetting("script", default=list, file=False, form=False, sequel=False),
    RunSetting("pause_after", default=None, form=False, sequel=False),
    RunSetting("tool_prompt", default="exact", optional=True, turn="tool_prompt"),
    RunSetting("seats", default=list, file=False, form=False),
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
REMEMBERED_SETTINGS = tuple(s.name for s in RUN_SETTINGS if s.remembered)  # the new-run form's model settings
DEFAULTS = {s.name: s.default for s in RUN_SETTINGS}
_BY_TURN = {s.turn: s for s in RUN_SETTINGS if s.turn}


def default(name: str) -> Any:
    """A setting's default value for a new run (a callable default called)."""
    value = DEFAULTS[name]
    return value() if callable(value) else value


def turn_default(attribute: str) -> Any:
    """The default of the setting a TurnInput attribute takes, as the turn takes it."""
    setting = _BY_TURN[attribute]
    return setting.for_turn(default(setting.name))


def server_defaults() -> dict[str, Any]:
    """The model settings the server is configured with (WONDA_LLM_*): a run's when neither the writer
    nor a file chose them. A run waits at most MAX_TIMEOUT_S for one answer; a longer WONDA_LLM_TIMEOUT,
    set for slow servers elsewhere, is not a reason to refuse a run."""
    values = {s.name: getattr(django_settings, s.server) for s in RUN_SETTINGS if s.server}
    values["timeout_s"] = min(values["timeout_s"], MAX_TIMEOUT_S)
    return values


def unknown_settings(values: dict) -> list[str]:
    """What a file's "settings" names that is no run setting, said as "settings.NAME is not a run setting (…)"."""
    return [f"settings.{name} is not a run setting (one of: {', '.join(FILE_SETTINGS)})"
            for name in sorted(set(values) - set(FILE_SETTINGS))]


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
