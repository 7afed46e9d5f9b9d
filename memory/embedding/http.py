"""The HTTP backends (seed 000): an OpenAI-compatible ``/v1/embeddings`` or Ollama's ``/api/embed``
(``/api/embeddings`` on an Ollama before 0.3), at ``WONDA_EMBEDDING_URL``.

``WONDA_EMBEDDING_BACKEND`` (openai or ollama) says which to ask first; a server that does not
know that path (404, 405) or answers in a shape neither speaks is asked the other way, and the way
that worked is kept for the process. The answer's format is read from its shape, whichever path
gave it: OpenAI's ``{"data": [{"index", "embedding"}]}``, Ollama's ``{"embeddings": [...]}`` or
``{"embedding": [...]}``. So a URL pointed at Ollama with the openai backend (or the reverse) works.
"""

from __future__ import annotations

import os
import threading

import numpy as np
from django.conf import settings

from memory.embedding.errors import EmbeddingError

_pool: tuple[int, object] | None = None  # (the process it was made in, its HTTP client)
_pool_lock = threading.Lock()
_working: dict[str, str] = {}  # base URL → the way ("openai", "ollama", "ollama-legacy") that answered


class _OtherWay(Exception):
    """This server does not speak the way asked: try the next one."""


def _client():
    """One connection pool per process (made after any fork): a call per request built a new SSL
    context (~50 ms) and a new connection for every line and every query."""
    import httpx  # lazy: ~0.16 s to import, and only these backends need it

    global _pool
    with _pool_lock:
        if _pool is None or _pool[0] != os.getpid():
            _pool = (os.getpid(), httpx.Client(timeout=60))
        return _pool[1]


def _urls(base: str) -> dict[str, str]:
    """Each way's endpoint from the configured URL (an OpenAI-style base ends in /v1, Ollama's not)."""
    root = base[:-3] if base.endswith("/v1") else base
    v1 = base if settings.EMBEDDING_BACKEND == "openai" or base.endswith("/v1") else f"{root}/v1"
    return {"openai": f"{v1}/embeddings", "ollama": f"{root}/api/embed", "ollama-legacy": f"{root}/api/embeddings"}


def _order(base: str) -> list[str]:
    first = ["ollama", "ollama-legacy", "openai"] if settings.EMBEDDING_BACKEND == "ollama" else \
        ["openai", "ollama", "ollama-legacy"]
    known = _working.get(base)
    return [known] + [w for w in first if w != known] if known else first


def parse(body, count: int) -> list[list[float]]:
    """The vectors in an answer of any of the formats (module docstring), or _OtherWay."""
    if isinstance(body, dict):
        if isinstance(body.get("data"), list):
            rows = sorted(body["data"], key=lambda row: row.get("index", 0))
            vectors = [row.get("embedding") for row in rows]
        elif isinstance(body.get("embeddings"), list):
            vectors = body["embeddings"]
        elif isinstance(body.get("embedding"), list):
            vectors = [body["embedding"]]
        else:
            raise _OtherWay(f"an answer with none of data, embeddings or embedding: {str(body)[:200]}")
        if len(vectors) == count and all(isinstance(v, list) and v for v in vectors):
            return vectors
        raise _OtherWay(f"{len(vectors)} vectors for {count} texts")
    raise _OtherWay(f"an answer that is not a JSON object: {str(body)[:200]}")


def _ask(way: str, url: str, texts: list[str], headers: dict) -> list[list[float]]:
    model = settings.EMBEDDING_MODEL
    if way == "ollama-legacy":  # one prompt per call
        return [v for text in texts for v in _post(url, {"model": model, "prompt": text}, headers, 1)]
    return _post(url, {"model": model, "input": texts}, headers, len(texts))


def _post(url: str, payload: dict, headers: dict, count: int) -> list[list[float]]:
    response = _client().post(url, json=payload, headers=headers, timeout=60)
    if response.status_code in (404, 405):
        raise _OtherWay(f"{url} answered {response.status_code}")
    response.raise_for_status()
    try:
        body = response.json()
    except ValueError as exc:
        raise _OtherWay(f"{url} answered something that is not JSON") from exc
    return parse(body, count)


def encode(texts: list[str]) -> np.ndarray:
    import httpx

    base = settings.EMBEDDING_URL.rstrip("/")
    if not base:
        raise EmbeddingError("WONDA_EMBEDDING_URL must be set for the openai/ollama embedding backends")
    headers = {"Authorization": f"Bearer {settings.EMBEDDING_API_KEY}"} if settings.EMBEDDING_API_KEY else {}
    urls, tried = _urls(base), []
    try:
        for way in _order(base):
            try:
                vectors = _ask(way, urls[way], texts, headers)
            except _OtherWay as exc:
                tried.append(str(exc))
                continue
            _working[base] = way
            break
        else:
            raise EmbeddingError(f"embedding server at {base} speaks neither OpenAI's nor Ollama's embedding API: "
                                 + "; ".join(tried))
    except httpx.HTTPError as exc:
        raise EmbeddingError(f"embedding server at {base} failed: {exc}") from exc
    try:
        array = np.asarray(vectors, dtype=np.float32)
    except ValueError as exc:  # vectors of different lengths
        raise EmbeddingError(f"embedding server at {base} gave vectors of different sizes") from exc
    norms = np.linalg.norm(array, axis=1, keepdims=True)
    return array / np.where(norms == 0, 1, norms)
