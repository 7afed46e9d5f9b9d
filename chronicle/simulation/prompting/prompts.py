"""What an agent is told each turn: seed 000's minimal prompt, or memories pre-populated for it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from chronicle.simulation.prompting.context import Part, join_parts
from memory.api import CharacterSheet, ScenarioSheet, sheet_fields

# The transcript an agent reads: at least TRANSCRIPT_LINES entries, starting at a multiple of
# WINDOW_STEP, so the start stays put for WINDOW_STEP entries and every call until then begins with
# the one before it (what prefix caches reuse); a start that slid one line a turn changed every call.
# Each move costs every agent one call with nothing cached. Over 64 scripted turns of four agents a
# call sent, uncached, 335 tokens with a step of 16, 313 with 24, 257 with 32 and 268 with 48.
TRANSCRIPT_LINES = 8
WINDOW_STEP = 32
# Long lines (letters, speeches) would make those entries thousands of tokens on every call: past
# WINDOW_CHARS (~1,000 tokens; a short scene of 28 lines stays whole) the start moves on by
# WINDOW_SHORT_STEP entries at a time, never past the last TRANSCRIPT_LINES, so a long story's call
# stays flat; what scrolls out is memory's to bring back.
WINDOW_CHARS = 4000
WINDOW_SHORT_STEP = 8
# Pre-populated sections that stay the same from turn to turn (the sheet, the place): sent first.
STABLE_SECTIONS = ("Who you are", "Where you are")
LOOKED_UP = "What you looked up"  # a note's section: what the agent's tools found at that turn (tools mode)
NOTE_OPENING = "Before your turn "  # how a note opens (the scripted agent finds this turn's by it)
# Sent on the agent's first turn only, after what is kept (the rest of its sheet): not kept after it.
ONCE_SECTION = "All about you"
# Older lines the last one calls to mind: sent with this call alone, not kept in the conversation
# (they bear on this turn; kept, each would be paid for on every call until the window moved).
BROUGHT_BACK = "What this brings back"
THIS_CALL_SECTIONS = (BROUGHT_BACK,)

# Seed 000, "Minimal System Prompt": the agent learns who it is by calling tools, not from here.
MINIMAL_PROMPT = """You are an agent in a simulation. You have access to memory tools:

Character Knowledge (discover who you are):
- query_self(): Your core identity and personality
- query_background(): Your personal history
- query_communication_style(): How you speak and interact

Situational Awareness:
- query_scene(): Understand where you are
- query_character(name): Learn about other agents

Memory:
- query_memory(question): Recall what has happened

Use these tools to understand yourself and your situation before acting."""

PREPOPULATED_HEAD = "You are an agent in a simulation. What you remember comes back to you here and before your turns."

# One line on the markup the run reads in a line (chronicle.simulation.story.stage): a whisper reaches only
# its addressee, an action is seen by everyone present.
MARKUP = ("To whisper to one person, begin your line with *whispers to NAME*; put what you do between "
          "asterisks, like *pours the wine*. Everyone present hears everything else you say and sees what you do.")


def tool_guide(tools: list[dict], budget: int) -> str:
    """The tools exactly as sent, by name with their real parameters (? optional; the schemas attached
    say the rest), and the turn's budget."""
    calls = []
    for tool in tools:
        function = tool["function"]
        parameters = function.get("parameters") or {}
        required = set(parameters.get("required") or [])
        names = [name if name in required else f"{name}?" for name in (parameters.get("properties") or {})]
        calls.append(f"{function['name']}({', '.join(names)})")
    return (f"Your memory tools: {', '.join(calls)}. Ask them for what you do not see here, not for what you do: "
            "what they found at your earlier turns stays in the conversation, before your lines. "
            f"Use at most {budget} tool call{'s' if budget != 1 else ''} this turn, then speak your line.")


def header(*, agent: str, identity: str, scene: str, wants: str = "", more: Sequence[str] = (), when: str = "") -> str:
    """Who you are in a line (and what you want, where nothing else says it), where you are and when,
    each labelled: the same every turn, so it goes with the system message. more: what else the sheet
    holds, by query_self's aspect names, where a tool is the only way to it."""
    want = f"\nYou want: {wants}" if wants else ""
    rest = f"\nAlso on your sheet, for query_self: {', '.join(more)}" if more else ""
    time = f"\nWhen: {when}" if when else ""
    return f"## You\nYou are {agent}{': ' + identity if identity else ''}{want}{rest}\nWhere: {scene}{time}"


