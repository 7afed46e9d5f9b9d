"""run_simulation and evaluate_agents on a database nobody has set up (a fresh clone before `make
run`): they migrate it first and say so, instead of failing on a missing table."""

from __future__ import annotations

import pytest
from django.db.migrations.executor import MigrationExecutor

from chronicle import headless

pytestmark = pytest.mark.django_db


def test_a_database_with_migrations_to_apply_is_migrated_and_the_user_told(monkeypatch):
    said, ran = [], []
    monkeypatch.setattr(MigrationExecutor, "migration_plan", lambda self, targets: [("memory", "0001")])
    monkeypatch.setattr(headless, "call_command", lambda *args, **kwargs: ran.append(args))
    headless.database_ready(said.append)
    assert ran == [("migrate",)] and said == ["Setting up the database (first use)..."]


def test_a_database_already_set_up_is_left_alone(monkeypatch):
    said, ran = [], []
    monkeypatch.setattr(headless, "call_command", lambda *args, **kwargs: ran.append(args))
    headless.database_ready(said.append)
    assert ran == [] and said == []
