"""Memory's one text rule (memory.services.validation, shared with the HTTP API, the MCP tools and
the imports) on every form: a NUL byte, a lone surrogate, a control character, a line break in a
one-line input, or a text with nothing visible is an error on its field, so nothing is saved and
the page says which field to fix (a NUL in a list field used to reach PostgreSQL and fail there)."""

from __future__ import annotations

from django import forms
from django.core.validators import ProhibitNullCharactersValidator
from django.forms.utils import pretty_name
from django.forms.widgets import Input

from memory.api import text_problem


def _texts(value, one_line: bool):
    """Every text in a field's value with whether it is one line: a string, a list's items, a
    mapping's keys (names, one line) and values (a note, a lore entry)."""
    if isinstance(value, str):
        yield value, one_line
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _texts(item, one_line)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _texts(key, True)
            yield from _texts(item, False)


class TextRule:
    """A field validator: the first text in the value that breaks the rule, named by the field's label."""

    def __init__(self, label: str, *, one_line: bool):
        self.label, self.one_line = label, one_line

    def __call__(self, value) -> None:
        for text, one_line in _texts(value, self.one_line):
            if problem := text_problem(text, one_line=one_line):
                raise forms.ValidationError(f"{self.label}: {problem}", code="text")


def _one_line(field: forms.Field) -> bool:
    if hasattr(field, "long"):  # a list of short items, or of paragraphs
        return not field.long
    return isinstance(field.widget, Input)  # a text input, not a text area


class TextRuleForm:
    """Mixed into every form: each field that takes text gets the rule as a validator, in place of
    Django's own NUL check (whose message does not say which field)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for name, field in self.fields.items():
            # A choice is held to its list, a file is read by its import; the list, note and lore
            # fields of chronicle.forms say they take text.
            if getattr(field, "takes_text", isinstance(field, forms.CharField)):
                rule = TextRule(str(field.label or pretty_name(name)), one_line=_one_line(field))
                field.validators = [v for v in field.validators
                                    if not isinstance(v, ProhibitNullCharactersValidator)] + [rule]
