"""The one content rule every memory obeys."""

from __future__ import annotations

from django.core.exceptions import ValidationError

from memory.models import MAX_CONTENT_CHARS


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
