"""Every write to memory's tables goes through here (chronicle, the admin, MCP and the commands call
these; none of them writes a memory row itself). Keyword-only, typed, one transaction each.

banks.py      create, delete, mark seeded, copy as of a turn (branches)
seeding.py    gifted memories from character and scenario sheets
capture.py    episodic capture of what was said: importance (memory.importance) and capture filters
memories.py   one memory: create, edit, revise, archive, restore, re-embed, reinforce, associate; access log
"""

from memory.services.banks import bank_carry, bank_copy, bank_create, bank_delete, bank_hold, bank_mark_seeded
from memory.services.capture import LLM_BUDGET_S, CapturePlan, capture_commit, capture_prepare, remember_utterance
from memory.services.memories import (
    accesses_record,
    bank_refresh_stale,
    memory_archive,
    memory_associate,
    memory_create,
    memory_reembed,
    memory_reinforce,
    memory_restore,
    memory_revise,
    memory_update,
    memories_supersede,
)
from memory.services.seeding import SEED_BATCH, SEED_TEXTS_PER_CALL, bank_request_seed, seed_bank
from memory.services.validation import clean_int, clean_kinds, clean_text, validate_content

__all__ = [
    "LLM_BUDGET_S", "SEED_BATCH", "CapturePlan", "capture_commit", "capture_prepare", "SEED_TEXTS_PER_CALL", "accesses_record", "bank_copy", "bank_create", "bank_delete",
    "bank_carry", "bank_hold", "bank_mark_seeded",
    "bank_refresh_stale", "bank_request_seed", "memory_archive", "memory_associate", "memory_create",
    "memories_supersede", "memory_reembed", "memory_reinforce", "memory_restore", "memory_revise", "memory_update", "remember_utterance", "seed_bank",
    "clean_int", "clean_kinds", "clean_text", "validate_content",
]

from memory.services.consolidation import memory_consolidate, memory_statuses_set, memory_unconsolidate  # noqa: E402

__all__ += ["memory_consolidate", "memory_statuses_set", "memory_unconsolidate"]
