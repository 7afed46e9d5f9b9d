"""What the dry run's agent reads off the messages it is sent, as a model would: the tools it has
called this turn and what they returned, what its earlier lookups kept, and the memories it was
briefed with, by section."""

from __future__ import annotations

import json
import re

from chronicle.simulation.prompting.prompts import LOOKED_UP, NOTE_OPENING


def tool_results(messages: list[dict]) -> tuple[list[str], dict[str, list[dict]]]:
    """The tools already called this turn and the memories each returned (in call order)."""
    names: dict[str, str] = {}
    called: list[str] = []
    results: dict[str, list[dict]] = {}
    for message in messages:
        for call in message.get("tool_calls") or []:
            names[call["id"]] = call["function"]["name"]
            called.append(call["function"]["name"])
        if message.get("role") == "tool":
            name = names.get(message.get("tool_call_id"), "")
            try:
                body = json.loads(message.get("content") or "{}")
            except ValueError:
                body = {}
            found = body.get("memories") or body.get("facts") or []
            # What it found that is in front of the agent already: its earlier lookups, by id.
            found = [*found, *looked_up(messages, body.get("already_given") or [])]
            results.setdefault(name, []).extend(found)
    return called, results

def looked_up(messages: list[dict], ids: list) -> list[dict]:
    """Of the memories kept in the conversation from the agent's earlier lookups, those `ids` names."""
    if not ids:
        return []
    kept = next((m.get("content") or "" for m in messages if m.get("role") == "user"), "")
    by_id, inside = {}, False
    for raw in kept.splitlines():
        if raw.startswith("## "):
            inside = raw[3:].strip() == LOOKED_UP
        elif inside and (match := re.match(r"- #(\d+)(?: \(turn (\d+)\))? (.*)", raw)):
            by_id[int(match.group(1))] = {"content": match.group(3), "memory_id": int(match.group(1)),
                                          **({"turn": match.group(2)} if match.group(2) else {})}
        elif not raw.strip():
            inside = False
    return [by_id[int(i)] for i in ids if str(i).isdigit() and int(i) in by_id]

def prepopulated(messages: list[dict]) -> dict[str, list[str]]:
    """Memories injected for this turn, by section ("## Who you are" → lines): in the system message,
    this turn's note at the end of the conversation, and the last message (earlier turns' notes
    were answered then)."""
    sections: dict[str, list[str]] = {}
    current = None
    system = messages[0].get("content", "") if messages and messages[0].get("role") == "system" else ""
    users = [m.get("content") or "" for m in messages[1:] if m.get("role") == "user"]
    latest = users[-1:] if len(users) > 1 else []
    if users:
        # This turn's note closes the conversation message (no line after it yet).
        kept = users[0]
        at = kept.rfind(NOTE_OPENING)
        if at >= 0 and "\n[turn " not in kept[at:]:
            latest.insert(0, kept[at:])
    for raw in "\n".join([system, *latest]).splitlines():
        if raw.startswith("## "):
            current = raw[3:].strip().lower()
            sections[current] = []
        elif current and raw.startswith("- "):
            sections[current].append(raw[2:].strip())
    # A belief is held from the note that gave it on (a note does not repeat what is still above).
    # So is what its earlier lookups found (tools mode): kept in the conversation, not said again.
    held, looked, current = [], [], None
    for raw in (users[0] if users else "").splitlines():
        if raw.startswith("## "):
            current = raw[3:].strip().lower()
        elif current == "what you believe" and raw.startswith("- "):
            held.append(raw[2:].strip())
        elif current == LOOKED_UP.lower() and raw.startswith("- "):
            looked.append(re.sub(r"^#\d+\s+(?:\(turn \d+\)\s+)?", "", raw[2:].strip()))
        elif not raw.strip() or raw.startswith("["):
            current = None
    if held:
        sections["what you believe"] = list(dict.fromkeys([*held, *sections.get("what you believe", [])]))
    if looked:
        sections["looked up before"] = list(dict.fromkeys(looked))
    # The fixed header: "You are Hannah: Cellist — …", "Where: the place" and "When: the time".
    you = re.search(r"^## You\n(You are .+)$", system, re.MULTILINE)
    place = re.search(r"^Where: (.+)$", system, re.MULTILINE)
    when = re.search(r"^When: (.+)$", system, re.MULTILINE)
    wants = re.search(r"^You want: (.+)$", system, re.MULTILINE)
    if you:
        sections["you"] = [you.group(1)]
    if wants:
        sections["you want"] = [w.strip() for w in wants.group(1).split(";") if w.strip()]
    if place and place.group(1) != "(not described)":
        sections["scene"] = [f"Location: {place.group(1)}" + (f". {when.group(1)}" if when else "")]
    return sections
