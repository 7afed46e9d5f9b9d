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
returned; `expect` may be a list (a question with several evidence lines): any of them hits. A
`forbid` probe leaks when its text is in those or in anything returned. `answer_turn` (optional)
is the turn whose line holds the answer; without it, the last script line up to after_turn that
holds the expected text (none for what only the sheet holds). evaluate_agents reports hits by how
far back that is, and by how many story days. `answer` (optional) is the gold answer in words, which
`evaluate_agents --answer` grades the agent's spoken reply by (measuring.answers); without it, `expect`.
"""

from __future__ import annotations

from dataclasses import dataclass

from chronicle.simulation.turn.briefing import identity_header
from chronicle.simulation.turn.engine import tool_context
from chronicle.simulation.run.models import Turn
from chronicle.simulation.prompting.prompts import transcript_text
from chronicle.simulation.turn.tool_calls import for_model
from chronicle.simulation.turn.inputs import turn_input
from memory.api import tools_offered
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
    also: tuple[str, ...] = ()  # more expected texts (an "expect" list): any of them hits
    answer_turn: int | None = None  # the turn whose line holds the answer (None: the sheet, or not known)
    answer: str = ""  # the gold answer in words (LoCoMo's), which `evaluate_agents --answer` grades replies by
    tool: str = "query_memory"
    arguments: dict | None = None  # None: {"query": question} for query_memory, {} for another tool

    @property
    def expected(self) -> tuple[str, ...]:
        return (self.expect, *self.also) if self.expect else ()

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
        if isinstance(expect, list):
            if not expect or not all(isinstance(e, str) and e.strip() for e in expect):
                raise ProbeError(f"{where}: an \"expect\" list holds the texts, each not empty.")
            expect, also = expect[0], tuple(e.strip() for e in expect[1:])
        else:
            also = ()
        if bool(isinstance(expect, str) and expect.strip()) == bool(isinstance(forbid, str) and forbid.strip()):
            raise ProbeError(f"{where}: give one of \"expect\" (text the answer must hold) or \"forbid\" "
                             "(text that must not come back).")
        if not isinstance(question, str) or not question.strip():
            raise ProbeError(f"{where}: give the question.")
        kind = item.get("kind")
        if not isinstance(kind, str) or not kind.strip():
            raise ProbeError(f"{where}: give its kind (self, belief, whisper, …): figures are reported per kind.")
        tool = item.get("tool", "query_memory")
        if tool not in tools_offered.SIMULATION_TOOLS:
            raise ProbeError(f"{where}: there is no tool {tool!r}.")
        arguments = item.get("arguments")
        if arguments is not None and not isinstance(arguments, dict):
            raise ProbeError(f"{where}: arguments must be an object.")
        answer_turn = item.get("answer_turn")
        if answer_turn is not None and (not isinstance(answer_turn, int) or isinstance(answer_turn, bool)
                                        or not 1 <= answer_turn <= after):
            raise ProbeError(f"{where}: answer_turn must be the turn of the answer's line, from 1 to after_turn ({after}).")
        answer = item.get("answer", "")
        if not isinstance(answer, str):
            raise ProbeError(f"{where}: answer must be text (the gold answer, in words).")
        probes.append(Probe(number=number, after_turn=after, agent=agent, kind=kind.strip(), question=question.strip(),
                            expect=(expect or "").strip(), forbid=(forbid or "").strip(), tool=tool,
                            arguments=arguments, also=also, answer_turn=answer_turn,
                            answer=answer.strip()))
    return probes


def with_answer_turns(found: list[Probe], script: list[dict]) -> list[Probe]:
    """Each expect probe without an answer_turn gets the last script line up to its turn that holds
    what it expects (a probe of the sheet finds none and keeps None)."""
    for probe in found:
        if probe.expect and probe.answer_turn is None:
            needles = [e.casefold() for e in probe.expected]
            probe.answer_turn = next((n for n in range(min(probe.after_turn, len(script)), 0, -1)
                                      if any(e in str(script[n - 1].get("text") or "").casefold() for e in needles)), None)
    return found


@dataclass
class Answer:
    probe: Probe
    window: str  # the header and transcript window the agent sees at after_turn + 1
    items: list[dict]  # the memories returned: {"content", "confidence" (None: none reported), "memory_id"}
    error: str = ""
    latency_ms: float = 0.0
    turns_back: int | None = None  # how far back the answer's line was said (evaluate_agents sets it)
    days_back: int | None = None  # and how many story days before (None: undated, or no line)

    def rank(self) -> int | None:
        """0: in the window already; r: the r-th memory returned; None: nowhere."""
        needles = [e.casefold() for e in self.probe.expected]
        window = self.window.casefold()
        if any(n in window for n in needles):
            return 0
        for position, item in enumerate(self.items, start=1):
            content = item["content"].casefold()
            if any(n in content for n in needles):
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
        content = f"{snapshot['content']}\n{snapshot['reply']['content']}" if snapshot.get("reply") else snapshot["content"]
        items.append({"content": content, "confidence": confidence, "memory_id": snapshot["memory_id"]})
    # What the answer tells beside its search (query_character's learned_since, heard, moved_by): the
    # model reads those too, after the memories.
    listed = {item["memory_id"] for item in items}
    for key, value in response.items():
        if key in ("facts", "memories") or not isinstance(value, list):
            continue
        for entry in value:
            if isinstance(entry, dict) and isinstance(entry.get("content"), str) and entry.get("memory_id") not in listed:
                listed.add(entry.get("memory_id"))
                items.append({"content": entry["content"], "confidence": None, "memory_id": entry.get("memory_id")})
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
