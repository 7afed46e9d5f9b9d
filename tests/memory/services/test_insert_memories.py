"""insert_memories (seeding's writes): the same rows as Memory.objects.bulk_create, found by search."""

import numpy as np

from memory.embedding.cache import embed_texts
from memory.recalling.lexical import lexical_query_from_stats
from memory.models import Memory
from memory.recalling.search import recall
from memory.services.memories import insert_memories

# Columns the two writes may differ in: the ids, and the moment each was written.
_OWN = {"id", "created_at", "updated_at"}


def _memories(bank, vectors) -> list[Memory]:
    return [
        Memory(bank=bank, agent="Alex", kind="character", category="background",
               content="Alex grew up above a bakery in Lyon and still wakes at four.", embedding=vectors[0],
               importance=8.0, related_goals=["open a café", "forgive Jordan"], participants=["Alex"],
               tags=["childhood"], metadata={"sheet": {"field": "background", "chunk": 1}, "note": "l'été 100%"},
               source=Memory.Source.GIFTED),
        Memory(bank=bank, agent="", kind="scene", category="location", content="Location: a quay in the rain.",
               embedding=vectors[1], source=Memory.Source.GIFTED, turn=None, speaker=""),
        Memory(bank=bank, agent="Jordan", kind="episodic", category="dialogue", content='Jordan said: it\'s late, "NULL", {late} \\ , late.',
               embedding=vectors[2], turn=7, speaker="Jordan", participants=["Jordan", "Alex", 'A "quoted", {odd} name'], emotional_valence=-0.5,
               status=Memory.Status.ARCHIVED, source=Memory.Source.EARNED),
    ]


def _row(memory: Memory) -> dict:
    values = {f.attname: getattr(memory, f.attname) for f in Memory._meta.concrete_fields
              if f.attname not in _OWN and not f.generated}
    values["embedding"] = np.asarray(values["embedding"], dtype=np.float32).round(6).tolist()
    return values


def test_insert_memories_writes_what_bulk_create_writes(bank):
    vectors = embed_texts(["a bakery in Lyon", "a quay in the rain", "it is late"])
    inserted = insert_memories(_memories(bank, vectors))
    assert [m.pk for m in inserted] == sorted(m.pk for m in inserted)  # pks set, in the given order
    assert all(not m._state.adding for m in inserted)
    created = Memory.objects.bulk_create(_memories(bank, vectors))
    for mine, theirs in zip(inserted, created, strict=True):
        a, b = Memory.objects.get(pk=mine.pk), Memory.objects.get(pk=theirs.pk)
        assert a.content == mine.content  # each pk is its own row's
        assert _row(a) == _row(b)
        assert a.created_at is not None and a.updated_at is not None
    assert Memory.objects.get(pk=inserted[0].pk).metadata["note"] == "l'été 100%"
    assert Memory.objects.get(pk=inserted[1].pk).participants == [] and Memory.objects.get(pk=inserted[1].pk).turn is None


def test_inserted_memories_are_found_by_words_and_by_vector(bank):
    vectors = embed_texts(["Alex grew up above a bakery in Lyon and still wakes at four.", "Location: a quay in the rain.",
                           "Jordan said: it's late."])
    bakery = insert_memories(_memories(bank, vectors))[0]
    # The generated search column and the term statistics (a trigger) follow the insert.
    stats = lexical_query_from_stats("bakery in Lyon", bank.pk, "Alex", None)
    assert set(stats.terms) == {"bakeri", "lyon"} and stats.candidates == 1
    found = recall(bank, "where did Alex grow up? a bakery", agent="Alex", k=1, fusion=True)
    assert [r.memory.pk for r in found] == [bakery.pk]
