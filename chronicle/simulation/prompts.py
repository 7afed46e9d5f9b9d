"""What an agent is told each turn: seed 000's minimal prompt, or memories pre-populated for it."""

from __future__ import annotations

from dataclasses import dataclass, field

from chronicle.simulation.context import Part, join_parts
from memory.api import CharacterSheet, ScenarioSheet, other_text

TRANSCRIPT_LINES = 8  # recent lines sent with every turn
# Pre-populated sections that stay the same from turn to turn (the sheet, the place): sent first.
STABLE_SECTIONS = ("Who you are", "Where you are")

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

PREPOPULATED_HEAD = "You are an agent in a simulation. These memories came back to you just now:"

# One line on the markup the run reads in a line (chronicle.simulation.stage): a whisper reaches only
# its addressee, an action is seen by everyone present.
MARKUP = ("To whisper to one person, begin your line with *whispers to NAME*; put what you do between "
          "asterisks, like *pours the wine*. Everything else you say, everyone present hears.")


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
    return (f"Your memory tools: {', '.join(calls)}. Ask them for what you do not see here, not for what you do. "
            f"Use at most {budget} tool call{'s' if budget != 1 else ''} this turn, then speak your line.")


def header(*, agent: str, identity: str, scene: str, present: list[str], clock: str, wants: str = "") -> str:
    """The fixed header of every turn: who you are in a line (and what you want, where nothing else
    says it), the scene in a line, who is here, the time."""
    here = ", ".join(present) if present else "nobody else"
    want = f"\nYou want: {wants}" if wants else ""
    return (f"## Now\nYou are {agent}{': ' + identity if identity else ''}{want}\nScene: {scene}\n"
            f"Here with you: {here}\nTime: {clock}")


@dataclass
class Section:
    title: str
    lines: list[str] = field(default_factory=list)


def speaker_label(agent: str) -> str:
    # Only the label the transcript uses, so the lines make sense; who that is, the agent finds out.
    return f'In the transcript below you appear as "{agent}".'


def window(transcript: list[tuple[int, str, str]], stage: list[tuple[int, str]] = ()) -> list[tuple[int, str, str]]:
    """The last TRANSCRIPT_LINES of what the agent witnessed, in order: each turn's stage directions
    (speaker "") before its line."""
    merged = sorted([*((n, 0, "", f"*{text.strip().rstrip('.')}*") for n, text in stage),
                     *((n, 1, speaker, text) for n, speaker, text in transcript)], key=lambda e: (e[0], e[1]))
    return [(n, speaker, text) for n, _order, speaker, text in merged][-TRANSCRIPT_LINES:]


def transcript_text(transcript: list[tuple[int, str, str]], stage: list[tuple[int, str]] = ()) -> str:
    lines = window(transcript, stage)
    if not lines:
        return "(Nobody has spoken yet.)"
    return "\n".join(f"[turn {number}] {speaker}: {text}" if speaker else f"[turn {number}] {text}"
                     for number, speaker, text in lines)


def user_message(agent: str, transcript: list[tuple[int, str, str]], stage: list[tuple[int, str]] = ()) -> str:
    return (
        f"Conversation so far:\n{transcript_text(transcript, stage)}\n\n"
        f"It is your turn ({agent}). Say your next line in character: one to three sentences of speech, "
        "without your name in front."
    )


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
    """The system message as named parts, static first (instructions, tools, markup, options, the
    speaker's label), then what changes (the header, pre-populated memories), so prefix caches reuse
    the start of every call. minimal: seed 000's prompt, for writers who study discovery."""
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
        parts.append(Part("Markup", "instructions", MARKUP))
    if consult_memories:
        parts.append(Part("Memory consultation", "prompt_options", CONSULT_TOOLS if tools else CONSULT_READ))
    if confidence_gating:
        weak = ' (and a pre-populated memory marked "(weak match)" may be unrelated)' if mode != "tools" else ""
        parts.append(Part("Confidence gating", "prompt_options", GATING.format(weak=weak)))
    if minimal or not now:  # the header, when there is one, says who the agent is
        parts.append(Part("Speaker label", "instructions", speaker_label(agent)))
    # Who you are and where change least from turn to turn: before the header, whose time moves on.
    sections = sorted(sections or [], key=lambda section: section.title not in STABLE_SECTIONS)
    for section in sections:
        if not section.lines:
            continue  # nothing came back for it: the model need not read an empty heading
        if now and not minimal and section.title not in STABLE_SECTIONS:
            parts.append(Part("Header", "header", now))
            now = ""
        body = "\n".join(f"- {line}" for line in section.lines)
        parts.append(Part(f"Pre-populated: {section.title}", "prepopulated", f"## {section.title}\n{body}"))
    if now and not minimal:
        parts.append(Part("Header", "header", now))
    return parts


def system_prompt(*, mode: str, agent: str, sections: list[Section] | None = None, **options) -> str:
    return join_parts(system_parts(mode=mode, agent=agent, sections=sections, **options))[0]


def full_definition_text(sheet: CharacterSheet, scenario: ScenarioSheet | None, cast: list[CharacterSheet]) -> str:
    """The prompt an agent would need without memory: its whole definition, the scene and the others."""
    lines = [f"You are {sheet.name}."]
    for label, value in [("Role", sheet.role), ("Archetype", sheet.archetype), ("Description", sheet.description),
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
        lines.append(f"{other_text(other)} {sheet.knowledge.get(other.name, '')}".strip())
    return "\n".join(lines)