def now_line(*, present: list[str], clock: str, feeling: str = "", plan: str = "") -> str:
    """Who is here and the time, how the agent feels (its mood, when it is not calm) and its plan:
    what changes, sent last with the turn's ask."""
    here = ", ".join(present) if present else "nobody else"
    feels = f"\nYou feel: {feeling}" if feeling else ""
    planned = f"\nYour plan: {plan}" if plan else ""
    return f"## Now\nHere with you: {here}\nTime: {clock}{feels}{planned}"


@dataclass
class Section:
    title: str
    lines: list[str] = field(default_factory=list)
    ids: list[int] = field(default_factory=list)  # the memories behind the lines


RECENT_CHARS = 200  # a recent event is its line's opening sentences: the gist, the rest a search away


def gist(text: str, limit: int) -> str:
    """The text's whole sentences within `limit` characters (at least its first, cut at a word with "…")."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = max(text.rfind(mark, 0, limit) for mark in (". ", "! ", "? "))
    return text[:cut + 1] + " …" if cut > limit // 4 else text[:text.rfind(" ", 0, limit)] + " …"


def speaker_label(agent: str) -> str:
    # Only the label the transcript uses, so the lines make sense; who that is, the agent finds out.
    return f'In the transcript below you appear as "{agent}".'


def window(transcript: list[tuple[int, str, str]], stage: list[tuple[int, str]] = ()) -> list[tuple[int, str, str]]:
    """What the agent witnessed, in order (each turn's stage directions, speaker "", before its line),
    from a start that moves only every WINDOW_STEP entries."""
    merged = _merged(transcript, stage)
    return [(n, speaker, text) for n, _order, speaker, text in merged][_start(merged):]


def window_since(transcript: list[tuple[int, str, str]], stage: list[tuple[int, str]] = ()) -> int:
    """The first turn said after the window's start last moved (0 while it never has). What came back
    to an agent before its turns is kept in its conversation from there on only: a move rewrites the
    conversation's beginning anyway, so dropping the older notes then costs no cached prefix, and a
    long story's calls do not carry every note of the window."""
    merged = _merged(transcript, stage)
    start = _start(merged)
    if not start:
        return 0
    count = len(merged)
    while count - 1 > start and _start(merged[:count - 1]) == start:
        count -= 1
    return merged[count - 1][0]


def _merged(transcript: list[tuple[int, str, str]], stage: list[tuple[int, str]]) -> list[tuple]:
    return sorted([*((n, 0, "", f"*{text.strip().rstrip('.')}*") for n, text in stage),
                   *((n, 1, speaker, text) for n, speaker, text in transcript)], key=lambda e: (e[0], e[1]))


def _start(merged: list[tuple]) -> int:
    start = max(0, len(merged) - TRANSCRIPT_LINES) // WINDOW_STEP * WINDOW_STEP
    start = _within_chars(merged, start)
    while 0 < start < len(merged) and merged[start - 1][0] == merged[start][0]:
        start -= 1  # a turn is not cut: its stage directions come with its line
    return start


def _within_chars(merged: list[tuple], start: int) -> int:
    """The first start from `start` on, by WINDOW_SHORT_STEP entries, whose entries fit WINDOW_CHARS
    (the latest TRANSCRIPT_LINES are always kept). It only moves forward as lines are added, so calls
    between two moves still share their beginning."""
    last = max(0, len(merged) - TRANSCRIPT_LINES)
    chars = sum(len(entry[3]) for entry in merged[start:])
    while chars > WINDOW_CHARS and start + WINDOW_SHORT_STEP <= last:
        chars -= sum(len(entry[3]) for entry in merged[start:start + WINDOW_SHORT_STEP])
        start += WINDOW_SHORT_STEP
    return start


def _entry(number: int, speaker: str, text: str) -> str:
    # A stage direction has no number of its own: where it stands (before its turn's line) says when.
    # "[turn 5] *Sam steps out*" above "[turn 5] Jordan: …" read to models as one moment, or two turns 5.
    return f"[turn {number}] {speaker}: {text}" if speaker else text


def _read(entries: list[tuple[int, str, str]]) -> list[tuple[int, str, str]]:
    """Each entry as the agent reads it (number, speaker, text), with a line before one that comes
    after turns it did not witness (it was away): its return does not read as "just after"."""
    out, due = [], None  # due: the turn whose line would come next
    for number, speaker, text in entries:
        if due is not None and number > due:
            out.append((number, "", f"(turn {due} went on without you)" if number == due + 1 else
                        f"(turns {due}–{number - 1} went on without you)"))
        out.append((number, speaker, _entry(number, speaker, text)))
        due = number + 1 if speaker else number
    return out


def transcript_text(transcript: list[tuple[int, str, str]], stage: list[tuple[int, str]] = ()) -> str:
    lines = _read(window(transcript, stage))
    if not lines:
        return "(Nobody has spoken yet.)"
    return "\n".join(text for _number, _speaker, text in lines)


SPEAK = "Say your next line in character: one to three sentences of speech, without your name in front."
ASK = "It is your turn ({agent}). " + SPEAK
# Said once in the system message, so the ask at the end of every call is a few tokens.
HOW_TO_SPEAK = "When it is your turn, say one to three sentences in character, without your name in front."


def user_message(agent: str, transcript: list[tuple[int, str, str]], stage: list[tuple[int, str]] = ()) -> str:
    """The transcript and the ask in one message (the full-definition baseline's, and a speaker choice's)."""
    return f"Conversation so far:\n{transcript_text(transcript, stage)}\n\n{ASK.format(agent=agent)}"


@dataclass
class Message:
    """A user message of what an agent is sent, built from named parts (the context view's sections)."""
    parts: list[Part] = field(default_factory=list)

    def add(self, name: str, kind: str, text: str, joiner: str = "\n\n") -> None:
        if text:
            self.parts.append(Part(name, kind, text, joiner))

    def joined(self) -> tuple[str, list[dict]]:
        return join_parts(self.parts)

    def as_dict(self) -> dict:
        return {"role": "user", "content": self.joined()[0]}


def conversation(agent: str, transcript: list[tuple[int, str, str]], stage: list[tuple[int, str]] = (), *,
                 notes: dict[int, str] | None = None, note: str = "", once: str = "", brought: str = "",
                 pinned: str = "", now: str = "", short_ask: bool = False) -> list[Message]:
    """The turn's two user messages. The first grows from one turn of the agent to its next and is
    never rewritten: the transcript window, with the memories that came back to the agent before
    each of its turns where they were (`notes`, by turn number, as sent), this turn's (`note`) last.
    The second is this call's alone: the rest of the sheet on a first turn (`once`), the older lines
    the last one brings back (`brought`), what the writer pinned, who is here and the time (`now`), and
    the ask (`short_ask`: the system message says how)."""
    notes = notes or {}
    kept = Message()
    kept.add("Transcript window", "transcript", "Conversation so far:")
    entries = window(transcript, stage)
    joiner = "\n"
    for number, speaker, line in _read(entries):
        if speaker == agent and notes.get(number):
            kept.add(f"Pre-populated memories (turn {number})", "prepopulated", notes[number])
            joiner = "\n\n"
        kept.add("Transcript window", "transcript", line, joiner)
        joiner = "\n"
    kept.add("Pre-populated memories (this turn)", "prepopulated", note)
    if not entries:  # said in the second message, so the next turn's first begins as this one did
        now = "\n".join(x for x in [now, "Nobody has spoken yet."] if x)
    last = Message()
    last.add(f"Pre-populated memories ({ONCE_SECTION.lower()})", "prepopulated", once)
    last.add(f"Pre-populated memories ({BROUGHT_BACK.lower()})", "prepopulated", brought)
    last.add("Pinned memories", "pinned", pinned)
    last.add("Now, and the ask", "header", now)
    last.add("Now, and the ask", "header", f"It is your turn ({agent})." if short_ask else ASK.format(agent=agent))
    return [kept, last]


# Seed 000, "Prompt Integration": mandatory memory consultation and confidence gating (per simulation).
NO_MEMORIES = "(no relevant memories)"
CONSULT_TOOLS = f"""Before deciding what to say, you MUST:
1. Check your memories for relevant past experiences (call your memory tools)
2. Recall your history with the characters present
3. Consider similar situations you have faced
4. If none are relevant, start your reply with "{NO_MEMORIES}" on its own line, then speak."""
CONSULT_READ = f"""Before deciding what to say, you MUST:
1. Check the memories above for relevant past experiences
2. Recall your history with the characters present
3. Consider similar situations you have faced
4. If none are relevant, start your reply with "{NO_MEMORIES}" on its own line, then speak."""
# Tool answers' retrieval_confidence (memory/recalling/confidence.py: a calibrated probability of
# relevance) below this: the agent is told not to rely on them; pre-populated memories below it are marked weak.
CONFIDENCE_FLOOR = 0.5
GATING = f"""Confidence gating: rely only on memories you are sure of. A tool answer's "retrieval_confidence" below \
{CONFIDENCE_FLOOR} means its memories may not be about this at all{{weak}}. When what you remember is weak or missing and \
the decision matters, search your memories again (query_memory) before deciding; justify your line with the memories \
you use and never invent one."""


def system_parts(*, mode: str, agent: str, sections: list[Section] | None = None, consult_memories: bool = False,
                 confidence_gating: bool = False, tools: list[dict] | bool | None = None, budget: int = 6,
                 now: str = "", minimal: bool = False) -> list[Part]:
    """The system message as named parts: instructions, tools, markup, options, the speaker's label,
    who you are and where (the stable pre-populated sections, then the header), all of it the same
    from one turn to the next. minimal: seed 000's prompt, for writers who study discovery."""
    parts: list[Part] = []
    offered = tools if isinstance(tools, list) else []
    tools = mode in ("tools", "both") if tools is None else bool(tools)
    if mode in ("prepopulate", "both"):
        parts.append(Part("Instructions", "instructions", PREPOPULATED_HEAD))
    if mode in ("tools", "both") and tools:  # no tool offered: no instructions to use them
        if minimal or not offered:
            text = MINIMAL_PROMPT if mode == "tools" else MINIMAL_PROMPT.split("\n", 1)[1].strip()
        else:
            text = tool_guide(offered, budget)
        parts.append(Part("Tool instructions", "tool_instructions", text))
    if not minimal:
        parts.append(Part("Markup", "instructions", f"{MARKUP} {HOW_TO_SPEAK}"))
    if consult_memories:
        parts.append(Part("Memory consultation", "prompt_options", CONSULT_TOOLS if tools else CONSULT_READ))
    if confidence_gating:
        weak = ' (and a pre-populated memory marked "(weak match)" may be unrelated)' if mode != "tools" else ""
        parts.append(Part("Confidence gating", "prompt_options", GATING.format(weak=weak)))
    if minimal or not now:  # the header, when there is one, says who the agent is
        parts.append(Part("Speaker label", "instructions", speaker_label(agent)))
    # Who you are and where change least from turn to turn: here; the rest comes in the conversation.
    for section in sections or []:
        if section.lines and section.title in STABLE_SECTIONS:
            parts.append(Part(f"Pre-populated: {section.title}", "prepopulated", section_text(section)))
    if now and not minimal:
        parts.append(Part("Header", "header", now))
    return parts


def section_text(section: Section) -> str:
    body = "\n".join(f"- {line}" for line in section.lines)
    return f"## {section.title}\n{body}"


def note_text(sections: list[Section], number: int) -> str:
    """The memories that come back before the agent's turn `number` (all but the stable sections and
    the first turn's whole sheet), kept in the conversation from then on."""
    body = [section_text(s) for s in sections
            if s.lines and s.title not in (*STABLE_SECTIONS, ONCE_SECTION, *THIS_CALL_SECTIONS)]
    return f"{NOTE_OPENING}{number}, you recall:\n" + "\n".join(body) if body else ""


def system_prompt(*, mode: str, agent: str, sections: list[Section] | None = None, **options) -> str:
    return join_parts(system_parts(mode=mode, agent=agent, sections=sections, **options))[0]


def full_definition_text(sheet: CharacterSheet, scenario: ScenarioSheet | None, cast: list[CharacterSheet]) -> str:
    """The prompt an agent would need without memory: its whole definition, the scene and the others."""
    lines = [f"You are {sheet.name}."]
    for label, value in [("Role", sheet.role), ("Archetype", sheet.archetype), ("Description", sheet.description),
                         ("Public face", sheet.public_face),
                         ("Background", sheet.background), ("Communication style", sheet.communication_style),
                         ("Decision style", sheet.decision_style), ("Traits", ", ".join(sheet.traits)),
                         ("Skills", ", ".join(sheet.skills)), ("Values", ", ".join(sheet.values)),
                         ("Goals", ", ".join(sheet.goals)), ("Secrets", " ".join(sheet.secrets)),
                         ("Personality", sheet.personality), ("Situation", sheet.card_scenario),
                         ("Example dialogue", sheet.mes_example)]:
        if value:
            lines.append(f"{label}: {value}")
    for extra in sheet.extra_memories:
        lines.append(extra.content)
    if scenario:
        for label, value in [("Scene", scenario.title), ("Location", scenario.location), ("Atmosphere", scenario.atmosphere),
                             ("Time", scenario.time_of_day), ("Situation", scenario.description)]:
            if value:
                lines.append(f"{label}: {value}")
    for other in cast:
        if other.name == sheet.name:
            continue
        # What this character can know of the other: the same as its gifted "who is X" memory.
        lines.append(f"{sheet_fields.other_text(other)} {sheet.knowledge.get(other.name, '')}".strip())
    return "\n".join(lines)
