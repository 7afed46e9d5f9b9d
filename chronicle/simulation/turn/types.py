"""What a turn is given and what it gives back: TurnInput (the speaker, the run's settings, what it
witnessed) and TurnOutcome (its line, calls, retrievals, usage), shared by the engine, the briefing,
the tool calls, what a line leaves behind and a turn's bookkeeping without their importing one another."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property

from chronicle.simulation.prompting.prompts import RECENT_CHARS, gist, window, window_since
from chronicle.simulation.providers.voice import sheet_line_voice
from chronicle.simulation.providers import ChatResult, TurnHints
from chronicle.simulation.run.run_settings import turn_default
from memory.api import CharacterSheet, ScenarioSheet
from memory.models import Memory


class TurnFailed(Exception):
    def __init__(self, reason: str, *, outcome: "TurnOutcome"):
        super().__init__(reason)
        self.reason = reason
        self.outcome = outcome


@dataclass
class TurnOutcome:
    utterance: str = ""
    messages: list[dict] = field(default_factory=list)
    retrievals: list[dict] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    calls: int = 0
    estimated: bool = False
    full_definition_tokens: int = 0
    notes: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    tools_unsupported: bool = False
    # What the write tools asked for (form_memory & co.): applied by turns.turn_finish, in its transaction.
    writes: list[dict] = field(default_factory=list)
    # The context view (Turn.context): per model call, its sections with token counts and usage.
    context: dict = field(default_factory=dict)
    aux_calls: int = 0  # model calls besides the speaker's own (importance, distortion) made for this line
    aux_tokens: int = 0  # their prompts' tokens (the judgement with any reflection riding it, retellings, day summaries)
    llm_ms: float = 0.0  # waiting for the model, every call and attempt of the turn (the analytics page)
    replying_to: list[str] = field(default_factory=list)  # what the speaker witnessed just before its line, in order

    @property
    def usage(self) -> dict:
        return {"prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
                "calls": self.calls, "estimated": self.estimated}

    def record(self, *, agent: str, tool: str, **fields) -> dict:
        """One Retrieval row's fields (what turns.turn_finish stores), appended in call order."""
        row = {"agent": agent, "tool": tool[:64], "arguments": {}, "query": "", "filter": {}, "results": [],
               "response": {}, "latency_ms": 0.0, "error": "", "order": len(self.retrievals)} | fields
        self.retrievals.append(row)
        return row

    def add_usage(self, result: ChatResult) -> None:
        self.calls += 1
        self.prompt_tokens += result.prompt_tokens
        self.completion_tokens += result.completion_tokens
        self.estimated = self.estimated or result.estimated


def _run_default(attribute: str):
    """The run's default for a setting the turn takes (run_settings.RUN_SETTINGS), read when a turn is made."""
    return field(default_factory=lambda: turn_default(attribute))


@dataclass
class TurnInput:
    bank: object
    agent: str
    index: int
    cast: list[CharacterSheet]
    scenario: ScenarioSheet | None
    transcript: list[tuple[int, str, str]]  # done turns before this one: (number, speaker, text)
    mode: str  # tools | prepopulate | both
    # The stage directions the agent witnessed, this turn's included: (turn number, the writer's words).
    stage: list[tuple[int, str]] = field(default_factory=list)
    # The run's settings (run_settings.turn_values), their defaults the run's.
    scoring: str = _run_default("scoring")
    weights: dict | None = _run_default("weights")
    max_tool_calls: int = _run_default("max_tool_calls")
    # The writer's overrides for this turn: memory ids kept out of the agent's context,
    # memories put into it (snapshot dicts: memory_id, content, turn, ...), a line written by hand.
    excluded: frozenset[int] = frozenset()
    pinned: list[dict] = field(default_factory=list)
    line: str = ""
    greeting: str = ""  # the card's first message, said as this turn's line (Simulation.greeting_by)
    present: list[str] | None = None  # who is in the room (stage directions); None: the whole cast
    clock: list[float] | None = None  # the scenario clock's skips (Simulation.clock); None: age in turns
    associations: float = _run_default("associations")  # links followed one hop in searches (Simulation.association_weight)
    distortions: list = field(default_factory=list)  # the run's distortion filters (memory.forming.distortion)
    mood: float = 0.0  # how the agent feels as its turn begins (memory.living.mood): primes its searches
    feeling: str = ""  # the mood's word, for the header ("" when calm)
    plan: str = ""  # the agent's current plan (memory.living.plans), for the header
    # The simulation's options: tools offered, query enhancement, prompt integration.
    tool_set: list[str] = _run_default("tool_set")
    query_context: bool = _run_default("query_context")
    query_temporal: bool = _run_default("query_temporal")
    query_synonyms: bool = _run_default("query_synonyms")
    consult_memories: bool = _run_default("consult_memories")
    confidence_gating: bool = _run_default("confidence_gating")
    minutes_per_turn: float = _run_default("minutes_per_turn")  # the scenario clock: the header's time
    story_time: datetime | None = None  # the story calendar's date and time at this turn (None: no date)
    tool_prompt: str = _run_default("tool_prompt")  # "exact": the tools as offered, with the budget; "seed000": seed 000's prompt
    # What came back to the agent before its earlier turns, as sent: {turn number: {"text", "ids"}}.
    notes: dict[int, dict] = field(default_factory=dict)

    @property
    def number(self) -> int:
        return self.index + 1

    @property
    def others(self) -> list[str]:
        """The others in the room (the whole cast but the agent, unless stage directions say otherwise)."""
        return [c.name for c in self.cast if c.name != self.agent and (self.present is None or c.name in self.present)]

    @property
    def kept_notes(self) -> dict[int, dict]:
        """The notes still in the agent's conversation: those before its own lines in the window, since
        the window last moved (prompts.window_since)."""
        since = window_since(self.transcript, self.stage)
        own = {number for number, speaker, _text in window(self.transcript, self.stage)
               if speaker == self.agent and number >= since}
        return {number: note for number, note in self.notes.items() if number in own and note.get("text")}

    @cached_property
    def kept(self) -> dict[int, str]:
        """The memories those notes show as they still read, with whom each is about (briefing.still_as_shown)."""
        return still_as_shown(self.kept_notes, agent=self.agent)

    @property
    def hints(self) -> TurnHints:
        return TurnHints(agent=self.agent, others=self.others, index=self.index,
                         first_turn_of_agent=all(speaker != self.agent for _n, speaker, _t in self.transcript),
                         transcript=list(self.transcript), max_tool_calls=self.max_tool_calls)


def still_as_shown(notes: dict[int, dict], agent: str = "") -> dict[int, str]:
    """The memories the agent's earlier notes show that still read as they did, each with whom it is
    about (character knowledge; else ""): one revised since (a belief that heard itself denied, a
    writer's edit) is news, neither skipped nor held back. A recent event was shown as its gist, a
    line of the sheet in the agent's own voice ("I grew up…" for "Alex grew up…")."""
    texts: dict[int, list[str]] = {}
    for note in notes.values():
        for memory_id in note.get("ids") or []:
            texts.setdefault(memory_id, []).append(note.get("text") or "")
    if not texts:
        return {}
    current = Memory.objects.filter(pk__in=texts).values_list("pk", "content", "kind", "about")
    return {pk: about if kind == "character_knowledge" else "" for pk, content, kind, about in current
            if any(content in text or gist(content, RECENT_CHARS) in text
                   or (kind == "character" and agent and sheet_line_voice(content, agent) in text) for text in texts[pk])}
