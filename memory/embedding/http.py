"""The HTTP backends (seed 000): OpenAI's ``/v1/embeddings`` or Ollama's ``/api/embeddings``,
at ``WONDA_EMBEDDING_URL``; ``WONDA_EMBEDDING_BACKEND`` (openai or ollama) chooses."""

from __future__ import annotations

import numpy as np
from django.conf import settings

from memory.embedding.errors import EmbeddingError


def encode(texts: list[str]) -> np.ndarray:
    import httpx  # lazy: ~0.16 s to import, and only these backends need it

    base = settings.EMBEDDING_URL.rstrip("/")
    if not base:
        raise EmbeddingError("WONDA_EMBEDDING_URL must be set for the openai/ollama embedding backends")
    headers = {"Authorization": f"Bearer {settings.EMBEDDING_API_KEY}"} if settings.EMBEDDING_API_KEY else {}
    try:
        if settings.EMBEDDING_BACKEND == "openai":
            response = httpx.post(
                f"{base}/embeddings", json={"model": settings.EMBEDDING_MODEL, "input": texts}, headers=headers, timeout=60
            )
            response.raise_for_status()
            rows = sorted(response.json()["data"], key=lambda row: row["index"])
            vectors = [row["embedding"] for row in rows]
        else:  # ollama: one prompt per call
            vectors = []
            for text in texts:
                response = httpx.post(
                    f"{base}/api/embeddings", json={"model": settings.EMBEDDING_MODEL, "prompt": text}, timeout=60
                )
                response.raise_for_status()
                vectors.append(response.json()["embedding"])
    except (httpx.HTTPError, KeyError, ValueError) as exc:
        raise EmbeddingError(f"embedding server at {base} failed: {exc}") from exc
    array = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(array, axis=1, keepdims=True)
    return array / np.where(norms == 0, 1, norms)
