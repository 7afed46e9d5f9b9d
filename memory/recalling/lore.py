"""Card lore woken by its keys (SillyTavern's world info): an entry whose key appears in the recent
lines is put before the agent, whatever a search would rank it.

A character card's character_book entries are seeded as the character's memories of category "lore"
with their keys as canonical queries (memory.forming.seed_specs); a search finds an entry by what it
means, this by the words a line actually says: "the Obsidian Gate" said aloud brings the entry on it.
A key matches as a whole word or phrase, in any case ("gate" not in "gateway").
"""

from __future__ import annotations

import re
from functools import lru_cache

from memory.models import Memory, MemoryBank, MemoryKey

LORE_CATEGORY = "lore"
LORE_LIMIT = 5  # entries woken at once: the ones most of whose keys the lines say first


@lru_cache(maxsize=4096)
def _key_pattern(key: str) -> re.Pattern:
    return re.compile(rf"(?<!\w){re.escape(key.strip())}(?!\w)", re.IGNORECASE)


def lore_triggered(bank: MemoryBank | int, agent: str, text: str, *, limit: int = LORE_LIMIT) -> list[Memory]:
    """The agent's (and the shared) active lore entries with a key in `text`, the most keys first."""
    if not text or not text.strip():
        return []
    keys = (MemoryKey.objects.filter(memory__bank=bank, memory__agent__in=[agent, ""],
                                     memory__status=Memory.Status.ACTIVE, memory__category=LORE_CATEGORY)
            .values_list("memory_id", "query"))
    hits: dict[int, int] = {}
    for memory_id, key in keys:
        if key.strip() and _key_pattern(key).search(text):
            hits[memory_id] = hits.get(memory_id, 0) + 1
    if not hits:
        return []
    chosen = sorted(hits, key=lambda pk: (-hits[pk], pk))[:limit]
    by_id = Memory.objects.in_bank(bank).in_bulk(chosen)
    return [by_id[pk] for pk in chosen if pk in by_id]
