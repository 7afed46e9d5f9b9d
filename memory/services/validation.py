"""The one content rule every memory obeys, and the one text rule for everything Wonda accepts."""

from __future__ import annotations

import re
import unicodedata

from django.core.exceptions import ValidationError

from memory.models import MAX_CONTENT_CHARS, Memory


def validate_content(content) -> str:
    """The one rule every memory obeys, with the message a writer or an agent will read."""
    if not isinstance(content, str):
        raise ValidationError({"content": "Memory content must be text."})
    if not content.strip():
        raise ValidationError({"content": "Memory content cannot be empty."})
    if len(content) > MAX_CONTENT_CHARS:
        raise ValidationError(
            {"content": f"Memory content is {len(content):,} characters; the limit is {MAX_CONTENT_CHARS:,}."}
        )
    return content


# What PostgreSQL can store, and what one request may ask: the API, the MCP tools and the forms
# check input against these before anything is written (a NUL byte or a 2**63 turn must be a
# message naming the field, not a database error).
INT_MAX = 2**31 - 1  # PostgreSQL's integer
NAME_LIMIT = 200  # a bank's name, an agent's name, a speaker
TEXT_LIMIT = 20_000  # a query, a line heard
RECALL_K_MAX = 100
RETAIN_LISTENERS_MAX = 100  # listeners of one line: a crowd is several requests, not one
OFFSET_MAX = INT_MAX


# The one text rule for everything Wonda accepts (the API's schemas, the MCP tools, the forms, the
# imports): text PostgreSQL can store and a reader can see. A lone surrogate cannot be encoded at
# all, a NUL cannot be stored, other control characters are invisible noise in a prompt or a page;
# line breaks and tabs belong in multi-line text only. A name must show something: one made of
# zero-width or direction characters alone would be a bank or a character nobody can pick.
_SURROGATE = re.compile("[\ud800-\udfff]")
_CONTROL = re.compile("[\x01-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")  # C0 but \t \n \r, DEL, C1
_LINE_BREAK = re.compile("[\t\n\r\u2028\u2029]")
# Letters and symbols that render as nothing (fillers, the blank braille pattern): used for blank names.
_BLANK_GLYPHS = frozenset("\u115f\u1160\u3164\uffa0\u2800")


def visible(text: str) -> bool:
    """Whether the text shows at least one character: a letter, digit, punctuation mark or symbol."""
    return any(unicodedata.category(c)[0] in "LNPS" and c not in _BLANK_GLYPHS for c in text)


def text_problem(value: str, *, one_line: bool = False) -> str | None:
    """What is wrong with a text by the rule above, said after the field's name, or None."""
    if "\x00" in value:
        return "contains a NUL byte (\\u0000), which cannot be stored."
    if found := _SURROGATE.search(value):
        return (f"contains a lone surrogate (\\u{ord(found[0]):04x}), which is not a character: "
                "send the character itself (UTF-8), or both halves of its pair.")
    if found := _CONTROL.search(value) or (one_line and _LINE_BREAK.search(value)):
        what = "a line break or tab" if found[0] in "\t\n\r\u2028\u2029" else "a control character"
        return f"contains {what} (\\u{ord(found[0]):04x}), which is not allowed here."
    if value.strip() and not visible(value):
        return "has no visible character (only spaces, zero-width or direction marks)."
    return None


def clean_text(value, field: str, *, limit: int = TEXT_LIMIT, required: bool = True, name: bool = False) -> str:
    """Text a person or a program sent, by the rule above, within `limit`, not blank when required;
    `name`: one line (a bank's, an agent's, a speaker's). Raises ValidationError naming the field."""
    if not isinstance(value, str):
        raise ValidationError({field: "must be text."})
    if len(value) > limit:
        raise ValidationError({field: f"is {len(value):,} characters; the limit is {limit:,}."})
    if problem := text_problem(value, one_line=name):
        raise ValidationError({field: problem})
    if required and not value.strip():
        raise ValidationError({field: "cannot be empty."})
    return value


def text_problem_in(data, path: str = "") -> str | None:
    """The first text in a parsed JSON document (keys included) that breaks the rule, as "path:
    problem", or None: an import is refused whole, naming where, before anything is written."""
    stack = [(path, data)]
    while stack:
        where, value = stack.pop()
        if isinstance(value, str):
            if problem := text_problem(value):
                return f"{where or 'the file'}: {problem}"
        elif isinstance(value, dict):
            for key, item in reversed(value.items()):
                inner = f"{where}.{key}" if where else str(key)
                if isinstance(key, str) and (problem := text_problem(key)):
                    return f"{where or 'the file'}: a key {problem}"
                stack.append((inner, item))
        elif isinstance(value, list):
            stack.extend((f"{where}[{i}]", item) for i, item in reversed(list(enumerate(value))))
    return None


def clean_int(value, field: str, *, low: int = -INT_MAX - 1, high: int = INT_MAX) -> int:
    """A whole number within [low, high] (by default what PostgreSQL's integer holds)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError({field: "must be a whole number."})
    if not low <= value <= high:
        raise ValidationError({field: f"must be between {low:,} and {high:,}."})
    return value


def clean_kinds(kinds, field: str = "kinds") -> list[str]:
    """Memory kinds, each one Wonda knows, no more of them than there are kinds."""
    if len(kinds or []) > len(Memory.Kind.values):
        raise ValidationError({field: f"{len(kinds):,} kinds given; there are only {len(Memory.Kind.values)}."})
    unknown = [k for k in kinds or [] if k not in Memory.Kind.values]
    if unknown:
        raise ValidationError({field: f"unknown kind(s) {', '.join(map(repr, unknown))}; use {', '.join(Memory.Kind.values)}."})
    return list(kinds or [])
