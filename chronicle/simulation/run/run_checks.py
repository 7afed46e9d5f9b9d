"""What a run's settings mean, for Simulation (a mixin, kept apart so the model stays readable): the
checks on them (clean) and their parsed forms (stage directions, distortions, the clock). Which
settings there are, and their labels, is run_settings.py."""

from __future__ import annotations

from django.core.exceptions import ValidationError

from chronicle.simulation.run import run_settings
from chronicle.simulation.story.beliefs import BeliefError
from chronicle.simulation.story.beliefs import parse as parse_beliefs
from chronicle.simulation.run.replay import ScriptError, check_script
from chronicle.simulation.story.calendar import at_daily_limit, day_of, skips_from, story_time_at, story_times, story_times_at
from chronicle.simulation.story.stage import StageError, clock_skips, present_at
from chronicle.simulation.story.stage import parse as parse_stage
from memory.api import distortions, tools_offered, upkeep


class RunSettingsMixin:
    """Simulation's reading of its own settings; every attribute it uses is a Simulation field or choice."""

    def clean(self):
        # Settings also arrive from files (simulation import, run_simulation): checked here, not only in the form.
        # The one check of a run's settings: the new-run form, a paused run's model form, a file's import
        # and run_simulation all show these messages.
        errors = {**self._server_errors(), **self._tool_set_errors(), **self._script_errors(), **self._seat_errors(),
                  **self._cast_text_errors()}
        if self.sequel_of_id and self.sequel_of.owner_id != self.owner_id:
            errors["sequel_of"] = "A sequel continues one of your own runs."
        if errors:
            raise ValidationError(errors)

    def _server_errors(self) -> dict:
        if self.provider == self.Provider.OPENAI and not (self.base_url and self.model):
            return {"base_url": run_settings.NEEDS_SERVER}
        if bool(self.bookkeeping_base_url) != bool(self.bookkeeping_model):
            return {"bookkeeping_model": run_settings.NEEDS_BOOKKEEPING_SERVER}
        return {}

    def _tool_set_errors(self) -> dict:
        tools = self.tool_set
        if not isinstance(tools, list) or not all(isinstance(name, str) for name in tools):
            return {"tool_set": "A list of tool names."}
        if unknown := [name for name in tools if name not in tools_offered.SIMULATION_TOOLS]:
            return {"tool_set": f"Unknown tool {unknown[0]!r}; the tools are: {', '.join(tools_offered.SIMULATION_TOOLS)}."}
        if not tools and self.retrieval_mode == self.RetrievalMode.TOOLS:
            return {"tool_set": "The Tools mode needs at least one tool: tick some, or choose Pre-populate."}
        return {}

    def _script_errors(self) -> dict:
        if self.provider == self.Provider.REPLAY and not self.script:
            return {"provider": "Replay plays lines given in advance: import a file with a script, or replay a finished run."}
        if self.script and self.cast_snapshot:
            try:
                check_script(self.script, cast=self.cast_names, stage_directions=self.stage_directions)
            except ScriptError as exc:
                return {"script": str(exc)}
        return {}

    def _seat_errors(self) -> dict:
        seats = self.seats
        if not isinstance(seats, list) or not all(isinstance(name, str) for name in seats):
            return {"seats": "A list of character names."}
        if seats and self.cast_snapshot and (outside := [n for n in seats if n not in self.cast_names]):
            return {"seats": f"{outside[0]} is not in this run's cast."}
        if seats and self.provider == self.Provider.REPLAY:
            return {"seats": "A replay says its recorded lines: nobody can take a seat in it."}
        return {}

    def _cast_text_errors(self) -> dict:
        """The settings written against the cast (the greeter, directions, carry-over, filters, beliefs)."""
        if not self.cast_snapshot:
            return {}
        cast = self.cast_names
        checks = {
            # Past the last turn is allowed here: a file's directions outlive a shorter --turns (the
            # form, where the writer types them, says so).
            "stage_directions": (lambda text: parse_stage(text, cast=cast), StageError),
            "sequel_carry": (lambda _text: self.carry_plan(), ValidationError),
            "distortions": (lambda text: distortions.distortions_check(text, cast=cast), ValueError),
            "planted_beliefs": (lambda text: parse_beliefs(text, cast=cast), BeliefError),
        }
        errors = {}
        if self.greeting_by and self.greeting_by not in cast:
            errors["greeting_by"] = f"{self.greeting_by} is not in this run's cast."
        for name, (check, failure) in checks.items():
            if text := getattr(self, name):
                try:
                    check(text)
                except failure as exc:
                    errors[name] = exc.messages[0] if isinstance(exc, ValidationError) else str(exc)
        return errors

    @property
    def directions(self) -> list:
        """The stage directions, parsed (chronicle.simulation.story.stage.Direction); [] when there are none."""
        try:
            return parse_stage(self.stage_directions, cast=self.cast_names)
        except StageError:  # clean() refused it on the way in; an old row is read as no directions
            return []

    @property
    def distortion_filters(self) -> list:
        """The run's distortion filters, parsed (memory.forming.distortion.Distortion); [] when there are none."""
        return distortions.distortion_filters(self.distortions, cast=self.cast_names)

    @property
    def story_times(self) -> list:
        """The story's date and time at each turn 0..max_turns (chronicle.simulation.story.calendar); None
        where the story has no date yet."""
        start = self.story_start.replace(tzinfo=None) if self.story_start else None
        return story_times(self.directions, start=start, minutes_per_turn=self.minutes_per_turn, turns=self.max_turns)

    def story_time_at(self, number: int):
        """The story's date and time at turn `number` (1-based), or None."""
        start = self.story_start.replace(tzinfo=None) if self.story_start else None
        return story_time_at(self.directions, start=start, minutes_per_turn=self.minutes_per_turn, number=number)

    def story_times_at(self, numbers) -> dict:
        """story_time_at for many turns (a page of lines): the directions parsed and walked once."""
        start = self.story_start.replace(tzinfo=None) if self.story_start else None
        return story_times_at(self.directions, start=start, minutes_per_turn=self.minutes_per_turn, numbers=numbers)

    def reflected_out_today(self, names: list[str], number: int) -> set[str]:
        """Who has had the day's reflections already at turn `number` (none without a calendar)."""
        now = self.story_time_at(number)
        if now is None or not names:
            return set()
        return at_daily_limit(upkeep.reflections_between(self.bank, names, *day_of(now)))

    @property
    def clock(self) -> list[float] | None:
        """The clock's skips per turn as memory's recall takes them (stage.clock_skips, or the story
        calendar's when it has dates); None: no clock."""
        if self.story_start or any(d.kind == "event" for d in self.directions):
            skips = skips_from(self.story_times, self.minutes_per_turn)
            if skips is not None:
                return skips
        return clock_skips(self.directions, self.minutes_per_turn, self.max_turns)

    def present_at(self, number: int) -> list[str]:
        """Who is in the room at turn `number` (1-based)."""
        return present_at(self.directions, self.cast_names, number)

    @property
    def option_labels(self) -> list[str]:
        """The run's memory options in words, for the run page's header."""
        return run_settings.option_labels(self)
