"""How two agents stand with each other, moved by what they say, and described in words."""

from __future__ import annotations

from memory.living.relationships import describe, relationships_update, standing

__all__ = ["describe", "standing", "relationships_update"]
