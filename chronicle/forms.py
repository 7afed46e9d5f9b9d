"""Forms for characters, scenarios and imports. Lists are edited as lists: one input per item."""

from __future__ import annotations

import re

from django import forms
from django.conf import settings

from chronicle.form_fields import KnowledgeField, ListField, LoreField, lore_rows
from chronicle.models import TEXT_LIMIT, Character, Scenario
from chronicle.text_rule import TextRuleForm
from memory.api import sheet_fields, text_problem

LIST_FIELDS = sheet_fields.CHARACTER_LIST_FIELDS


CARD_TEXT_LIMIT = TEXT_LIMIT * 5  # what an imported card may carry in first_mes, scenario, mes_example


def _card_text(help_text: str, label: str) -> forms.CharField:
    return forms.CharField(required=False, max_length=CARD_TEXT_LIMIT, label=label, help_text=help_text,
                           strip=True, widget=forms.Textarea(attrs={"rows": 4}))


class CharacterForm(TextRuleForm, forms.ModelForm):
    traits = ListField(help_text="Personality traits, one per item: “warm”, “impulsive”.")
    skills = ListField(help_text="What the character is good at.")
    values = ListField(help_text="What the character believes in.")
    goals = ListField(help_text="What the character wants, in this story or in life.")
    secrets = ListField(item_max_length=TEXT_LIMIT, max_items=30, long=True,
                        help_text="What the character hides, one per item. Only this character ever remembers "
                                  "them; the others learn a secret only if it is said aloud.")
    knowledge = KnowledgeField(help_text="What this character knows about other characters.")
    # SillyTavern card fields (kept in card_extras; {{char}} and {{user}} are resolved when they reach an agent).
    first_mes = _card_text("The card's greeting. A simulation can open with it as turn 1.", "First message")
    alternate_greetings = ListField(item_max_length=CARD_TEXT_LIMIT, max_items=50, long=True,
                                    label="Alternate greetings", help_text="Other greetings the card offers.")
    card_scenario = _card_text("The card's scenario: where the character's story stands. It becomes a memory of "
                               "the character's situation.", "Scenario (card)")
    mes_example = _card_text("Example dialogue. It becomes a memory of how the character speaks.",
                             "Example messages")
    creator_notes = _card_text("The card author's notes for whoever uses it. Kept for export; no agent reads "
                               "them.", "Creator notes")
    card_tags = ListField(item_max_length=100, max_items=50, label="Tags", required=False,
                          help_text="The card's tags, one per item. Kept for export.")
    creator = forms.CharField(required=False, max_length=200, label="Creator", help_text="Who made the card.")
    character_version = forms.CharField(required=False, max_length=100, label="Card version")
    portrait = forms.FileField(required=False, label="Portrait",
                               help_text="A picture of the character (PNG, JPEG, WebP…): shown on its pages and "
                                         "the run page, and the image of an exported card. Replaces the one it has.")
    remove_portrait = forms.BooleanField(required=False, label="Remove the portrait")
    extra_memories = LoreField(label="Lore entries")

    class Meta:
        model = Character
        fields = list(sheet_fields.CHARACTER_FIELDS)
        labels = {"public_face": "Public face"}
        help_texts = {
            "name": "How the character is called; unique among your characters.",
            "role": "e.g. project manager, detective, innkeeper. Everyone in a scenario knows it.",
            "archetype": "e.g. the pragmatist, the mentor, the trickster. Private, like the description.",
            "description": "Who they are, in a few sentences: this becomes the “who am I?” memory. Only this "
                           "character knows it.",
            "public_face": "What the rest of the cast knows about this character by default (their “who is …?” "
                           "memory, with the name and role). Blank: the others know only the name and role.",
            "background": "Their history. Split into memories of a sentence or two each.",
            "communication_style": "How they talk.",
            "decision_style": "How they make choices.",
        }
        widgets = {f: forms.Textarea(attrs={"rows": 3}) for f in sheet_fields.CHARACTER_TEXT_FIELDS
                   if f not in ("role", "archetype")}  # those two are a few words

    def __init__(self, *args, owner, **kwargs):
        super().__init__(*args, **kwargs)
        self.owner = owner
        extras = self.instance.card_extras or {}
        self.initial.setdefault("first_mes", extras.get("first_mes", ""))
        self.initial.setdefault("alternate_greetings", list(extras.get("alternate_greetings") or []))
        self.initial.setdefault("card_scenario", extras.get("scenario", ""))
        self.initial.setdefault("mes_example", extras.get("mes_example", ""))
        self.initial.setdefault("creator_notes", extras.get("creator_notes", ""))
        self.initial.setdefault("card_tags", list(extras.get("tags") or []))
        self.initial.setdefault("creator", extras.get("creator", ""))
        self.initial.setdefault("character_version", extras.get("character_version", ""))
        self.initial.setdefault("extra_memories", list(self.instance.extra_memories or []))

    def lore_rows(self) -> list[dict]:
        return lore_rows(self["extra_memories"].value())

    def clean_extra_memories(self) -> list[dict]:
        """The edited rows as extra_memories; an entry keeps its card's own fields (comment,
        insertion_order, ...) so an export still gives them back."""
        stored = list(self.instance.extra_memories or [])
        entries = []
        for row in self.cleaned_data.get("extra_memories") or []:
            if "enabled" not in row:  # an entry as stored (data given as a dict, not the page's inputs)
                entries.append(row)
                continue
            index = row["index"]
            entry = dict(stored[index]) if index is not None and 0 <= index < len(stored) else {}
            card = dict(entry.get("card") or {})
            if row["enabled"]:
                card.pop("enabled", None)  # enabled is the default an export writes back
            else:
                card["enabled"] = False
            entries.append({**entry, "content": row["content"], "keys": row["keys"], "card": card})
        return entries

    KEPT_UNLESS_SENT = ("creator_notes", "card_tags", "creator", "character_version")

    def clean(self):
        cleaned = super().clean()
        # A card's bookkeeping fields left out of a post (a script, an older page) stay as they are.
        for name in self.KEPT_UNLESS_SENT:
            if self.fields[name].widget.value_omitted_from_data(self.data, self.files, self.add_prefix(name)):
                cleaned.pop(name, None)
        return cleaned

    def clean_portrait(self) -> bytes | None:
        """The uploaded picture as the small PNG a portrait keeps, or None when none was given."""
        upload = self.cleaned_data.get("portrait")
        if not upload:
            return None
        from chronicle.services.portraits import PortraitError, portrait_from_image

        try:
            return portrait_from_image(upload.read())
        except PortraitError as exc:
            raise forms.ValidationError(f"The portrait was not changed: {exc}.") from None

    def clean_name(self) -> str:
        name = self.cleaned_data["name"].strip()
        if not name:
            raise forms.ValidationError("Give the character a name.")
        taken = Character.objects.owned_by(self.owner).filter(name__iexact=name)
        if self.instance.pk:
            taken = taken.exclude(pk=self.instance.pk)
        if taken.exists():
            raise forms.ValidationError(f"You already have a character named {name}.")
        return name

    def clean_knowledge(self) -> dict[str, str]:
        knowledge = self.cleaned_data.get("knowledge") or {}
        name = (self.cleaned_data.get("name") or self.data.get("name") or "").strip()
        if name and name in knowledge:
            raise forms.ValidationError("Self-knowledge belongs in the description; notes are about other characters.")
        return knowledge


