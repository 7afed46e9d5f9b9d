"""Text → vector. The only package that imports sentence-transformers, torch or onnxruntime.

``WONDA_EMBEDDING_BACKEND`` chooses: ``local`` (local: all-MiniLM-L6-v2 through torch, loaded once
per process, lazily, offline; a search's few texts through query_encoder, ONNX Runtime int8 by
default) or ``openai``/``ollama`` (http). Stored memories and keys always come from the
full-precision path; memory.embedding.cache keeps int8 query vectors apart (``model_name(query=True)``).
"""

from __future__ import annotations

import numpy as np
from django.conf import settings
from django.db import connection

from memory.embedding import columns, health, http, local, query_encoder, yielding
from memory.embedding.errors import EmbeddingConfigError, EmbeddingError
from memory.embedding.local import SMALL_CALL
from memory.embedding.query_encoder import QUERY_ENCODERS, warm_query_encoder
from memory.measuring import operations

__all__ = [
    "QUERY_ENCODERS", "SMALL_CALL", "EmbeddingConfigError", "EmbeddingError", "dimension", "encode", "model_info", "model_name",
    "validate_before_fork", "validate_model", "warm_query_encoder", "yielding",
]


def model_name(*, query: bool = False, count: int = 1) -> str:
    """The cache's name for vectors of this model. With query=True, the name of what encode(query=True)
    would use for count texts: the int8 encoder's vectors are named apart ("…#int8") so that they
    are never taken for (or stored as) full-precision vectors; fp32 ONNX vectors equal torch's."""
    name = f"{settings.EMBEDDING_BACKEND}:{settings.EMBEDDING_MODEL}"
    if query and count <= SMALL_CALL and query_encoder.query_variant() == "int8":
        return f"{name}#int8"
    return name


def encode(texts: list[str], *, batch_size: int = 64, query: bool = False) -> np.ndarray:
    """Unit-length float32 vectors, one row per text (no cache: see memory.embedding.cache for that).

    query=True: the texts are a search's query, never stored as a memory; up to SMALL_CALL of them
    go through the query encoder (int8 by default: close to, not equal to, the stored vectors).
    Any failure is an EmbeddingError and marks the embedder down for every process (health)."""
    if not texts:
        return np.zeros((0, settings.EMBEDDING_DIM), dtype=np.float32)
    try:
        vectors = _encode(texts, batch_size=batch_size, query=query)
    except EmbeddingError as exc:
        health.mark_down(str(exc))
        raise
    except Exception as exc:  # a model that will not load or run, a backend gone: one error for callers
        health.mark_down(f"{type(exc).__name__}: {exc}")
        raise EmbeddingError(f"the embedding model failed: {exc}") from exc
    health.mark_up()
    operations.embedded(len(texts))  # seed 004's memory_embeddings_generated_total
    return vectors


def _encode(texts: list[str], *, batch_size: int, query: bool) -> np.ndarray:
    if settings.EMBEDDING_BACKEND == "local":
        if query and len(texts) <= SMALL_CALL:
            return query_encoder.encode_query(list(texts), batch_size)
        if yielding.active():  # work nobody waits on: one thread of low priority, however many texts
            return yielding.run(query_encoder.encode_background, list(texts), batch_size)
        if len(texts) <= SMALL_CALL:  # a turn's line: ONNX fp32, torch's vectors in ~60 % of the time
            return query_encoder.encode_small(list(texts), batch_size)
        return local.encode(list(texts), batch_size)
    if settings.EMBEDDING_BACKEND in {"openai", "ollama"}:
        return http.encode(list(texts))
    raise EmbeddingConfigError(f"unknown WONDA_EMBEDDING_BACKEND {settings.EMBEDDING_BACKEND!r}: use local, openai or ollama")


def dimension() -> int:
    return int(encode(["dimension probe"]).shape[1])


def model_info() -> dict:
    return {"backend": settings.EMBEDDING_BACKEND, "model": settings.EMBEDDING_MODEL, "dimension": dimension()}


def validate_before_fork() -> dict:
    """What the Celery pool's parent checks before it forks: the model's size against the vector
    column, without loading the model.

    The local model's size is read from its files: importing torch and sentence-transformers alone
    took ~9 s here (40 s under load), and a worker whose main process was killed came back only after
    it. Each pool process opens its ONNX sessions itself (warm_query_encoder, ~0.5 s, no torch once
    the files are checked); the torch model is loaded by the first encode that needs it (a batch to
    store). The parent never touches torch, so nothing multi-threaded crosses the fork."""
    if settings.EMBEDDING_BACKEND != "local":
        return validate_model(close=True)
    try:
        size = local.configured_dimension()
    except EmbeddingError:
        raise
    except Exception as exc:
        raise EmbeddingError(f"could not read embedding model {model_name()} ({exc})") from exc
    _check_size(size, close=True)
    return {"backend": settings.EMBEDDING_BACKEND, "model": settings.EMBEDDING_MODEL, "dimension": size}


def _check_size(size: int, *, close: bool = False) -> None:
    """The model's size against the setting, then against the columns as the database holds them
    (a database not reached is not checked here: the first write says it)."""
    name, dim = model_name(), settings.EMBEDDING_DIM
    if size != dim:
        raise EmbeddingConfigError(
            f"The embedding model {name} makes {size}-d vectors but WONDA_EMBEDDING_DIM is {dim}: set "
            f"WONDA_EMBEDDING_DIM={size} (then `manage.py reembed` moves the stored memories to it), or set "
            f"WONDA_EMBEDDING_MODEL to a {dim}-d model."
        )
    try:
        column = columns.column_dimension()
    except Exception:  # no database yet, or not here: the write that needs it will fail plainly
        column = None
    finally:
        if close and not connection.in_atomic_block:
            connection.close()  # the worker's parent: no connection may cross the fork
    if column is not None and column != size:
        raise EmbeddingConfigError(
            f"The stored memories hold {column}-d vectors, another model's; {name} makes {size}-d. Run "
            f"`manage.py reembed` (with the runs stopped) to re-embed every bank with {name} and resize "
            f"the tables, or go back to a {column}-d model (WONDA_EMBEDDING_MODEL, WONDA_EMBEDDING_DIM={column})."
        )


def validate_model(*, close: bool = False) -> dict:
    """Load the model and check its dimension against the vector column, or fail clearly; then load
    the query encoder (exporting it on the first start) so that the first search is fast too."""
    try:
        info = model_info()
    except EmbeddingError:
        raise
    except Exception as exc:
        raise EmbeddingError(
            f"could not load embedding model {model_name()} ({exc}); check WONDA_EMBEDDING_BACKEND / WONDA_EMBEDDING_MODEL"
        ) from exc
    _check_size(info["dimension"], close=close)
    if settings.EMBEDDING_BACKEND == "local":
        info["query_encoder"] = warm_query_encoder()  # a failure only warns: queries then use torch
    return info
