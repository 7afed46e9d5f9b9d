"""What a run cost and how its memory served it, read off its turns (evaluate_agents' figures).

- tokens: each turn's prompt tokens against the full definition's, p50, both counted here the same
  way (a server's own count, or the relay's four characters a token, would not compare with the
  baseline's): the speaker's calls (its tool rounds included), and every call of the turn (the
  judgement of the line with any reflection riding it, retellings, day summaries, reflections made
  apart), which is what the saving is computed on;
- prefix_share: of each model call's prompt, the share in a prefix byte-identical to the same agent's
  previous call (what prefix caches reuse); a call is the tool schemas, then its messages, in order;
- redundancy: of the memories the tools handed back, the share already in that call's transcript window;
- aux_calls_per_turn: model calls besides the speaker's own (importance, distortion, reflection);
- memory_ms_p50: the memory system's own time a turn.
"""

from __future__ import annotations

import json
import re
import statistics

from chronicle.simulation.prompting.context import count_tokens, request_tokens, tools_text
from chronicle.simulation.turn.tool_calls import offered_tools
from chronicle.simulation.turn.inputs import turn_input
from chronicle.simulation.run.models import Simulation
from chronicle.simulation.prompting.prompts import transcript_text
from chronicle.simulation.run.selectors import side_tokens
from memory.models import Memory

# "Alex said: …", "Sam whispered to Alex: …", "(turn 3) …": what a memory adds to the words it quotes.
_QUOTE_HEAD = re.compile(r"^(?:\(turn \d+\)\s*)?[^:]{1,80}?\b(?:said|whispered to [^:]{1,60}|asked|told me)\s*:\s*")
REFLECTION_CALLS = 2  # memory.living.reflection: one call for the questions, one for the insights


def p50(values: list[float]) -> float | None:
    return round(statistics.median(values), 2) if values else None


def _norm(text: str) -> str:
    return " ".join((text or "").split()).casefold()


def in_window(content: str, window: str) -> bool:
    """A memory already in the window: the words it quotes (or its whole text) are there."""
    if not window:
        return False
    words = _norm(_QUOTE_HEAD.sub("", content or ""))
    return len(words) >= 12 and words in _norm(window)


def call_texts(messages: list[dict], tools: list[dict] | None) -> list[str]:
    """Each model call of a turn as the text a server would see, in order: the tool schemas, then the
    messages sent (each call is the turn's messages up to the reply it got)."""
    head = tools_text(tools)
    calls, sent = [], []
    for message in messages or []:
        if message.get("role") == "assistant":
            calls.append(head + "".join(sent))
        sent.append(json.dumps({k: message.get(k) for k in ("role", "content", "tool_calls", "tool_call_id")
                                if message.get(k) is not None}, ensure_ascii=False))
    return calls


def counted_prompt(messages: list[dict], tools: list[dict] | None) -> int:
    """A turn's prompt tokens, every call of it (the messages up to each reply), counted as the full
    definition's are."""
    total, sent = 0, []
    for message in messages or []:
        if message.get("role") == "assistant":
            total += request_tokens(sent, tools)
        sent.append(message)
    return total


def _common_prefix(a: str, b: str) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def prefix_shares(simulation: Simulation, turns: list) -> list[float]:
    """For every call but each agent's first: the share of its tokens in a prefix identical to that
    agent's previous call."""
    last: dict[str, str] = {}
    shares = []
    for turn in turns:
        if not (turn.usage or {}).get("calls"):
            continue  # a line with no model call (written by hand, a greeting)
        tools = offered_tools(turn_input(turn=turn), mode_of(simulation))
        for text in call_texts(turn.prompt_messages, tools):
            previous = last.get(turn.agent)
            if previous is not None:
                shared = _common_prefix(previous, text)
                total = count_tokens(text)
                shares.append(count_tokens(text[:shared]) / total if total else 0.0)
            last[turn.agent] = text
    return shares


def mode_of(simulation: Simulation) -> str:
    if simulation.tools_unsupported:
        return Simulation.RetrievalMode.PREPOPULATE
    return simulation.retrieval_mode


def script_redundancy(turns: list) -> tuple[int, int]:
    """(memories in the window, memories returned) over the tool calls the turns made."""
    redundant = total = 0
    for turn in turns:
        user = next((m.get("content") or "" for m in turn.prompt_messages or [] if m.get("role") == "user"), "")
        for retrieval in turn.retrievals.all():
            if retrieval.tool in ("prepopulate", "pinned") or retrieval.error:
                continue
            for snap in retrieval.results or []:
                if snap.get("excluded") or snap.get("repeated"):
                    continue
                total += 1
                redundant += in_window(snap.get("content") or "", user)
    return redundant, total


def aux_calls(simulation: Simulation, turns: list) -> int:
    """Model calls a run with a model makes besides the speakers' own: those counted on each turn
    (the judgement of each line, a distortion's retelling) and two per reflection made apart from
    a judgement."""
    counted = sum(int((turn.context or {}).get("aux_calls") or 0) for turn in turns)
    reflections = 0
    if simulation.bank_id is not None:
        # A reflection made in the judgement of a line (metadata "batched") rode that counted call.
        reflections = (Memory.objects.in_bank(simulation.bank).filter(kind=Memory.Kind.REFLECTION)
                       .exclude(metadata__batched=True).values("agent", "turn").distinct().count())
    return counted + REFLECTION_CALLS * reflections


def run_figures(simulation: Simulation) -> dict:
    """The run's own figures (its script's tool calls); the probes' are added by evaluate_agents."""
    turns = list(simulation.turns.done().prefetch_related("retrievals").order_by("index"))
    spoken = [t for t in turns if (t.usage or {}).get("calls")]
    redundant, returned = script_redundancy(turns)
    speaker = [counted_prompt(t.prompt_messages, offered_tools(turn_input(turn=t), mode_of(simulation))) for t in spoken]
    return {
        "turns": len(turns),
        "prompt_per_turn": speaker,
        "all_calls_per_turn": [tokens + side_tokens(t) for tokens, t in zip(speaker, spoken)],
        "full_definition_per_turn": [t.full_definition_tokens for t in spoken],
        "prefix_shares": prefix_shares(simulation, turns),
        "redundant": redundant, "returned": returned,
        "aux_calls": aux_calls(simulation, turns),
        "memory_ms": [float((t.context or {}).get("memory_ms")) for t in turns
                      if (t.context or {}).get("memory_ms") is not None],
    }


def window_of(transcript: list[tuple[int, str, str]]) -> str:
    return transcript_text(transcript) if transcript else ""
