"""The form fields that edit a character's lists, knowledge and card lore as rows (one input per item)."""

from __future__ import annotations

from django import forms

from chronicle.models import ITEM_LIMIT, TEXT_LIMIT


class ListWidget(forms.Widget):
    """Many inputs sharing one name (rendered by chronicle/_list_input.html)."""

    def value_from_datadict(self, data, files, name):
        if hasattr(data, "getlist"):
            return data.getlist(name)
        value = data.get(name, [])
        return value if isinstance(value, list) else [value]

    def value_omitted_from_data(self, data, files, name):
        return False  # no inputs left means an empty list, not "field not sent"


class ListField(forms.Field):
    widget = ListWidget
    takes_text = True  # chronicle.text_rule checks each item

    def __init__(self, *, item_max_length: int = ITEM_LIMIT, max_items: int = 50, long: bool = False, **kwargs):
        # long: items are paragraphs (secrets, greetings), edited in text areas.
        self.item_max_length, self.max_items, self.long = item_max_length, max_items, long
        kwargs.setdefault("required", False)
        super().__init__(**kwargs)

    def to_python(self, value) -> list[str]:
        if value in (None, ""):
            return []
        if isinstance(value, str):
            value = [value]
        return [str(v).strip() for v in value if str(v).strip()]

    def validate(self, value) -> None:
        super().validate(value)
        if len(value) > self.max_items:
            raise forms.ValidationError(f"Keep it to {self.max_items} items or fewer.")
        for item in value:
            if len(item) > self.item_max_length:
                raise forms.ValidationError(
                    f"“{item[:30]}…” is longer than {self.item_max_length:,} characters"
                    + ("." if self.long else "; keep each item short."))

    def has_changed(self, initial, data) -> bool:
        return list(initial or []) != self.to_python(data)


class KnowledgeWidget(forms.Widget):
    """Rows of (who, what this character knows about them): inputs `<name>_name` and `<name>_text`."""

    def value_from_datadict(self, data, files, name):
        if not hasattr(data, "getlist"):
            return data.get(name)
        return list(zip(data.getlist(f"{name}_name"), data.getlist(f"{name}_text")))

    def value_omitted_from_data(self, data, files, name):
        return False


class KnowledgeField(forms.Field):
    widget = KnowledgeWidget
    takes_text = True

    def __init__(self, **kwargs):
        kwargs.setdefault("required", False)
        super().__init__(**kwargs)

    def to_python(self, value) -> dict[str, str]:
        if not value:
            return {}
        if isinstance(value, dict):
            return value
        knowledge: dict[str, str] = {}
        for who, text in value:
            who, text = who.strip(), text.strip()
            if not who and not text:
                continue
            if not who:
                raise forms.ValidationError("Each note needs the name of the character it is about.")
            if not text:
                raise forms.ValidationError(f"Write what this character knows about {who}, or remove the row.")
            if len(text) > TEXT_LIMIT:
                raise forms.ValidationError(f"The note about {who} is longer than {TEXT_LIMIT:,} characters.")
            if who in knowledge:
                raise forms.ValidationError(f"{who} appears twice; merge the two notes.")
            knowledge[who] = text
        return knowledge


def knowledge_rows(value) -> list[tuple[str, str]]:
    """Rows to render, from initial data (a dict) or a bound value (a list of pairs)."""
    if isinstance(value, dict):
        return list(value.items())
    return [(a, b) for a, b in (value or [])]


LORE_KEYS_LIMIT, LORE_KEY_LIMIT, LORE_ENTRIES_LIMIT = 50, 300, 200


class LoreWidget(forms.Widget):
    """Rows of lore entries: `<name>_index` (the entry's place in extra_memories, blank when new),
    `<name>_keys` (comma-separated), `<name>_content`, `<name>_state` (on / off / delete)."""

    def value_from_datadict(self, data, files, name):
        if not hasattr(data, "getlist"):
            return data.get(name)
        return list(zip(data.getlist(f"{name}_index"), data.getlist(f"{name}_keys"),
                        data.getlist(f"{name}_content"), data.getlist(f"{name}_state")))

    def value_omitted_from_data(self, data, files, name):
        return False  # no rows left means no lore, not "field not sent"


class LoreField(forms.Field):
    """Card lore (SillyTavern character_book entries) as [{"index", "keys", "content", "enabled"}]."""

    widget = LoreWidget
    takes_text = True

    def __init__(self, **kwargs):
        kwargs.setdefault("required", False)
        super().__init__(**kwargs)

    def to_python(self, value) -> list[dict]:
        rows = []
        for number, row in enumerate(value or [], start=1):
            if isinstance(row, dict):  # initial data: extra_memories as stored
                rows.append(row)
                continue
            index, keys, content, state = (str(v) for v in row)
            content = content.strip()
            keys = [k.strip() for k in keys.split(",") if k.strip()]
            if state == "delete" or (not content and not keys):
                continue
            if not content:
                raise forms.ValidationError(f"Lore entry {number} has keys but no text; write it or delete it.")
            if len(content) > TEXT_LIMIT:
                raise forms.ValidationError(f"Lore entry {number} is longer than {TEXT_LIMIT:,} characters.")
            if len(keys) > LORE_KEYS_LIMIT or any(len(k) > LORE_KEY_LIMIT for k in keys):
                raise forms.ValidationError(
                    f"Lore entry {number}: at most {LORE_KEYS_LIMIT} keys of {LORE_KEY_LIMIT} characters each.")
            rows.append({"index": int(index) if index.isdigit() else None, "keys": keys, "content": content,
                         "enabled": state != "off"})
        if len(rows) > LORE_ENTRIES_LIMIT:
            raise forms.ValidationError(f"Keep it to {LORE_ENTRIES_LIMIT} lore entries or fewer.")
        return rows


def lore_rows(value) -> list[dict]:
    """Rows to render from initial data (extra_memories as stored) or a bound value (the inputs)."""
    rows = []
    for i, row in enumerate(value or []):
        if isinstance(row, dict):
            rows.append({"index": i, "keys": ", ".join(row.get("keys") or []), "content": row.get("content", ""),
                         "enabled": (row.get("card") or {}).get("enabled", True) is not False})
        elif row[3] != "delete":
            rows.append({"index": row[0], "keys": row[1], "content": row[2], "enabled": row[3] != "off"})
    return rows
