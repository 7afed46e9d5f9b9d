"""The one content rule every memory obeys."""

from __future__ import annotations

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


def clean_text(value, field: str, *, limit: int = TEXT_LIMIT, required: bool = True) -> str:
    """Text a person or a program sent: no NUL byte (PostgreSQL cannot store one), within `limit`,
    not blank when required. Raises ValidationError naming the field."""
    if not isinstance(value, str):
        raise ValidationError({field: "must be text."})
    if "\x00" in value:
        raise ValidationError({field: "contains a NUL byte (\\u0000), which cannot be stored."})
    if len(value) > limit:
        raise ValidationError({field: f"is {len(value):,} characters; the limit is {limit:,}."})
    if required and not value.strip():
        raise ValidationError({field: "cannot be empty."})
    return value


def clean_int(value, field: str, *, low: int = -INT_MAX - 1, high: int = INT_MAX) -> int:
    """A whole number within [low, high] (by default what PostgreSQL's integer holds)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError({field: "must be a whole number."})
    if not low <= value <= high:
        raise ValidationError({field: f"must be between {low:,} and {high:,}."})
    return value


def clean_kinds(kinds, field: str = "kinds") -> list[str]:
    """Memory kinds, each one Wonda knows."""
    unknown = [k for k in kinds or [] if k not in Memory.Kind.values]
    if unknown:
        raise ValidationError({field: f"unknown kind(s) {', '.join(map(repr, unknown))}; use {', '.join(Memory.Kind.values)}."})
    return list(kinds or [])
