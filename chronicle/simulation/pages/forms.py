"""The "New simulation" form: scenario, cast subset, turns, order, retrieval, scoring, provider."""

from __future__ import annotations

from django import forms
from django.urls import reverse

from chronicle.models import Character, Scenario
from chronicle.simulation.run.models import Simulation
from chronicle.simulation.run.run_settings import (  # noqa: F401 (NOT_INHERITED: read from here too)
    FORM_SETTINGS, LLM_SETTING_FIELDS, NOT_INHERITED, OPTIONAL_WITH_DEFAULT, REMEMBERED_SETTINGS, default,
    server_defaults,
)
from chronicle.simulation.story.stage import StageError
from chronicle.simulation.story.stage import parse as parse_stage
from chronicle.text_rule import TextRuleForm
from memory.api import SCORING_PRESETS, SIMILARITY, tools_offered

# The run's settings the form takes as the model defines them, title aside (it comes first); the
# weights come from three number fields, the tools, greeter and seats from fields of the form's own.
SETTINGS = tuple(name for name in FORM_SETTINGS if name != "title")


def initial_from(values: dict) -> dict:
    """A run's settings (a scenario file's, a parent run's) as the new-run form's initial values."""
    initial = {name: value for name, value in values.items()
               if value is not None and (name in SETTINGS or name in ("tool_set", "greeting_by", "seats"))}
    for name, weight in (values.get("weights") or {}).items():
        initial[f"weight_{name}"] = weight
    return initial


def last_model_run(owner) -> Simulation | None:
    """The writer's latest run with a model of their choosing (the openai provider)."""
    return (Simulation.objects.owned_by(owner).filter(provider=Simulation.Provider.OPENAI).exclude(base_url="")
            .order_by("-created", "-id").first())


def model_defaults(last: Simulation | None) -> dict:
    """The new-run form's model settings: the writer's last choice, else the server's configuration."""
    if last is not None:
        return {name: getattr(last, name) for name in REMEMBERED_SETTINGS}
    return server_defaults()


def known_models(owner) -> list[str]:
    """Model names the writer used before, most recent first (the model field offers them)."""
    names = (Simulation.objects.owned_by(owner).filter(provider=Simulation.Provider.OPENAI).exclude(model="")
             .order_by("-created").values_list("model", flat=True)[:50])
    return list(dict.fromkeys(names))[:10]


def _tool_label(name: str) -> str:
    return f"{name}{' (writes memories)' if name in tools_offered.WRITE_TOOLS else ''}: {tools_offered.REGISTRY[name].description}"


# What each mode means for the writer: what the agent has in mind, and what a turn costs.
RETRIEVAL_MODE_HELP = (
    "Pre-populate: before each turn the agent is given its sheet and the memories that bear on the moment; "
    "one model call a turn, the cheapest. Tools: the agent asks its memory for what it needs, afresh each "
    "turn (only the conversation carries over, so a model often looks up its own secret again); a turn is "
    "usually two calls. Both: given, and free to ask for more.")


