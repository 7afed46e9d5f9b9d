"""Services queue chronicle's tasks by name: each name must be a task a worker runs."""

from __future__ import annotations

from chronicle import queueing
from wonda_site.celery import app


def test_each_name_the_services_queue_is_a_registered_task():
    app.loader.import_default_modules()  # what a worker does at start: the tasks modules register theirs
    for name in (queueing.START_SIMULATION, queueing.RUN_TURN, queueing.IMPORT_BANK):
        assert name in app.tasks


def test_every_task_names_itself_so_a_module_move_renames_nothing():
    """A task's name is what sits in the queue: derived from its module path, a move to another
    package would leave queued turns and recorded runs pointing at a name no worker knows."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    unnamed = []
    for path in sorted(p for package in ("chronicle", "memory", "api") for p in (root / package).rglob("tasks.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef):
                for deco in node.decorator_list:
                    called = deco.func if isinstance(deco, ast.Call) else deco
                    if getattr(called, "id", None) == "shared_task" and not (
                            isinstance(deco, ast.Call) and any(k.arg == "name" for k in deco.keywords)):
                        unnamed.append(f"{path.relative_to(root)}:{node.name}")
    assert unnamed == []
