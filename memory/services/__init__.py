"""Writes to banks and single memories (chronicle, the admin, MCP and the commands reach them through
memory.api or here; none of them writes a memory row itself). Keyword-only, typed, one transaction each.

banks.py       create, delete, mark seeded, copy as of a turn (branches)
memories.py    one memory: create, edit, revise, archive, restore, re-embed, reinforce, associate; access log
validation.py  the content rule, the text rule every input obeys, and the bounds it is clamped to

What a memory goes through has its own writes beside its rules: memory.forming.seeding and
memory.forming.capture (how memories are made), memory.living.consolidation (summaries and the way back).
"""

from memory.services.banks import (
    bank_carry, bank_copy, bank_create, bank_delete, bank_hold, bank_mark_seeded, bank_rename, banks_delete,
)
from memory.services.memories import (
    accesses_record, bank_refresh_stale, memories_create, memories_dated, memories_supersede, memory_archive,
    memory_associate, memory_check, memory_create, memory_mark, memory_reembed, memory_reinforce, memory_restore, memory_revise, memory_update, secrets_mark_told,
)
from memory.services.validation import (
    clean_int, clean_kinds, clean_text, text_problem, text_problem_in, validate_content, visible,
)

__all__ = [
    "accesses_record", "bank_carry", "bank_copy", "bank_create", "bank_delete", "banks_delete", "bank_hold",
    "bank_rename",
    "bank_mark_seeded",
    "bank_refresh_stale", "memories_create", "memories_dated", "memories_supersede", "memory_archive",
    "memory_associate", "memory_check", "memory_mark", "memory_create",
    "memory_reembed", "memory_reinforce", "memory_restore", "memory_revise", "memory_update", "secrets_mark_told",
    "clean_int", "clean_kinds", "clean_text", "text_problem", "text_problem_in", "validate_content", "visible",
]