class SimulationForm(TextRuleForm, forms.ModelForm):
    scenario = forms.ModelChoiceField(queryset=Scenario.objects.none(), empty_label=None)
    cast = forms.ModelMultipleChoiceField(
        queryset=Character.objects.none(), required=False, widget=forms.CheckboxSelectMultiple,
        help_text="Who takes part: the scenario's cast, everyone ticked to begin with. None ticked: the whole cast.")
    seats = forms.ModelMultipleChoiceField(
        queryset=Character.objects.none(), required=False, widget=forms.CheckboxSelectMultiple, label="Play yourself",
        help_text="Tick a character to write its lines yourself: at its turns the run waits for you and shows what "
                  "it would remember. The agents play the others. You can leave the seat at any time.")
    scoring = forms.ChoiceField(choices=[(k, k) for k in SCORING_PRESETS], initial=default("scoring"),
                                help_text="similarity: meaning only · hybrid: meaning 0.6, recency 0.2, importance 0.2 · "
                                          "decayed: meaning 0.6, how faded 0.1, importance 0.3")
    weight_similarity = forms.FloatField(required=False, min_value=0, max_value=1, label="Weight: similarity")
    weight_recency = forms.FloatField(required=False, min_value=0, max_value=1, label="Weight: recency")
    weight_importance = forms.FloatField(required=False, min_value=0, max_value=1, label="Weight: importance")
    api_key = forms.CharField(required=False, widget=forms.PasswordInput(render_value=False), label="API key",
                              help_text="Stored encrypted for the workers; shown back only as a hint (sk-…abcd).")
    bookkeeping_api_key = forms.CharField(
        required=False, widget=forms.PasswordInput(render_value=False), label="Bookkeeping model: API key",
        help_text="Blank: the key of your last run with this bookkeeping server, if any. Stored encrypted.")
    tool_set = forms.MultipleChoiceField(
        choices=[(n, _tool_label(n)) for n in tools_offered.SIMULATION_TOOLS], required=False, widget=forms.CheckboxSelectMultiple,
        initial=default("tool_set"), label="Tools offered to the agents",
        help_text="Used in the Tools and Both modes. Each tool offered is described to the model on every call "
                  "(about 80 tokens each), so the six most used are ticked. Writes made during a turn are stored "
                  "when the turn is.")
    greeting_by = forms.ChoiceField(
        required=False, label="Open with a greeting",
        help_text="Turn 1 is this character's card greeting (first message), said as written; it must be in the cast.")

    sequel_of = forms.ModelChoiceField(
        queryset=Simulation.objects.none(), required=False, empty_label="— a fresh start —", label="Sequel of",
        help_text="Continue one of your runs: its characters bring the memories they earned there (see below), "
                  "and its turns come before this one's.")

    class Meta:
        model = Simulation
        fields = ["title", *SETTINGS]
        widgets = {"base_url": forms.TextInput(attrs={"placeholder": "http://127.0.0.1:11434/v1"}),
                   "model": forms.TextInput(attrs={"list": "model-options", "autocomplete": "off"}),
                   "bookkeeping_base_url": forms.TextInput(attrs={"placeholder": "http://127.0.0.1:11434/v1"}),
                   "planted_beliefs": forms.Textarea(attrs={"rows": 2, "placeholder": "Sam: Bella's is closing down next month. [false]"}),
                   "stage_directions": forms.Textarea(attrs={"rows": 4, "placeholder": "1: Sam is away\n5: Sam enters\n6: The lights go out."}),
                   "distortions": forms.Textarea(attrs={"rows": 3, "placeholder": "Jordan: paranoia\nJordan: trauma (fire, smoke)"}),
                   "sequel_carry": forms.Textarea(attrs={"rows": 3, "placeholder": "Alex: all\nJordan: reflections\nSam: none"}),
                   "story_start": forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M")}
        labels = {"max_turns": "Turns", "max_tool_calls": "Maximum tool calls per turn", "timeout_s": "Time-out (s)",
                  "base_url": "Base URL",
                  "pace_s": "Pace (seconds before each line)"}
        help_texts = {"retrieval_mode": RETRIEVAL_MODE_HELP}

    def __init__(self, *args, owner, **kwargs):
        initial = kwargs["initial"] = dict(kwargs.get("initial") or {})
        # The model a writer chose for their last run is the default for the next (else the server's).
        self.last_model_run = last_model_run(owner)
        for name, value in model_defaults(self.last_model_run).items():
            initial.setdefault(name, value)
        super().__init__(*args, **kwargs)
        self.known_models = known_models(owner)
        if self.last_model_run is not None and self.last_model_run.api_key:
            self.fields["api_key"].help_text = (
                f"Blank: the key of your last run with {self.last_model_run.base_url} "
                f"({self.last_model_run.api_key_hint}). Stored encrypted; shown back only as a hint.")
        scenarios = Scenario.objects.owned_by(owner).prefetch_related("cast")
        self.fields["scenario"].queryset = scenarios
        # The cast on offer is the chosen scenario's (the page swaps it when the scenario changes).
        chosen = self.data.get("scenario") if self.is_bound else self.initial.get("scenario")
        scenario = scenarios.filter(pk=chosen).first() if str(chosen or "").isdigit() else None
        scenario = scenario or (None if self.is_bound else scenarios.first())
        self.chosen_scenario = scenario
        # Any of the writer's characters validates, so clean() can name one that is not in the cast.
        self.fields["cast"].queryset = Character.objects.owned_by(owner)
        self.fields["cast"].widget.choices = [(c.pk, c.name) for c in scenario.cast.all()] if scenario else []
        self.fields["seats"].queryset = self.fields["cast"].queryset
        self.fields["seats"].widget.choices = self.fields["cast"].widget.choices
        if not self.is_bound and self.initial.get("seats") and scenario is not None:
            # A parent run's seats (a sequel) are names: ticked by name in this scenario's cast.
            named = set(self.initial["seats"])
            self.initial["seats"] = [c.pk for c in scenario.cast.all() if c.name in named or c.pk in named]
        # The planted beliefs and distortions name the cast: they are swapped with it (carry_over).
        self.fields["scenario"].widget.attrs.update({
            "hx-get": reverse("simulation_create"), "hx-trigger": "change", "hx-target": "#cast-field",
            "hx-select": "#cast-field", "hx-swap": "outerHTML", "hx-select-oob": "#cast-notes",
            "hx-include": "[name=planted_beliefs],[name=distortions]"})
        if scenario is not None and not self.is_bound:
            self.initial["scenario"] = scenario.pk
            self.initial["cast"] = [c.pk for c in scenario.cast.all()]
        self.fields["sequel_of"].queryset = (Simulation.objects.owned_by(owner).exclude(bank=None)
                                             .filter(status__in=(*Simulation.FINISHED_STATUSES, Simulation.Status.PAUSED))
                                             .order_by("-created"))
        # Only the chosen scenario's cast can open the scene (the choices swap with the cast).
        members = list(scenario.cast.all()) if scenario is not None else []
        self.greeters = {c.name: c for c in members if (c.card_extras or {}).get("first_mes")}
        self.fields["greeting_by"].choices = [("", "— no greeting: the first speaker talks —")] + [
            (name, name) for name in sorted(self.greeters)]
        # Any name passes the field: clean() says in words why one outside the cast cannot greet.
        self.fields["greeting_by"].valid_value = lambda value: True
        self.fields["title"].required = False
        self.fields["base_url"].required = False
        for name in OPTIONAL_WITH_DEFAULT:  # left out of a POST (an older form, a script): the model's default
            self.fields[name].required = False

    def clean(self):
        """What only the form knows (the scenario's cast as characters, their cards); the settings
        themselves are checked by the run (run_checks), in _post_clean, with the run's messages."""
        data = super().clean()
        scenario = data.get("scenario")
        if scenario is not None:
            members = list(scenario.cast.all())
            chosen = list(data.get("cast") or []) or members
            outside = [c.name for c in chosen if c not in members]
            if outside:
                self.add_error("cast", f"Not in the cast of “{scenario.title}”: {', '.join(outside)}.")
            elif not chosen:
                self.add_error("scenario", "This scenario has no cast yet: add characters to it first.")
            data["cast"] = chosen
            greeter = data.get("greeting_by")
            if greeter and any(c.name == greeter for c in chosen) and not any(
                    c.name == greeter and (c.card_extras or {}).get("first_mes") for c in chosen):
                self.add_error("greeting_by", f"{greeter}'s card has no first message to open with.")
        for name in OPTIONAL_WITH_DEFAULT:
            if data.get(name) in ("", None):
                data[name] = None  # simulation_start keeps the model's default
        data["weights"] = {name: data[f"weight_{name}"] for name in (SIMILARITY, "recency", "importance")
                           if data.get(f"weight_{name}") is not None}
        return data

    def _post_clean(self):
        # The run checks what the form's own fields hold too: the cast, the tools, the seats, the greeter.
        data = self.cleaned_data
        if isinstance(data.get("cast"), list):
            self.instance.cast_snapshot = [{"name": c.name} for c in data["cast"]]
        self.instance.tool_set = list(data.get("tool_set") or [])
        self.instance.seats = [c.name for c in data.get("seats") or []]
        self.instance.greeting_by = data.get("greeting_by") or ""
        super()._post_clean()
        # Typed here, the directions must fall within the run (a file's may outlive a shorter --turns).
        if data.get("stage_directions") and "stage_directions" not in self.errors and self.instance.cast_snapshot:
            try:
                parse_stage(data["stage_directions"], cast=self.instance.cast_names, max_turns=data.get("max_turns"))
            except StageError as exc:
                self.add_error("stage_directions", str(exc))

    def simulation_settings(self) -> dict:
        data = self.cleaned_data
        values = {name: data.get(name) for name in ("title", *SETTINGS)}
        values["weights"] = data["weights"]
        values["title"] = values["title"] or ""
        values["tool_set"] = [n for n in tools_offered.SIMULATION_TOOLS if n in set(data.get("tool_set") or [])]
        values["greeting_by"] = data.get("greeting_by") or ""
        values["seats"] = [c.name for c in data.get("cast") or [] if c in set(data.get("seats") or [])]
        last = self.last_model_run
        if not values.get("api_key") and last is not None and last.api_key and values.get("base_url") == last.base_url:
            values["api_key"] = last.api_key  # the key the writer gave this server last time
        if (not values.get("bookkeeping_api_key") and last is not None and last.bookkeeping_api_key
                and values.get("bookkeeping_base_url") == last.bookkeeping_base_url):
            values["bookkeeping_api_key"] = last.bookkeeping_api_key
        return values


class LLMSettingsForm(TextRuleForm, forms.ModelForm):
    """The model settings of a paused or failed run: fix a model name or a key, then Resume."""

    api_key = forms.CharField(required=False, widget=forms.PasswordInput(render_value=False), label="API key",
                              help_text="Leave blank to keep the stored key; tick “Remove the key” to clear it.")
    clear_api_key = forms.BooleanField(required=False, label="Remove the key")

    class Meta:
        model = Simulation
        fields = list(LLM_SETTING_FIELDS)
        labels = {"base_url": "Base URL", "timeout_s": "Time-out (s)", "max_tool_calls": "Maximum tool calls per turn"}
        widgets = {"model": forms.TextInput(attrs={"list": "model-options", "autocomplete": "off"})}

    field_order = ["provider", "base_url", "model", "api_key", "clear_api_key", "timeout_s"]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.known_models = known_models(self.instance.owner) if self.instance.owner_id else []
        self.fields["base_url"].required = False
        self.initial["api_key"] = ""  # never sent back to the browser

    def llm_settings(self) -> dict:
        data = dict(self.cleaned_data)
        clear = data.pop("clear_api_key", False)
        if clear:
            data["api_key"] = ""
        elif not data.get("api_key"):
            data.pop("api_key", None)  # blank: keep what is stored
        return data


class ReplayForm(TextRuleForm, forms.ModelForm):
    """A finished run's lines, replayed under other memory settings (the replay provider)."""

    scoring = forms.ChoiceField(choices=[(name, name) for name in SCORING_PRESETS], label="Scoring preset")

    class Meta:
        model = Simulation
        fields = ["retrieval_mode", "scoring", "association_weight", "reflection_threshold", "distortions"]
        widgets = {"distortions": forms.Textarea(attrs={"rows": 2, "placeholder": "Jordan: paranoia"})}
        labels = {"retrieval_mode": "How agents get their memories"}
        help_texts = {"retrieval_mode": RETRIEVAL_MODE_HELP}


CAST_NOTES = ("planted_beliefs", "distortions")  # the settings written line by line as "Name: …"


def carry_over(form: SimulationForm, typed: dict) -> list[str]:
    """The planted beliefs and distortions as the form shows them after the writer picked another
    scenario: the new scenario's own, where it has them; else the lines typed before that name someone
    of its cast (a line about a character who is not in it is dropped). Returns the lines dropped."""
    scenario = form.chosen_scenario
    if scenario is None:
        return []
    cast = {c.name.lower() for c in scenario.cast.all()}
    own = scenario.run_settings or {}
    dropped = []
    for name in CAST_NOTES:
        if own.get(name):
            form.initial[name] = own[name]
            continue
        kept = []
        for line in str(typed.get(name) or "").splitlines():
            holder = line.split(":", 1)[0].strip().lower() if ":" in line else ""
            (kept if not line.strip() or holder in cast else dropped).append(line)
        form.initial[name] = "\n".join(kept).strip("\n")
    return [line.strip() for line in dropped if line.strip()]
