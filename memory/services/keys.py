"""Keys made after their memory: embedded by a worker, off the path of whoever wrote the memory (a
turn's reply keys, a stage direction's "just after" keys), found by them a moment later."""

from __future__ import annotations

from django.db import transaction

from memory.embedding.cache import embed_texts
from memory.models import Memory
from memory.services.banks import bank_hold
from memory.services.memories import insert_keys


def keys_attach(*, pairs: list[tuple[int, str]]) -> set[int]:
    """Store (memory id, key text) pairs as keys, every text embedded in one model call before any
    lock; the stored query is the text's first 300 characters (MemoryKey.query's length), the vector
    the whole text's. A memory deleted meanwhile (its bank gone) gets none. Returns the ids of those keyed."""
    pairs = [(int(pk), text) for pk, text in pairs if text and text.strip()]
    if not pairs:
        return set()
    texts = list(dict.fromkeys(text for _pk, text in pairs))
    vectors = dict(zip(texts, embed_texts(texts)))  # before the lock: the model is the slow part
    ids = {pk for pk, _text in pairs}
    with transaction.atomic():
        # The banks' rows FOR SHARE: bank_delete (FOR UPDATE) waits for these keys or has already
        # removed the memories, which the second look then leaves out.
        for bank_id in sorted(set(Memory.objects.filter(pk__in=ids).values_list("bank_id", flat=True))):
            bank_hold(bank_id)
        alive = set(Memory.objects.filter(pk__in=ids).values_list("pk", flat=True))
        kept = [(pk, text) for pk, text in pairs if pk in alive]
        insert_keys([pk for pk, _text in kept], [text[:300].strip() for _pk, text in kept],
                    [vectors[text] for _pk, text in kept])
    return {pk for pk, _text in kept}
