"""The layers keep to their lines: `memory` knows nothing of `chronicle`, and `chronicle` and `api` reach
memory only through its public API (memory.api) and its models (the ORM). Read from the source, not run."""

from __future__ import annotations

import ast
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def imports(package: str) -> list[tuple[str, int, str]]:
    """(file, line, imported module) for every import in the package's code (migrations aside)."""
    found = []
    for path in sorted((ROOT / package).rglob("*.py")):
        if "migrations" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                modules = [node.module] + ([f"{node.module}.{a.name}" for a in node.names] if node.module == "memory" else [])
                found += [(str(path.relative_to(ROOT)), node.lineno, m) for m in modules]
            elif isinstance(node, ast.Import):
                found += [(str(path.relative_to(ROOT)), node.lineno, a.name) for a in node.names]
    return found


def test_memory_knows_nothing_of_chronicle():
    leaks = [f"{f}:{n} imports {m}" for f, n, m in imports("memory") if m.split(".")[0] in ("chronicle", "api")]
    assert leaks == []


@pytest.mark.parametrize("package", ["chronicle", "api"])
def test_other_apps_use_memory_only_through_its_public_api(package):
    allowed = {"memory.api", "memory.models"}
    reaching_in = [f"{f}:{n} imports {m}" for f, n, m in imports(package)
                   if m.split(".")[0] == "memory" and m not in allowed and m != "memory"]
    assert reaching_in == [], "import these from memory.api (add them there if they are new):\n" + "\n".join(reaching_in)


def _offered() -> dict[str, object]:
    """Every name memory.api offers, each facade's members (memory/facades/) as `facade.name`."""
    import memory.api

    offered = {}
    for name in memory.api.__all__:
        offered[name] = value = getattr(memory.api, name)
        if isinstance(value, types.ModuleType):
            offered.update({f"{name}.{member}": getattr(value, member) for member in value.__all__})
    return offered


def test_the_public_api_names_what_it_offers():
    import memory.api

    assert sorted(memory.api.__all__) == sorted(set(memory.api.__all__))
    missing = [name for name in memory.api.__all__ if not hasattr(memory.api, name)]
    assert missing == []
    facades = [getattr(memory.api, name) for name in memory.api.__all__
               if isinstance(getattr(memory.api, name), types.ModuleType)]
    missing = [f"{f.__name__}.{member}" for f in facades for member in f.__all__ if not hasattr(f, member)]
    assert missing == []


def test_nothing_in_memory_imports_its_tasks_back():
    """Services queue memory's tasks by name (memory.queue), so the tasks module, which calls them, is
    loaded only by the app's wiring: no import cycle to hide inside a function."""
    importers = {f for f, _n, m in imports("memory") if m == "memory.tasks"}
    assert importers <= {"memory/apps.py"}


MEMORY_API_MOST = 40  # services and the types they take, not memory's insides


def test_no_task_crosses_the_public_api():
    """Other apps ask memory for background work through its request services (memory.queue); a
    Celery task handed out would let them queue memory's work their own way."""
    from celery.local import Proxy
    from celery.app.task import Task

    tasks = [name for name, value in _offered().items()
             if isinstance(value, (Task, Proxy)) or name.endswith("_task")]
    assert tasks == []


def test_no_prompt_or_parser_crosses_the_public_api():
    """What memory asks a model, and how it reads its own settings' text, are memory's own: another app
    gets its services, not its prompts' words or its parsers."""
    assert [name for name in _offered() if "prompt" in name.lower()] == []
    assert [name for name in _offered() if name.rpartition(".")[2].startswith("parse")] == []


def test_the_public_api_is_a_handful_of_services():
    import memory.api

    assert len(memory.api.__all__) <= MEMORY_API_MOST, f"memory.api exports {len(memory.api.__all__)} names"


