"""One turn: build the prompt, run the tool loop, collect Retrievals, return the line.

Nothing here writes to the database: `turns.turn_finish` stores the outcome (turn, retrievals,
episodic memories) in one transaction, so a worker killed mid-turn leaves nothing half-written.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable

from django.conf import settings

from chronicle.simulation.prompting.context import MESSAGE_OVERHEAD, REPLY_PRIMING, CallRecorder, count_tokens, join_parts
from chronicle.simulation.prompting.prompts import (
    ONCE_SECTION, STABLE_SECTIONS, THIS_CALL_SECTIONS, conversation, full_definition_text, note_text, section_text, system_parts,
    user_message, window,
)
from chronicle.simulation.turn.briefing import (
    clock_text, header_shows, identity_header, now_text, pinned_note, prepopulate, took_it,
)
from chronicle.simulation.turn.looked_up import keep_looked_up, notes_without_excluded
from chronicle.simulation.prompting.replies import is_refusal, text_tool_calls
from chronicle.simulation.turn.tool_calls import for_model, offered_tools, run_round
from chronicle.simulation.run.turn_models import WRITER_LINE_NOTE
from chronicle.simulation.turn.types import TurnFailed, TurnInput, TurnOutcome
from chronicle.simulation.providers import ChatResult, Provider, ProviderError, ToolsUnsupported
from memory.api import CharacterSheet, ToolContext, distortions

MAX_UTTERANCE = 4000
# "(no relevant memories)" as models write it: any case, brackets or not, a full stop or a colon after.
NO_MEMORIES_RE = re.compile(r"^[(\[]?\s*no relevant memor(?:y|ies)(?: found)?\s*[)\]]?\s*[.:;!—-]?\s*", re.IGNORECASE)


def run_turn(turn: TurnInput, provider: Provider, *, heartbeat: Callable[[], None] = lambda: None,
             sleep: Callable[[float], None] = time.sleep, pace_s: float = 0.0) -> TurnOutcome:
    """One agent's turn. pace_s: a run's pause before its line (Simulation.pace_s), taken where a
    model takes its time: after the memories it is given, before it answers."""
    outcome = TurnOutcome()
    if turn.transcript and turn.transcript[-1][0] == turn.number - 1:  # the line just before, as witnessed
        _number, speaker, text = turn.transcript[-1]
        # A whisper between others reads "(whispers something to Sam)" to those who saw it.
        outcome.replying_to.append(f"{speaker} {text[1:-1]}" if text.startswith("(") and text.endswith(")")
                                   else f"{speaker} said: {text}")
    # Then this turn's directions: a line that answers "*Alex's phone buzzes*" is judged with it.
    outcome.replying_to += [f"*{text.strip().rstrip('.')}*" for number, text in turn.stage if number == turn.number]
    sheet = next((c for c in turn.cast if c.name == turn.agent), CharacterSheet(name=turn.agent))
    user = user_message(turn.agent, turn.transcript, turn.stage)
    # The baseline request: the whole definition as the system message, the same user message, no tools.
    outcome.full_definition_tokens = (count_tokens(full_definition_text(sheet, turn.scenario, turn.cast)) + count_tokens(user)
                                      + 2 * MESSAGE_OVERHEAD + REPLY_PRIMING)
    if turn.line.strip():
        # The writer wrote this line: no model call, but it is heard (and remembered) like any other.
        outcome.utterance = shorten(turn.line.strip(), outcome, "The line written by hand")
        outcome.notes.append(WRITER_LINE_NOTE)
        return outcome
    if turn.greeting.strip():
        outcome.utterance = shorten(turn.greeting.strip(), outcome, "The card's greeting")
        outcome.notes.append(f"{turn.agent}'s greeting from the character card (no model call).")
        return outcome
    try:
        _converse(turn, provider, outcome, mode=turn.mode, heartbeat=heartbeat, sleep=sleep, pace_s=pace_s)
    except ToolsUnsupported as exc:
        # A model without function calling still gets its memories: injected before the turn.
        outcome.tools_unsupported = True
        outcome.notes.append(f"model has no tool calling ({exc}): fell back to prepopulate")
        outcome.messages, outcome.retrievals, outcome.context = [], [], {}
        _converse(turn, provider, outcome, mode="prepopulate", heartbeat=heartbeat, sleep=sleep)
    return outcome


def _briefed(turn: TurnInput, outcome: TurnOutcome, mode: str,
             tools: list[dict] | None) -> tuple[CallRecorder, set[int]]:
    """The turn's messages (outcome.messages): the system message, the conversation and the call's
    own part; this turn's note is kept on the outcome for the agent's next turns. Also the memories
    those messages show (this turn's sections, the notes kept from earlier turns, what the writer pinned)."""
    minimal = turn.tool_prompt == "seed000"
    sections = prepopulate(turn, outcome) if mode in ("prepopulate", "both") else []
    if not minimal and (took := took_it(turn, outcome)).lines:
        sections.append(took)
    parts = system_parts(mode=mode, agent=turn.agent, sections=sections, consult_memories=turn.consult_memories,
                         confidence_gating=turn.confidence_gating, tools=tools or False, budget=turn.max_tool_calls,
                         now=identity_header(turn), minimal=minimal)
    system, spans = join_parts(parts)
    note = note_text(sections, turn.number)
    kept = [s for s in sections if s.title not in (*STABLE_SECTIONS, ONCE_SECTION, *THIS_CALL_SECTIONS)]
    once = "\n\n".join(section_text(s) for s in sections if s.title == ONCE_SECTION and s.lines)
    brought = "\n\n".join(section_text(s) for s in sections if s.title in THIS_CALL_SECTIONS and s.lines)
    sent = conversation(turn.agent, turn.transcript, turn.stage, notes=notes_without_excluded(turn),
                        note=note, once=once, brought=brought, pinned=pinned_note(turn, outcome), now="" if minimal else now_text(turn),
                        short_ask=not minimal)
    outcome.messages = [{"role": "system", "content": system}, *(m.as_dict() for m in sent)]
    recorder = CallRecorder(system_spans=spans, tools=tools, user_spans=[m.joined()[1] for m in sent])
    outcome.context = recorder.context()
    # The next turns' conversation repeats it as it was (turn_inputs.notes_for reads it back).
    outcome.context["note"] = {"text": note, "ids": [i for s in kept for i in s.ids]} if note else {}
    shown = {i for s in sections for i in s.ids} | set(turn.kept) \
        | {snap["memory_id"] for snap in turn.pinned or [] if snap.get("memory_id")}
    return recorder, shown


def _converse(turn: TurnInput, provider: Provider, outcome: TurnOutcome, *, mode: str,
              heartbeat: Callable[[], None], sleep: Callable[[float], None], pace_s: float = 0.0) -> None:
    # The simulation's tool set; the writes among them queue in context.deferred and are applied by
    # the turn's one transaction (turns.turn_finish), so a redone turn never writes twice.
    tools = offered_tools(turn, mode)
    recorder, shown = _briefed(turn, outcome, mode, tools)
    briefed = set(shown)  # `shown` grows with what this turn's tools hand over
    if pace_s:
        heartbeat()
        sleep(pace_s)
    messages = outcome.messages
    offered = {t["function"]["name"] for t in tools or []}
    context = tool_context(turn, deferred=outcome.writes)
    calls_left = turn.max_tool_calls
    hints = turn.hints
    empty_answers = 0
    handed = shown  # memories the model has in front of it: its notes, then what this turn's tools gave
    for _round in range(turn.max_tool_calls + 3):
        result = _call(provider, messages, tools, calls_left > 0, hints, outcome, heartbeat, sleep)
        outcome.add_usage(result)
        recorder.record(outcome.context, messages, result)
        message = result.message
        tool_calls = message.get("tool_calls") or []
        if not tool_calls and tools and calls_left > 0:
            tool_calls = text_tool_calls(message.get("content"), offered, prefix=f"text_{turn.index}_{_round}")
            if tool_calls:
                outcome.notes.append("The model wrote a tool call as text; it was run as one.")
        if tool_calls and tools:
            messages.append({"role": "assistant", "content": message.get("content"), "tool_calls": tool_calls})
            answers = run_round(tool_calls, offered, context, outcome, calls_left=calls_left, limit=turn.max_tool_calls,
                                excluded=turn.excluded, handed=handed)
            calls_left -= len(tool_calls)
            for call, response in zip(tool_calls, answers):
                # As written (no \u escapes: a quotation mark or a dash is one token, not three) and
                # without the spaces after separators (a twelfth of an answer's tokens).
                messages.append({"role": "tool", "tool_call_id": call.get("id") or "",
                                 "content": json.dumps(for_model(response), ensure_ascii=False, separators=(",", ":"))})
            heartbeat()
            continue
        text = clean_utterance(message.get("content") or "", turn.agent, limit=None)
        if marker := NO_MEMORIES_RE.match(text):
            # Memory consultation: the agent said it found nothing relevant; a note, not part of the line.
            text = text[marker.end():].strip()
            outcome.notes.append(f"{turn.agent} found no relevant memories (memory consultation).")
        if text and is_refusal(text):
            messages.append({"role": "assistant", "content": message.get("content")})
            raise TurnFailed(f"the model declined to speak as {turn.agent}: “{text[:200]}”. Regenerate the turn, "
                             "write the line by hand, or try another model.", outcome=outcome)
        if text:
            messages.append({"role": "assistant", "content": message.get("content")})
            outcome.utterance = shorten(text, outcome, "The model's reply")
            keep_looked_up(turn, outcome, shown=briefed)
            return
        empty_answers += 1
        if calls_left > 0 and tools:
            calls_left = 0  # an empty answer: ask once more, this time for speech only
            continue
        break
    raise TurnFailed(no_line_reason(outcome, empty_answers, turn.max_tool_calls), outcome=outcome)


def tool_context(turn: TurnInput, *, deferred: list[dict]) -> ToolContext:
    """What the agent's tool calls at this turn search with: its bank, turn, presets, distortions."""
    return ToolContext(bank=turn.bank, agent=turn.agent, current_turn=turn.number, scoring=turn.scoring,
                       weights=turn.weights or None, known_characters=[c.name for c in turn.cast],
                       deferred=deferred, enhance=enhance_options(turn), clock=turn.clock,
                       associations=turn.associations, distort=distortions.retrieval_filter(turn.agent, turn.distortions),
                       mood=turn.mood, present=[turn.agent, *turn.others], confidence=turn.confidence_gating,
                       window_turns=frozenset(number for number, _speaker, _text in window(turn.transcript, turn.stage)),
                       shown=header_shows(turn), now=clock_text(turn), story_now=turn.story_time)


def enhance_options(turn: TurnInput) -> dict:
    """The simulation's query enhancement for this turn's tool calls (memory.recalling applies it)."""
    options: dict = {}
    if turn.query_context:
        last = turn.transcript[-1] if turn.transcript else None
        scene = turn.scenario.location if turn.scenario else ""
        options["context"] = " ".join(p for p in [scene, f"{last[1]}: {last[2]}" if last else ""] if p)
    if turn.query_temporal:
        options["temporal"] = True
    if turn.query_synonyms:
        options["synonyms"] = True
    return options


def no_line_reason(outcome: TurnOutcome, empty_answers: int, limit: int) -> str:
    """Why a turn ended with nothing to say, in the writer's words: what the model did instead."""
    failed = [r for r in outcome.retrievals if r.get("error") and r["tool"] not in ("prepopulate", "pinned")]

    def calls(n: int) -> str:
        return f"{n} tool call{'s' if n != 1 else ''}"

    def taking(prefix: str) -> list[dict]:
        nonlocal failed
        rows = [r for r in failed if r["error"].startswith(prefix)]
        failed = [r for r in failed if r not in rows]
        return rows

    parts = []
    if rows := taking("malformed arguments for "):
        first = rows[0]["error"].removeprefix("malformed arguments for ").split(". Send a JSON object")[0]
        parts.append(f"{calls(len(rows))} with malformed arguments ({first})")
    if rows := taking("unknown tool "):
        parts.append(f"{calls(len(rows))} to tools that do not exist ({', '.join(sorted({r['tool'] for r in rows}))})")
    if rows := taking("tool call limit reached"):
        parts.append(f"{len(rows)} more after the limit of {limit} tool calls a turn")
    if failed:
        parts.append(f"{calls(len(failed))} that failed ({failed[0]['tool']}: {failed[0]['error']})")
    if empty_answers:
        parts.append(f"{empty_answers} empty repl{'ies' if empty_answers != 1 else 'y'}")
    if not parts:
        return "the model never gave a line to say"
    return "the model never gave a line to say: " + "; ".join(parts)


def shorten(text: str, outcome: TurnOutcome, what: str) -> str:
    """Cut a line to MAX_UTTERANCE characters, and say so on the turn (never silently)."""
    if len(text) <= MAX_UTTERANCE:
        return text
    outcome.notes.append(f"{what} was {len(text):,} characters; it was shortened to the first {MAX_UTTERANCE:,}.")
    return text[:MAX_UTTERANCE]


def _call(provider, messages, tools, allow_tools, hints, outcome, heartbeat, sleep) -> ChatResult:
    retries = settings.LLM_RETRIES
    for attempt in range(retries + 1):
        heartbeat()
        started = time.perf_counter()
        try:
            # A copy: the provider must see exactly what is recorded, not a list it could change.
            result = provider.chat([dict(m) for m in messages], tools=tools, allow_tools=allow_tools, hints=hints)
        except ToolsUnsupported:
            raise
        except ProviderError as exc:
            outcome.llm_ms += (time.perf_counter() - started) * 1000  # a failed attempt is the model's time too
            outcome.failures.append(f"call {outcome.calls + 1}, attempt {attempt + 1}: {exc}")
            if not exc.retryable or attempt == retries:
                tries = f" (tried {attempt + 1} times)" if attempt else ""
                raise TurnFailed(f"{exc}{tries}", outcome=outcome) from exc
            sleep(settings.LLM_BACKOFF * (2 ** attempt))
            continue
        outcome.llm_ms += (time.perf_counter() - started) * 1000
        return result
    raise AssertionError("unreachable")


def clean_utterance(text: str, agent: str, *, limit: int | None = MAX_UTTERANCE) -> str:
    text = re.sub(r"<think>.*?</think>", "", text or "", flags=re.DOTALL).strip()
    text = re.sub(rf"^\s*(\[turn \d+\]\s*)?{re.escape(agent)}\s*:\s*", "", text)
    if len(text) >= 2 and text[0] == text[-1] == '"':
        text = text[1:-1].strip()
    return text[:limit] if limit else text
