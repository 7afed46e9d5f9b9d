from __future__ import annotations

from django import forms

from memory.models import MAX_CONTENT_CHARS, Memory


def _tags(value: str) -> list[str]:
    return [t.strip() for t in (value or "").split(",") if t.strip()]


class MemoryEditForm(forms.Form):
    content = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), max_length=MAX_CONTENT_CHARS)
    importance = forms.FloatField(min_value=0, max_value=10)
    tags = forms.CharField(required=False, help_text="Comma-separated.")

    def clean_tags(self):
        return _tags(self.cleaned_data.get("tags"))


class MemoryFormForm(MemoryEditForm):
    agent = forms.ChoiceField(required=False)
    kind = forms.ChoiceField(choices=Memory.Kind.choices, initial="semantic")
    importance = forms.FloatField(min_value=0, max_value=10, initial=6)

    def __init__(self, *args, cast: list[str], **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["agent"].choices = [("", "Shared (everyone)")] + [(n, n) for n in cast]


class LineForm(forms.Form):
    text = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}), max_length=4000)
    annotation = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}), max_length=4000)


class ImportForm(forms.Form):
    file = forms.FileField(help_text="A .json file from “Export JSON”.")
