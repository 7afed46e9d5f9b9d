"""The JSON export's turns and memories, read CHUNK rows at a time as plain values: each chunk is one
query for its rows and one for what hangs off them (a turn's retrievals, a memory's keys), grouped
here. Model objects and Django's per-object prefetch took most of a 5,000-turn export's time."""

from __future__ import annotations

from itertools import islice

from chronicle.simulation.run.models import Retrieval, Simulation
from memory.models import Memory, MemoryKey

TURN_FIELDS = ("index", "agent", "utterance", "status", "error", "prompt_messages", "usage",
               "full_definition_tokens", "context", "note", "attempts", "heard_by", "whisper_to")
RETRIEVAL_FIELDS = ("agent", "tool", "arguments", "query", "filter", "results", "response", "latency_ms", "path", "error", "order")
MEMORY_FIELDS = ("agent", "kind", "category", "about", "turn", "speaker", "content", "importance", "emotional_valence",
                 "participants", "location", "tags", "related_goals", "decay_rate", "source", "status", "metadata")
ENTRY_FIELDS = ("text", "annotation", "struck", "starred")
CHUNK = 500  # rows read at a time: a 10,000-turn run is never all in memory


def _chunks(rows):
    rows = iter(rows)
    while chunk := list(islice(rows, CHUNK)):
        yield chunk


def turn_rows(simulation: Simulation):
    """The export's turns in order, each with the writer's entry (or None) and its retrievals."""
    entry = [f"entry__{f}" for f in ("id", *ENTRY_FIELDS)]
    turns = simulation.turns.order_by("index").values_list("id", *TURN_FIELDS, *entry)
    for chunk in _chunks(turns.iterator(chunk_size=CHUNK)):
        recalled: dict[int, list[dict]] = {}
        for turn_id, *values in (Retrieval.objects.filter(turn_id__in=[row[0] for row in chunk])
                                 .order_by("turn_id", "order", "id").values_list("turn_id", *RETRIEVAL_FIELDS)):
            recalled.setdefault(turn_id, []).append(dict(zip(RETRIEVAL_FIELDS, values)))
        for pk, *values in chunk:
            fields, (entry_id, *kept) = values[:len(TURN_FIELDS)], values[len(TURN_FIELDS):]
            yield {"id": pk, **dict(zip(TURN_FIELDS, fields)),
                   "entry": dict(zip(ENTRY_FIELDS, kept)) if entry_id is not None else None,
                   "retrievals": recalled.get(pk, [])}


def memory_rows(simulation: Simulation):
    """The bank's memories by id, each with its keys' questions (without vectors: an import embeds them again)."""
    if not simulation.bank_id:
        return
    memories = Memory.objects.in_bank(simulation.bank_id).order_by("id").values_list("id", *MEMORY_FIELDS)
    for chunk in _chunks(memories.iterator(chunk_size=CHUNK)):
        keys: dict[int, list[str]] = {}
        for memory_id, query in (MemoryKey.objects.filter(memory_id__in=[row[0] for row in chunk])
                                 .order_by("memory_id", "id").values_list("memory_id", "query")):
            keys.setdefault(memory_id, []).append(query)
        for pk, *values in chunk:
            yield {"id": pk, **dict(zip(MEMORY_FIELDS, values)), "keys": keys.get(pk, [])}
