"""What an agent is told each turn: seed 000's minimal prompt, or memories pre-populated for it."""

from __future__ import annotations

from dataclasses import dataclass, field

from memory.sheets import CharacterSheet, ScenarioSheet

TRANSCRIPT_LINES = 8  # recent lines sent with every turn

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


@dataclass
class Section:
    title: str
    lines: list[str] = field(default_factory=list)


def speaker_label(agent: str) -> str:
    # Only the label the transcript uses, so the lines make sense; who that is, the agent finds out.
    return f'In the transcript below you appear as "{agent}".'


def transcript_text(transcript: list[tuple[int, str, str]]) -> str:
    if not transcript:
        return "(Nobody has spoken yet.)"
    return "\n".join(f"[turn {number}] {speaker}: {text}" for number, speaker, text in transcript[-TRANSCRIPT_LINES:])


def user_message(agent: str, transcript: list[tuple[int, str, str]]) -> str:
    return (
        f"Conversation so far:\n{transcript_text(transcript)}\n\n"
        f"It is your turn ({agent}). Say your next line in character: one to three sentences of speech, "
        "without your name in front."
    )


def system_prompt(*, mode: str, agent: str, sections: list[Section] | None = None) -> str:
    parts = []
    if mode in ("prepopulate", "both"):
        parts.append(PREPOPULATED_HEAD)
        for section in sections or []:
            parts.append(f"## {section.title}\n" + ("\n".join(f"- {line}" for line in section.lines) or "- (nothing)"))
    if mode in ("tools", "both"):
        parts.append(MINIMAL_PROMPT if mode == "tools" else MINIMAL_PROMPT.split("\n", 1)[1].strip())
    parts.append(speaker_label(agent))
    return "\n\n".join(parts)


def full_definition_text(sheet: CharacterSheet, scenario: ScenarioSheet | None, cast: list[CharacterSheet]) -> str:
    """The prompt an agent would need without memory: its whole definition, the scene and the others."""
    lines = [f"You are {sheet.name}."]
    for label, value in [("Role", sheet.role), ("Archetype", sheet.archetype), ("Description", sheet.description),
                         ("Background", sheet.background), ("Communication style", sheet.communication_style),
                         ("Decision style", sheet.decision_style), ("Traits", ", ".join(sheet.traits)),
                         ("Skills", ", ".join(sheet.skills)), ("Values", ", ".join(sheet.values)),
                         ("Goals", ", ".join(sheet.goals))]:
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
        known = sheet.knowledge.get(other.name, "")
        lines.append(f"{other.name}: {other.role}. {other.archetype}. {other.description} {known}".strip())
    return "\n".join(lines)
