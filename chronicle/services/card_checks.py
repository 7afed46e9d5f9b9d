"""Checking the plain JSON values of an imported file; each error names its field path."""

from __future__ import annotations

from typing import Any

from chronicle.models import ITEM_LIMIT, TEXT_LIMIT
from memory.api import text_problem

SHORT_LIMITS = {"name": 100, "role": 200, "archetype": 200, "title": 200, "time_of_day": 200, "user_name": 100}


class Checker:
    """Reads values out of an uploaded JSON object, collecting every problem by its path."""

    def __init__(self) -> None:
        self.errors: list[str] = []

    def text(self, obj: dict, key: str, path: str, *, required: bool = False, limit: int = TEXT_LIMIT) -> str:
        value = obj.get(key)
        if value is None or value == "":
            if required:
                self.errors.append(f"{path}{key} is missing")
            return ""
        if not isinstance(value, str):
            self.errors.append(f"{path}{key} must be text")
            return ""
        if len(value) > limit:
            self.errors.append(f"{path}{key} is longer than {limit:,} characters")
        elif key == "name" and (problem := text_problem(value, one_line=True)):  # the rest: cards._text_checked
            self.errors.append(f"{path}{key} {problem}")
        return value

    def items(self, obj: dict, key: str, path: str, *, limit: int = ITEM_LIMIT) -> list[str]:
        value = obj.get(key)
        if value is None:
            return []
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            self.errors.append(f"{path}{key} must be a list of text")
            return []
        for i, item in enumerate(value):
            if len(item) > limit:
                self.errors.append(f"{path}{key}[{i}] is longer than {limit:,} characters")
        return [v.strip() for v in value if v.strip()]

    def mapping(self, obj: dict, key: str, path: str) -> dict[str, str]:
        value = obj.get(key)
        if value is None:
            return {}
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            self.errors.append(f"{path}{key} must map names to text")
            return {}
        for name, text in value.items():
            if len(text) > TEXT_LIMIT:
                self.errors.append(f"{path}{key}.{name} is longer than {TEXT_LIMIT:,} characters")
        return {k.strip(): v for k, v in value.items() if k.strip() and v.strip()}

    def memories(self, entries: Any, path: str) -> list[dict]:
        if entries is None:
            return []
        if not isinstance(entries, list):
            self.errors.append(f"{path} must be a list")
            return []
        out = []
        for i, entry in enumerate(entries):
            where = f"{path}[{i}]."
            if not isinstance(entry, dict):
                self.errors.append(f"{path}[{i}] must be an object")
                continue
            content = self.text(entry, "content", where, required=True)
            keys = self.items(entry, "keys", where, limit=300)
            # A Wonda export nests the card's own entry fields under "card"; a card has them inline.
            card = entry["card"] if isinstance(entry.get("card"), dict) else {
                k: v for k, v in entry.items() if k not in ("content", "keys")}
            if content:
                out.append({"content": content, "keys": keys, "card": card})
        return out
