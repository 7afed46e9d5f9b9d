"""The JSON export written out as it is read: the run's turns and memories go out CHUNK rows at a
time (export_rows.turn_rows, memory_rows), so a 10,000-turn export never sits whole in memory."""

from __future__ import annotations

import json

from chronicle.simulation.run.models import Simulation
from chronicle.writing import exports

_TURNS, _MEMORIES = "\x00turns\x00", "\x00memories\x00"


def _dumps(value) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)


def _items(rows) -> str:
    """A JSON list's items, one at a time, indented as json.dumps(indent=2) puts them under a top-level key."""
    first = True
    for row in rows:
        # Each line indented under its key; "\n" only: json.dumps escapes it inside strings, but not
        # other line breaks (U+2028).
        yield ("" if first else ",") + "\n    " + _dumps(row).replace("\n", "\n    ")
        first = False
    if not first:
        yield "\n  "


def json_chunks(simulation: Simulation):
    """exports.to_json(simulation) as json.dumps(indent=2) text, in pieces."""
    head = _dumps(exports.export_head(simulation) | {"turns": _TURNS, "memories": _MEMORIES})
    before_turns, rest = head.split(_dumps(_TURNS), 1)
    between, after_memories = rest.split(_dumps(_MEMORIES), 1)
    yield before_turns + "["
    yield from _items(exports.turn_rows(simulation))
    yield "]" + between + "["
    yield from _items(exports.memory_rows(simulation))
    yield "]" + after_memories
