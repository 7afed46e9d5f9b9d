"""SillyTavern macros in card text: `{{char}}`/`<BOT>` and `{{user}}`/`<USER>`.

The model keeps the card's raw text (an export gives `{{char}}` back); they are resolved only where
the text becomes a memory or a prompt, i.e. in `Character.to_sheet(user_name=...)`.

Who `{{user}}` is (SillyTavern: the human player; Wonda has none):
- in a scenario or a simulation, the scenario's "Name for {{user}}" when the writer set one, else
  the one other cast member when there is exactly one (the character is addressing them), else
  USER_IN_A_GROUP: a card line like "{{char}} found {{user}} unconscious" still reads as a sentence;
- on the character's own preview, with no scenario, USER_ALONE: there the writer asking the
  preview is the one addressed, and "you" would clash with the character's own "You are …" memories.
"""

from __future__ import annotations

import re

USER_ALONE = "the user"
USER_IN_A_GROUP = "someone"

_CHAR = re.compile(r"\{\{\s*char\s*\}\}|<BOT>", re.IGNORECASE)
_USER = re.compile(r"\{\{\s*user\s*\}\}|<USER>", re.IGNORECASE)


def resolve(text: str, *, char: str, user: str) -> str:
    """`text` with the character's name for {{char}} and `user` for {{user}} (any case, spaces inside)."""
    if not text or ("{" not in text and "<" not in text):
        return text
    return _USER.sub(lambda _: user, _CHAR.sub(lambda _: char, text))


def user_name_for(name: str, *, cast_names: list[str], user_name: str = "") -> str:
    """Who {{user}} means for the character `name` in a cast (see the module docstring)."""
    if user_name.strip():
        return user_name.strip()
    others = [n for n in cast_names if n != name]
    return others[0] if len(others) == 1 else USER_IN_A_GROUP
