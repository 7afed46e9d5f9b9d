"""A bank as a whole: made, copied, carried into a sequel, seeded, renamed, held, deleted; its figures, map and
pruning count."""

from __future__ import annotations

from memory.forming.seeding import bank_request_seed, bank_seed
from memory.living.pruning import pruned_count
from memory.measuring.projection import bank_map
from memory.measuring.stats import memory_stats
from memory.measuring.stats import BANDS as IMPORTANCE_BANDS
from memory.queue import bank_map_request
from memory.services import (
    bank_carry, bank_copy, bank_create, bank_delete, bank_hold, bank_mark_seeded, bank_rename, banks_delete,
)
from memory.services.banks import CARRY_MODES

__all__ = [
    "bank_create", "bank_copy", "bank_carry", "bank_delete", "banks_delete", "bank_hold", "bank_rename",
    "bank_mark_seeded", "bank_request_seed", "bank_seed", "CARRY_MODES", "bank_map", "bank_map_request",
    "memory_stats", "IMPORTANCE_BANDS", "pruned_count",
]
