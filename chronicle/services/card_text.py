"""The conventions SillyTavern cards write inside a description, read into a character's sheet.

- **PList**: `[Seraphina's Personality= "caring", "protective"; Body: pink hair, amber eyes]`
- **W++**: `[character("Aria") { Mind("curious" + "stubborn") Likes("old maps") }]`
- **Ali:Chat**: example dialogue after `<START>` (`{{user}}: …` / `{{char}}: …`), which is how the
  character talks, not who it is.
- A genre block (`[Genre: fantasy; Tags: adventure; Scenario: …]`) is the card's scenario.

What no convention claims stays the description, as written. Keys are read by meaning (personality,
mind, traits → traits; likes → values; body, species, clothes → a line of the description)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

LIST_KEYS = {
    "traits": ("personality", "persona", "mind", "traits", "trait", "nature", "temperament", "character"),
    "skills": ("skills", "skill", "abilities", "ability", "powers", "talents"),
    "values": ("values", "likes", "loves", "beliefs"),
    "goals": ("goals", "goal", "wants", "desires", "motivation", "motivations", "aims"),
}
TEXT_KEYS = {
    "background": ("background", "history", "backstory", "past"),
    "communication_style": ("speech", "speech style", "voice", "speaks", "speaking style", "communication"),
    "role": ("occupation", "job", "role", "profession", "title"),
}
SCENARIO_KEYS = ("genre", "tags", "scenario", "setting", "world")
ITEMS_KEPT = 40  # a card's trait list rarely runs longer; the sheet's lists are for the gist

# A block on a line of its own, as cards write them ("[OOC: …]" in a sentence is prose).
_BLOCK = re.compile(r"^[ \t]*\[([^\[\]]+)\][ \t]*$", re.DOTALL | re.MULTILINE)
NOT_THE_CHARACTER = ("ooc", "note", "notes", "system", "instruction", "instructions", "author's note")
_WPP_ATTR = re.compile(r"([A-Za-z][\w ]*?)\s*\(\s*(\"[^\"]*\"(?:\s*\+\s*\"[^\"]*\")*)\s*\)")
_START = re.compile(r"<START>", re.IGNORECASE)
_QUOTED = re.compile(r"\"([^\"]*)\"")


@dataclass
class CardText:
    description: str = ""  # what no convention claimed, and the descriptive details as lines
    lists: dict[str, list[str]] = field(default_factory=dict)  # traits, skills, values, goals
    texts: dict[str, str] = field(default_factory=dict)  # background, communication_style, role
    examples: str = ""  # Ali:Chat example dialogue, with its <START> separators
    scenario: str = ""
    found: bool = False  # whether the description used any convention at all


def _key(raw: str, name: str) -> str:
    """"Seraphina's Personality", "{{char}}'s persona", "Mind" → "personality", "persona", "mind"."""
    key = raw.strip().strip("\"'").strip()
    key = re.sub(rf"^(?:\{{\{{char\}}\}}|{re.escape(name)})(?:['’]s)?\s*", "", key, flags=re.IGNORECASE) if name else key
    return key.strip().casefold()


def _items(raw: str) -> list[str]:
    quoted = _QUOTED.findall(raw)
    parts = quoted if quoted else re.split(r"[,+]", raw)
    return [p.strip().strip(".").strip() for p in parts if p.strip().strip(".").strip()]


def _place(key: str, items: list[str], out: CardText, details: list[str]) -> None:
    if not items:
        return
    for target, keys in LIST_KEYS.items():
        if key in keys:
            out.lists.setdefault(target, []).extend(i for i in items if i not in out.lists.get(target, []))
            return
    for target, keys in TEXT_KEYS.items():
        if key in keys:
            out.texts[target] = ", ".join(items) if target == "role" else "; ".join(items)
            return
    if key in SCENARIO_KEYS:
        out.scenario = "; ".join(filter(None, [out.scenario, f"{key.capitalize()}: {', '.join(items)}"]))
        return
    details.append(f"{key.capitalize()}: {', '.join(items)}.")


def _block(body: str, name: str, out: CardText, details: list[str]) -> bool:
    """One bracketed block as W++ or PList; False when it is neither (it stays in the description)."""
    if "{" in body and (attrs := _WPP_ATTR.findall(body)):
        for key, values in attrs:
            if _key(key, name) not in ("character", "name"):
                _place(_key(key, name), _items(values), out, details)
        return True
    pairs = [re.split(r"\s*[:=]\s*", part, maxsplit=1) for part in body.split(";") if part.strip()]
    if not pairs or not all(len(pair) == 2 and pair[0].strip() and len(pair[0]) <= 60 for pair in pairs):
        return False
    if any(_key(key, name) in NOT_THE_CHARACTER for key, _values in pairs):
        return False  # a note to the reader or the model, not the character
    for key, values in pairs:
        key = _key(key, name)
        _place(key or "personality", _items(values), out, details)  # "[Seraphina: kind, brave]": her persona
    return True


def split_description(text: str, name: str) -> CardText:
    out, details = CardText(), []
    text = (text or "").replace("\r\n", "\n")
    # Ali:Chat: from each <START> up to the next bracketed block (or the end) is example dialogue.
    examples, rest, position = [], [], 0
    for match in _START.finditer(text):
        if match.start() < position:
            continue
        rest.append(text[position:match.start()])
        following = _BLOCK.search(text, match.end())
        end = following.start() if following else len(text)
        examples.append("<START>\n" + text[match.end():end].strip())
        position = end
    rest.append(text[position:])
    remaining = "".join(rest)
    kept = []
    position = 0
    for match in _BLOCK.finditer(remaining):
        kept.append(remaining[position:match.start()])
        if not _block(match.group(1), name, out, details):
            kept.append(match.group(0))
        position = match.end()
    kept.append(remaining[position:])
    out.examples = "\n".join(examples)
    out.found = bool(examples or out.lists or out.texts or out.scenario or details)
    prose = re.sub(r"\n{3,}", "\n\n", "".join(kept)).strip()
    out.description = "\n".join(filter(None, [prose, " ".join(details)])) if out.found else text
    out.lists = {key: items[:ITEMS_KEPT] for key, items in out.lists.items()}
    return out
