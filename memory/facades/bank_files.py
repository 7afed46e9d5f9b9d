"""The relationships and accesses a bank's file carries out and back in, each checked before it is written."""

from __future__ import annotations

from memory.services.banks import (
    access_check, accesses_export, accesses_import, relationship_check, relationships_export,
    relationships_import,
)

__all__ = [
    "relationship_check", "relationships_export", "relationships_import", "access_check", "accesses_export",
    "accesses_import",
]
