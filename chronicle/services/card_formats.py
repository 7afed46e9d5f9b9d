"""How cards write a character inside their free text: a personality as a list, and (card_formats'
split_description) the W++ / PList / Ali:Chat conventions SillyTavern's cards use in a description."""

from __future__ import annotations

import re


def split_personality(text: str) -> list[str] | None:
    """A comma/semicolon list of short traits, or None when the personality is prose."""
    parts = [p.strip() for p in re.split(r"[,;\n]", text) if p.strip()]
    if not parts or len(parts) > 40 or any(len(p) > 60 or p.endswith(".") and len(p) > 30 for p in parts):
        return None
    return parts
