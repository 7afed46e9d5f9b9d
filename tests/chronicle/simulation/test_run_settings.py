"""A run's settings are listed once (run_settings.RUN_SETTINGS): each is a field of the run, and each the
turn takes is a field of the turn's input."""

from __future__ import annotations

import dataclasses

from chronicle.simulation.turn.types import TurnInput
from chronicle.simulation.run.models import Simulation
from chronicle.simulation.run.run_settings import FILE_SETTINGS, RUN_SETTINGS, SECRET_SETTINGS


def test_each_setting_is_a_field_of_the_run():
    fields = {f.name for f in Simulation._meta.get_fields()}
    assert [s.name for s in RUN_SETTINGS if s.name not in fields] == []


def test_each_setting_a_turn_takes_is_a_field_of_its_input():
    inputs = {f.name for f in dataclasses.fields(TurnInput)}
    assert [s.turn for s in RUN_SETTINGS if s.turn and s.turn not in inputs] == []


def test_a_file_never_carries_a_secret():
    assert SECRET_SETTINGS and not set(SECRET_SETTINGS) & set(FILE_SETTINGS)
