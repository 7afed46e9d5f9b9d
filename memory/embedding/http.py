"""The HTTP backends (seed 000): OpenAI's ``/v1/embeddings`` or Ollama's ``/api/embeddings``,
at ``WONDA_EMBEDDING_URL``; ``WONDA_EMBEDDING_BACKEND`` (openai or ollama) chooses."""

from __future__ import annotations

import os
import threading

import numpy as np
from django.conf import settings

from memory.embedding.errors import EmbeddingError

_pool: tuple[int, object] | None = None  # (the process it was made in, its HTTP client)
_pool_lock = threading.Lock()


def _client():
    """One connection pool per process (made after any fork): a call per request built a new SSL
    context (~50 ms) and a new connection for every line and every query."""
    import httpx  # lazy: ~0.16 s to import, and only these backends need it

    global _pool
    with _pool_lock:
        if _pool is None or _pool[0] != os.getpid():
            _pool = (os.getpid(), httpx.Client(timeout=60))
        return _pool[1]


def encode(texts: list[str]) -> np.ndarray:
    import httpx

    base = settings.EMBEDDING_URL.rstrip("/")
    if not base:
        raise EmbeddingError("WONDA_EMBEDDING_URL must be set for the openai/ollama embedding backends")
    headers = {"Authorization": f"Bearer {settings.EMBEDDING_API_KEY}"} if settings.EMBEDDING_API_KEY else {}
    try:
        if settings.EMBEDDING_BACKEND == "openai":
            response = _client().post(
                f"{base}/embeddings", json={"model": settings.EMBEDDING_MODEL, "input": texts}, headers=headers, timeout=60
            )
            response.raise_for_status()
            rows = sorted(response.json()["data"], key=lambda row: row["index"])
            vectors = [row["embedding"] for row in rows]
        else:  # ollama: one prompt per call
            vectors = []
            for text in texts:
                response = _client().post(
                    f"{base}/api/embeddings", json={"model": settings.EMBEDDING_MODEL, "prompt": text}, timeout=60
                )
                response.raise_for_status()
                vectors.append(response.json()["embedding"])
    except (httpx.HTTPError, KeyError, ValueError) as exc:
        raise EmbeddingError(f"embedding server at {base} failed: {exc}") from exc
    array = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(array, axis=1, keepdims=True)
    return array / np.where(norms == 0, 1, norms)