class ScenarioForm(TextRuleForm, forms.ModelForm):
    cast = forms.ModelMultipleChoiceField(queryset=Character.objects.none(), required=False,
                                          widget=forms.CheckboxSelectMultiple,
                                          help_text="Who takes part. Each one remembers the scene.")

    class Meta:
        model = Scenario
        fields = ["title", "location", "atmosphere", "time_of_day", "description", "user_name", "cast"]
        help_texts = {
            "user_name": "Imported cards write {{user}} for the one the character talks to. Blank: the other "
                         "cast member when there are two, else “someone”.",
            "title": "e.g. Friends deciding where to eat tonight.",
            "location": "Where it happens.",
            "atmosphere": "The mood of the place and the people.",
            "time_of_day": "e.g. early evening.",
            "description": "The situation: what is going on and what must be decided.",
        }
        widgets = {f: forms.Textarea(attrs={"rows": 3}) for f in ("location", "atmosphere", "description")}

    def __init__(self, *args, owner, **kwargs):
        super().__init__(*args, **kwargs)
        self.owner = owner
        self.fields["cast"].queryset = Character.objects.owned_by(owner)

    def pair_notes_from_data(self, cast) -> dict[str, dict[str, str]]:
        """Read `pair-<knower id>-<about id>` inputs into {"Alex": {"Jordan": "..."}}."""
        by_id = {str(c.pk): c.name for c in cast}
        notes: dict[str, dict[str, str]] = {}
        for key, text in self.data.items():
            match = re.fullmatch(r"pair-(\d+)-(\d+)", key)
            if not match or not str(text).strip():
                continue
            knower, about = by_id.get(match[1]), by_id.get(match[2])
            if knower and about and knower != about:
                notes.setdefault(knower, {})[about] = str(text).strip()
        return notes

    def pair_standing_from_data(self, cast) -> tuple[dict[str, dict[str, dict[str, float]]], list[str]]:
        """Read `trust-<agent id>-<other id>` and `affinity-…` inputs into {"Alex": {"Jordan": {"trust": 0.5,
        "affinity": 0}}}, and what is wrong with them in the writer's words."""
        by_id = {str(c.pk): c.name for c in cast}
        standing: dict[str, dict[str, dict[str, float]]] = {}
        problems = []
        for key, raw in self.data.items():
            match = re.fullmatch(r"(trust|affinity)-(\d+)-(\d+)", key)
            if not match or not str(raw).strip():
                continue
            agent, other = by_id.get(match[2]), by_id.get(match[3])
            if not agent or not other or agent == other:
                continue
            try:
                value = float(str(raw).strip())
            except ValueError:
                value = float("nan")
            if not -1 <= value <= 1:  # NaN too
                problems.append(f"{agent}'s starting {match[1]} towards {other} must be a number from −1 to 1.")
                continue
            standing.setdefault(agent, {}).setdefault(other, {"trust": 0.0, "affinity": 0.0})[match[1]] = value
        return standing, problems

    def pair_standing_typed(self, cast) -> dict[str, dict[str, dict[str, str]]]:
        """What was typed in the standing inputs, as typed (shown again beside a refusal)."""
        by_id = {str(c.pk): c.name for c in cast}
        typed: dict[str, dict[str, dict[str, str]]] = {}
        for key, raw in self.data.items():
            match = re.fullmatch(r"(trust|affinity)-(\d+)-(\d+)", key)
            if match and by_id.get(match[2]) and by_id.get(match[3]):
                pair = typed.setdefault(by_id[match[2]], {}).setdefault(by_id[match[3]], {"trust": "", "affinity": ""})
                pair[match[1]] = str(raw)[:20]
        return typed

    def clean(self):
        cleaned = super().clean()
        standing, problems = self.pair_standing_from_data(cleaned.get("cast") or [])
        for problem in problems:
            self.add_error(None, problem)
        cleaned["pair_standing"] = standing
        notes = self.pair_notes_from_data(cleaned.get("cast") or [])
        for knower, row in notes.items():
            for about, text in row.items():
                if len(text) > TEXT_LIMIT:
                    self.add_error(None, f"The note on what {knower} knows about {about} is longer than {TEXT_LIMIT:,} characters.")
                elif problem := text_problem(text):
                    self.add_error(None, f"The note on what {knower} knows about {about} {problem}")
        cleaned["pair_notes"] = notes
        return cleaned


def upload_limit_message(size: int) -> str | None:
    """The message for a file over WONDA_UPLOAD_LIMIT_MB (one limit for every import), or None."""
    limit = settings.WONDA_UPLOAD_LIMIT_MB
    if size <= limit * 1024 * 1024:
        return None
    return f"The file is {size / (1024 * 1024):.1f} MB; imports are limited to {limit} MB (WONDA_UPLOAD_LIMIT_MB)."


def validate_upload_size(upload) -> None:
    """Checked on `upload.size` before a byte is read or parsed."""
    message = upload_limit_message(upload.size)
    if message:
        raise forms.ValidationError(message, code="too_large")


class ImportForm(TextRuleForm, forms.Form):
    file = forms.FileField(help_text="A Wonda JSON export, or a Character Card V2 as .json or .png.",
                           validators=[validate_upload_size])
    as_copy = forms.BooleanField(required=False, label="If a name is taken, import as a copy",
                                 help_text="e.g. “Seraphina (2)”; otherwise you are asked first.")


class ImportCopyForm(TextRuleForm, forms.Form):
    """The second step after a name clash: import the file kept from the first step, as a copy."""

    pending = forms.CharField(max_length=64)
