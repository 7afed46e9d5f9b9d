"""What every page shows: a banner while the embedding model is unavailable (degraded mode)."""

from memory.embedding import health


def degraded(request) -> dict:
    if not getattr(request, "user", None) or not request.user.is_authenticated:
        return {}  # the login page need not ask Redis
    return {"embedder_down": health.down()}
