"""What a run's settings mean, for Simulation (a mixin, kept apart so the model stays readable): the
checks on them (clean), their parsed forms (stage directions, distortions, the clock) and their labels."""

from __future__ import annotations

from django.core.exceptions import ValidationError


class RunSettingsMixin:
    """Simulation's reading of its own settings; every attribute it uses is a Simulation field or choice."""

    def clean(self):
        # Settings also arrive from files (simulation import, run_simulation): checked here, not only in the form.
        from memory.api import SIMULATION_TOOLS

        errors = {}
        tools = self.tool_set
        if not isinstance(tools, list) or not all(isinstance(name, str) for name in tools):
            errors["tool_set"] = "A list of tool names."
        elif unknown := [name for name in tools if name not in SIMULATION_TOOLS]:
            errors["tool_set"] = f"Unknown tool {unknown[0]!r}; the tools are: {', '.join(SIMULATION_TOOLS)}."
        elif not tools and self.retrieval_mode == self.RetrievalMode.TOOLS:
            errors["tool_set"] = "The Tools mode needs at least one tool: tick some, or choose Pre-populate."
        if self.provider == self.Provider.REPLAY and not self.script:
            errors["provider"] = "Replay plays lines given in advance: import a file with a script, or replay a finished run."
        elif self.script and self.cast_snapshot:
            from chronicle.simulation.replay import ScriptError, check_script

            try:
                check_script(self.script, cast=self.cast_names, stage_directions=self.stage_directions)
            except ScriptError as exc:
                errors["script"] = str(exc)
        seats = self.seats
        if not isinstance(seats, list) or not all(isinstance(name, str) for name in seats):
            errors["seats"] = "A list of character names."
        elif seats and self.cast_snapshot and (outside := [n for n in seats if n not in self.cast_names]):
            errors["seats"] = f"{outside[0]} is not in this run's cast."
        elif seats and self.provider == self.Provider.REPLAY:
            errors["seats"] = "A replay says its recorded lines: nobody can take a seat in it."
        if self.greeting_by and self.cast_snapshot and self.greeting_by not in self.cast_names:
            errors["greeting_by"] = f"{self.greeting_by} is not in this run's cast."
        if self.stage_directions and self.cast_snapshot:
            from chronicle.simulation.stage import StageError, parse

            try:
                # Past the last turn is allowed here: a file's directions outlive a shorter --turns
                # (the form, where the writer types them, says so).
                parse(self.stage_directions, cast=self.cast_names)
            except StageError as exc:
                errors["stage_directions"] = str(exc)
        if self.sequel_carry and self.cast_snapshot:
            try:
                self.carry_plan()
            except ValidationError as exc:
                errors["sequel_carry"] = exc.messages[0]
        if self.sequel_of_id and self.sequel_of.owner_id != self.owner_id:
            errors["sequel_of"] = "A sequel continues one of your own runs."
        if self.distortions and self.cast_snapshot:
            from memory.api import DistortionError
            from memory.api import parse_distortions

            try:
                parse_distortions(self.distortions, cast=self.cast_names)
            except DistortionError as exc:
                errors["distortions"] = str(exc)
        if self.planted_beliefs and self.cast_snapshot:
            from chronicle.simulation.beliefs import BeliefError
            from chronicle.simulation.beliefs import parse as parse_beliefs

            try:
                parse_beliefs(self.planted_beliefs, cast=self.cast_names)
            except BeliefError as exc:
                errors["planted_beliefs"] = str(exc)
        if errors:
            raise ValidationError(errors)

    @property
    def directions(self) -> list:
        """The stage directions, parsed (chronicle.simulation.stage.Direction); [] when there are none."""
        from chronicle.simulation.stage import StageError, parse

        try:
            return parse(self.stage_directions, cast=self.cast_names)
        except StageError:  # clean() refused it on the way in; an old row is read as no directions
            return []

    @property
    def distortion_filters(self) -> list:
        """The run's distortion filters, parsed (memory.distortion.Distortion); [] when there are none."""
        from memory.api import DistortionError, parse_distortions

        try:
            return parse_distortions(self.distortions, cast=self.cast_names) if self.distortions else []
        except DistortionError:  # clean() refused it on the way in
            return []

    @property
    def clock(self) -> list[float] | None:
        """The clock's skips per turn as memory's recall takes them (stage.clock_skips); None: no clock."""
        from chronicle.simulation.stage import clock_skips

        return clock_skips(self.directions, self.minutes_per_turn, self.max_turns)

    def present_at(self, number: int) -> list[str]:
        """Who is in the room at turn `number` (1-based)."""
        from chronicle.simulation.stage import present_at

        return present_at(self.directions, self.cast_names, number)

    @property
    def option_labels(self) -> list[str]:
        """The run's memory options in words, for the run page's header."""
        from memory.api import SIMULATION_TOOLS

        labels = []
        if self.retrieval_mode != self.RetrievalMode.PREPOPULATE:
            tools = list(self.tool_set or [])
            labels.append(f"all {len(tools)} tools" if set(tools) >= set(SIMULATION_TOOLS)
                          else f"tools: {', '.join(tools) or 'none'}")
        enhanced = [name for on, name in ((self.query_context, "scene context"), (self.query_temporal, "turn boost"),
                                          (self.query_synonyms, "synonyms")) if on]
        labels.append(f"query enhancement: {', '.join(enhanced) or 'off'}")
        if self.association_weight:
            labels.append(f"follows links ×{self.association_weight:g}")
        if self.consult_memories:
            labels.append("consults memories")
        if self.confidence_gating:
            labels.append("confidence gating")
        if self.greeting_by:
            labels.append(f"opens with {self.greeting_by}'s greeting")
        # Memory formation: how lines are scored and kept, when agents reflect and consolidate.
        scorer = "heuristic"
        if self.importance_scorer == self.ImportanceScorer.LLM and self.provider == self.Provider.OPENAI:
            scorer = "model"
        elif self.importance_scorer == self.ImportanceScorer.LLM and self.provider == self.Provider.REPLAY:
            scorer = "heuristic (the calls a model would get are counted)"
        labels.append(f"importance: {scorer}")
        kept = [text for on, text in ((self.capture_importance_floor, f"importance ≥ {self.capture_importance_floor:g}"),
                                      (self.capture_duplicate_threshold < 1, f"no duplicates ≥ {self.capture_duplicate_threshold:g}"),
                                      (self.capture_only_concerning, "only what concerns them")) if on]
        if kept:
            labels.append(f"keeps: {', '.join(kept)}")
        if self.minutes_per_turn:
            labels.append(f"clock: {self.minutes_per_turn:g} min a turn")
        for f in self.distortion_filters:
            labels.append(f"{f.agent}: {f.label()} ({f.stage})")
        labels.append(f"reflects at {self.reflection_threshold:g}")
        labels.append(f"consolidates past {self.consolidation_budget} lines" if self.consolidation_budget
                      else "consolidates only on request")
        return labels
