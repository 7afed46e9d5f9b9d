"""The writer's forms. Each one checks everything the model will check later, so that "saved" or
"memory written" is only said of something that will exist."""

from __future__ import annotations

from django import forms
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator

from chronicle.forms import validate_upload_size
from chronicle.text_rule import TextRuleForm
from chronicle.writing.services import writer_memory_check
from memory.models import MAX_CONTENT_CHARS, MAX_TAG_CHARS, MAX_TAGS, Memory

LINE_CHARS = 4000


class TagsField(forms.CharField):
    """Comma-separated tags, read as a list and held to the memory model's limits with a clear message."""

    def __init__(self, **kwargs):
        kwargs.setdefault("required", False)
        kwargs.setdefault("help_text", f"Comma-separated; at most {MAX_TAGS}, each up to {MAX_TAG_CHARS} characters.")
        super().__init__(**kwargs)

    def to_python(self, value) -> list[str]:
        return [t.strip() for t in (super().to_python(value) or "").split(",") if t.strip()]

    def validate(self, value: list[str]) -> None:
        super().validate(value)
        if len(value) > MAX_TAGS:
            raise ValidationError(f"At most {MAX_TAGS} tags; you gave {len(value)}.")
        for tag in value:
            if len(tag) > MAX_TAG_CHARS:
                raise ValidationError(
                    f"The tag “{tag[:30]}…” is {len(tag)} characters long; each tag is at most {MAX_TAG_CHARS}.")


class MemoryEditForm(TextRuleForm, forms.Form):
    content = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), max_length=MAX_CONTENT_CHARS)
    importance = forms.FloatField(min_value=0, max_value=10)
    tags = TagsField()


class MemoryFormForm(MemoryEditForm):
    """A memory the writer forms; `turn` (hidden, sent by the turn inspector) is the turn it belongs to.

    The turn is 1 or more: the inspector of turn N sends N - 1 (the memory exists before turn N),
    and sends nothing on turn 1 (then it exists from the start, like a gifted memory). It is at most
    the simulation's `max_turns` (itself at most run_settings.MAX_TURNS): no turn past that is ever run, and that bound
    is far inside the column's 32-bit range, so 99999999999 is refused here, not by the worker.
    """

    agent = forms.ChoiceField(required=False)
    kind = forms.ChoiceField(choices=Memory.Kind.choices, initial="semantic")
    importance = forms.FloatField(min_value=0, max_value=10, initial=6)
    turn = forms.IntegerField(required=False, widget=forms.HiddenInput)

    def __init__(self, *args, simulation, **kwargs):
        super().__init__(*args, **kwargs)
        self.simulation = simulation
        self.fields["agent"].choices = [("", "Shared (everyone)")] + [(n, n) for n in simulation.cast_names]
        last = simulation.max_turns
        message = f"The turn must be between 1 and {last} (this simulation's last turn)."
        self.fields["turn"].validators = [MinValueValidator(1, message=message),
                                          MaxValueValidator(last, message=message)]

    def clean(self):
        """Everything the worker's `full_clean()` will check, checked now (see services.writer_memory_check)."""
        cleaned = super().clean()
        if self.errors:
            return cleaned
        try:
            writer_memory_check(simulation=self.simulation, **cleaned)
        except ValidationError as exc:
            errors = exc.message_dict if hasattr(exc, "error_dict") else {None: exc.messages}
            for field, messages in errors.items():
                self.add_error(field if field in self.fields else None, messages)
        return cleaned


class LineForm(TextRuleForm, forms.Form):
    text = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}), max_length=LINE_CHARS)
    annotation = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}), max_length=LINE_CHARS)
    remembered = forms.BooleanField(required=False)  # the listeners' memories of the line follow the new wording


class LineOverrideForm(TextRuleForm, forms.Form):
    """The turn inspector's hand-written line ("" removes it)."""

    line = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}), max_length=LINE_CHARS)


class ImportForm(TextRuleForm, forms.Form):
    file = forms.FileField(help_text="A .json file from “Export JSON”.", validators=[validate_upload_size])
