"""Probes: questions put to one agent's memory after a turn, through its own tools (evaluate_agents).

In Wonda JSON, beside a script:

    "probes": [{"after_turn": 12, "agent": "Sam", "kind": "said_when",
                "question": "What did Jordan say about the budget?", "expect": "forty each"},
               {"after_turn": 12, "agent": "Alex", "kind": "whisper",
                "question": "What did Sam whisper?", "forbid": "closing down"}]

After turn N a probe calls the agent's tool (default `query_memory` with the question) exactly as
the agent's call at turn N + 1 would: the same bank, presence, witnesses, distortions and presets.
An `expect` probe hits at k when its text (any case) is in what the agent already sees at N + 1
(its header and transcript window, which the tools leave out) or in one of the first k memories
returned; a `forbid` probe leaks when its text is in those or in anything returned.
"""

from __future__ import annotations

from dataclasses import dataclass

from chronicle.simulation.briefing import identity_header
from chronicle.simulation.engine import tool_context
from chronicle.simulation.models import Turn
from chronicle.simulation.prompts import transcript_text
from chronicle.simulation.tool_calls import for_model
from chronicle.simulation.turn_inputs import turn_input
from memory.api import SIMULATION_TOOLS as TOOLS
from memory.api import call_tool


class ProbeError(ValueError):
    """A probe the file cannot have; the message names it."""


@dataclass
class Probe:
    number: int  # its place in the file's list, from 1
    after_turn: int
    agent: str
    kind: str
    question: str
    expect: str = ""
    forbid: str = ""
    tool: str = "query_memory"
    arguments: dict | None = None  # None: {"query": question} for query_memory, {} for another tool

    def call(self) -> tuple[str, dict]:
        if self.arguments is not None:
            return self.tool, dict(self.arguments)
        return self.tool, ({"query": self.question} if self.tool == "query_memory" else {})


def parse(raw, *, cast: list[str], turns: int) -> list[Probe]:
    """The file's probes, checked against its cast and its script's length (turns)."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise ProbeError("probes must be a list of {\"after_turn\", \"agent\", \"kind\", \"question\", \"expect\" or \"forbid\"}.")
    probes = []
    for number, item in enumerate(raw, start=1):
        where = f"Probe {number}"
        if not isinstance(item, dict):
            raise ProbeError(f"{where}: write an object with after_turn, agent, kind, question and expect or forbid.")
        question = item.get("question")
        if isinstance(question, str) and question.strip():
            where = f"Probe {number} ({question.strip()[:60]!r})"
        after = item.get("after_turn")
        if not isinstance(after, int) or isinstance(after, bool) or after < 1:
            raise ProbeError(f"{where}: after_turn must be a turn number from 1.")
        if after > turns:
            raise ProbeError(f"{where}: after_turn {after} is past the script's {turns} lines.")
        agent = item.get("agent")
        if agent not in cast:
            raise ProbeError(f"{where}: {agent!r} is not in the cast ({', '.join(cast)}).")
        expect, forbid = item.get("expect"), item.get("forbid")
        if bool(isinstance(expect, str) and expect.strip()) == bool(isinstance(forbid, str) and forbid.strip()):
            raise ProbeError(f"{where}: give one of \"expect\" (text the answer must hold) or \"forbid\" "
                             "(text that must not come back).")
        if not isinstance(question, str) or not question.strip():
            raise ProbeError(f"{where}: give the question.")
        kind = item.get("kind")
        if not isinstance(kind, str) or not kind.strip():
            raise ProbeError(f"{where}: give its kind (self, belief, whisper, …): figures are reported per kind.")
        tool = item.get("tool", "query_memory")
        if tool not in TOOLS:
            raise ProbeError(f"{where}: there is no tool {tool!r}.")
        arguments = item.get("arguments")
        if arguments is not None and not isinstance(arguments, dict):
            raise ProbeError(f"{where}: arguments must be an object.")
        probes.append(Probe(number=number, after_turn=after, agent=agent, kind=kind.strip(), question=question.strip(),
                            expect=(expect or "").strip(), forbid=(forbid or "").strip(), tool=tool,
                            arguments=arguments))
    return probes


@dataclass
class Answer:
    probe: Probe
    window: str  # the header and transcript window the agent sees at after_turn + 1
    items: list[dict]  # the memories returned: {"content", "confidence" (None: none reported), "memory_id"}
    error: str = ""
    latency_ms: float = 0.0

    def rank(self) -> int | None:
        """0: in the window already; r: the r-th memory returned; None: nowhere."""
        needle = self.probe.expect.casefold()
        if needle in self.window.casefold():
            return 0
        for position, item in enumerate(self.items, start=1):
            if needle in item["content"].casefold():
                return position
        return None

    def hit(self, k: int) -> bool:
        rank = self.rank()
        return rank is not None and rank <= k

    @property
    def leaked(self) -> bool:
        needle = self.probe.forbid.casefold()
        return needle in self.window.casefold() or any(needle in item["content"].casefold() for item in self.items)


def items_of(result) -> list[dict]:
    """The memories a tool call returned, in its order, with the confidence the model is shown for
    each in the answer as it reads it (for_model): any figure on a memory (a fact's confidence, a
    relevance), or the answer's retrieval_confidence for its first memory (that is what it rates)."""
    response = for_model(result.response) if isinstance(result.response, dict) else {}
    shown = {}
    for entry in [*(response.get("facts") or []), *(response.get("memories") or [])]:
        if isinstance(entry, dict):
            figure = entry.get("confidence", entry.get("relevance"))
            if isinstance(figure, (int, float)) and not isinstance(figure, bool):
                shown[entry.get("memory_id")] = figure
    overall = response.get("retrieval_confidence")
    items = []
    for position, found in enumerate(result.results):
        snapshot = found.snapshot()
        confidence = shown.get(snapshot["memory_id"])
        if confidence is None and position == 0 and isinstance(overall, (int, float)):
            confidence = overall
        items.append({"content": snapshot["content"], "confidence": confidence, "memory_id": snapshot["memory_id"]})
    return items


def ask(simulation, probe: Probe) -> Answer:
    """The probe's tool call, as the agent's own call at after_turn + 1 would go."""

    turn = turn_input(turn=Turn(simulation=simulation, index=probe.after_turn, agent=probe.agent))
    transcript = transcript_text(turn.transcript, turn.stage) if turn.transcript or turn.stage else ""
    window = f"{identity_header(turn)}\n{transcript}"
    name, arguments = probe.call()
    result = call_tool(name, dict(arguments), context=tool_context(turn, deferred=[]))
    return Answer(probe=probe, window=window, items=items_of(result), error=result.error or "",
                  latency_ms=result.latency_ms)
