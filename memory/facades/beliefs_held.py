"""What an agent holds true: planted beliefs, claims it heard, its secrets and who has been told them."""

from __future__ import annotations

from memory.forming.seed_specs import SECRET_LABEL
from memory.recalling.held import HeldBelief, beliefs_planted, held_beliefs, held_claims, held_secrets
from memory.services import secrets_mark_told

__all__ = [
    "SECRET_LABEL", "HeldBelief", "beliefs_planted", "held_beliefs", "held_claims", "held_secrets",
    "secrets_mark_told",
]
