"""Whether this database is set up: the commands a newcomer may run before `make run` ask here."""

from __future__ import annotations

from django.db import connection
from django.db.migrations.executor import MigrationExecutor


def unapplied_migrations() -> list:
    """The migrations this database still lacks (empty once `migrate` has run)."""
    executor = MigrationExecutor(connection)
    return executor.migration_plan(executor.loader.graph.leaf_nodes())