def test_memory_imports_its_own_modules_at_the_top():
    """An import of memory's own code inside a function hides a cycle; the two allowed are the app's
    ready() (the models load first) and the MCP SDK's slow import behind memory.api.build_server."""
    local = []
    for path in sorted((ROOT / "memory").rglob("*.py")):
        if "migrations" in path.parts:
            continue
        for fn in ast.walk(ast.parse(path.read_text())):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for node in ast.walk(fn):
                    if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "memory":
                        local.append(f"{path.relative_to(ROOT)}:{fn.name}")
                    elif isinstance(node, ast.Import) and any(a.name.split(".")[0] == "memory" for a in node.names):
                        local.append(f"{path.relative_to(ROOT)}:{fn.name}")
    assert sorted(local) == ["memory/api.py:build_server", "memory/apps.py:ready"]


MEMORY_MODELS = {"MemoryBank", "Memory", "MemoryKey", "Relationship", "MemoryAccess", "TermStat", "EmbeddingCache",
                 "BankMap"}
WRITES = {"create", "bulk_create", "get_or_create", "update_or_create", "update", "delete", "bulk_update"}


def _writes_memory(node: ast.Call) -> bool:
    """`Memory.objects….update(…)` and the like, or `memory.save()` / `bank.delete()` on a name that
    holds one of memory's rows."""
    func = node.func
    if not isinstance(func, ast.Attribute):
        return False
    if func.attr in ("save", "delete") and isinstance(func.value, (ast.Name, ast.Attribute)):
        name = func.value.id if isinstance(func.value, ast.Name) else func.value.attr
        if name in ("memory", "bank", "memory_bank", "relationship"):
            return True
    if func.attr in WRITES:
        inner = func.value
        while isinstance(inner, (ast.Attribute, ast.Call)):
            inner = inner.func if isinstance(inner, ast.Call) else inner.value
            if isinstance(inner, ast.Attribute) and inner.attr == "objects" and isinstance(inner.value, ast.Name):
                return inner.value.id in MEMORY_MODELS
    return False


@pytest.mark.parametrize("package", ["chronicle", "api"])
def test_no_memory_table_is_written_outside_memory(package):
    """chronicle and api change memory's rows only through memory.api's services (memory_update,
    memory_mark, bank_rename, bank_delete…), which keep vectors, keys and signals in step."""
    writes = []
    for path in sorted((ROOT / package).rglob("*.py")):
        if "migrations" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and _writes_memory(node):
                writes.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert writes == [], "write through a memory.api service:\n" + "\n".join(writes)


def test_the_import_contracts_hold():
    """pyproject.toml's [tool.importlinter] contracts: which package may import which, indirect imports
    included (`lint-imports` reads the source; it runs nothing)."""
    import subprocess
    import sys

    lint = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@pytest.mark.parametrize("package", ["chronicle", "memory", "api", "wonda_site", "core", "devtools"])
def test_no_two_modules_import_each_other(package):
    """A module that imports one that imports it back is a knot: neither can be read, tested or moved
    alone. Every import counts, those inside a function or behind TYPE_CHECKING too."""
    modules = {_module_name(p): p for p in (ROOT / package).rglob("*.py") if "migrations" not in p.parts}
    edges: dict[str, set[str]] = {}
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                # `from package import module` depends on that module; any other name, on the package.
                targets = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules else node.module
                           for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            edges.setdefault(name, set()).update(t for t in targets if t in modules and t != name)
    knots = sorted(f"{a} <-> {b}" for a, targets in edges.items() for b in targets
                   if a < b and a in edges.get(b, set()))
    assert knots == []


@pytest.mark.parametrize("package", ["chronicle", "memory", "api"])
def test_similarity_is_named_once(package):
    """memory.recalling.scoring.SIMILARITY names a score's similarity part: its component, its weight, the
    preset of it alone, and so DEFAULT_SCORING, every default preset (a run's, a search's, the commands').
    A literal "similarity" elsewhere would drift from it when the default changes."""
    literal = []
    for path in sorted((ROOT / package).rglob("*.py")):
        if "migrations" in path.parts or path == ROOT / "memory/recalling/scoring.py":
            continue
        literal += [f"{path.relative_to(ROOT)}:{node.lineno}" for node in ast.walk(ast.parse(path.read_text()))
                    if isinstance(node, ast.Constant) and node.value == "similarity"]
    assert literal == []
