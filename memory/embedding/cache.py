"""Embedding through the cache: (model, sha256(text)) → vector, in the database and in this process.

Every text that memory embeds goes through here, so re-seeding an unchanged character and the
fixed canonical queries of the tools ("who am I?") cost no model call.
"""

from __future__ import annotations

import hashlib
import struct
import threading
import weakref
from collections import OrderedDict
from concurrent.futures import Future

import numpy as np
import psycopg
from django.conf import settings
from django.db import connection, connections
from psycopg.adapt import AdaptersMap, Dumper, Loader
from psycopg.pq import Format
from psycopg.types import TypeInfo

from memory import embedding
from memory.embedding import yielding
from memory.embedding.errors import EmbeddingError
from memory.models import EmbeddingCache

_LOCAL_MAX = 20_000  # ~30 MB of vectors; more than one seeding step needs
_local: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
_local_lock = threading.Lock()
ENCODE_BATCH = 32  # see embed_texts; bench_memory measures raw model.encode at the same size
stats = {"model_calls": 0, "texts_encoded": 0}  # read by tests and the benchmark


def text_sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _remember(key: tuple[str, str], vector: np.ndarray) -> None:
    with _local_lock:
        _local[key] = vector
        _local.move_to_end(key)
        while len(_local) > _LOCAL_MAX:
            _local.popitem(last=False)


class _VectorBinaryDumper(Dumper):
    """numpy → pgvector's binary wire format: no per-float text formatting (~0.3 ms a vector saved)."""

    format = Format.BINARY

    def dump(self, obj):
        vector = np.asarray(obj, dtype=">f4")
        return struct.pack(">HH", vector.shape[0], 0) + vector.tobytes()


class _VectorBinaryLoader(Loader):
    format = Format.BINARY

    def load(self, data):
        return np.frombuffer(bytes(data)[4:], dtype=">f4").astype(np.float32)


# psycopg connection → its vector adapters (the type, its arrays, the binary dumper and loader),
# registered once: registering them on each cursor defined new classes every time (~35 µs a cursor).
_vector_adapters: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _register_vector(conn, context) -> None:
    """The vector type, its arrays, and numpy in binary both ways, on context (adapters or a cursor)."""
    info = TypeInfo.fetch(conn, "vector")
    info.register(context)
    context.adapters.register_dumper(np.ndarray, type("VectorDumper", (_VectorBinaryDumper,), {"oid": info.oid}))
    context.adapters.register_loader(info.oid, _VectorBinaryLoader)


def _adapters_for(conn) -> AdaptersMap:
    adapters = _vector_adapters.get(conn)
    if adapters is None:
        adapters = AdaptersMap(conn.adapters)
        _register_vector(conn, adapters)
        _vector_adapters[conn] = adapters
    return adapters


def vector_cursor(*, raw: bool = False) -> psycopg.Cursor:
    """A cursor on Django's connection (same transaction) that binds parameters server-side and
    sends/reads numpy vectors in binary; Django's own cursors inline every vector as text.
    raw: a psycopg.RawCursor, whose statements carry PostgreSQL's own $1, $2 placeholders (no
    conversion in Python: the caller keeps its converted statement)."""
    connection.ensure_connection()
    conn = connection.connection
    # Django's cursor_factory is ClientCursor: text literals only.
    cur = psycopg.RawCursor(conn) if raw else psycopg.Cursor(conn)
    # Local to this cursor (a copy-on-write child of the connection's vector adapters): Django's
    # cursors keep reading vectors as text. psycopg has no public way to give a cursor its adapters;
    # should its private attribute change, the vector adapters are registered on the cursor instead.
    adapters = AdaptersMap(_adapters_for(conn))
    cur._adapters = adapters
    if cur.adapters is not adapters:
        _register_vector(conn, cur)
    return cur


def store_vectors(model: str, shas: list[str], vectors) -> None:
    """Cache rows in one statement; two workers may embed the same text at once: the unique (model, sha256) keeps one."""
    if not shas:
        return
    with vector_cursor() as cur:
        cur.execute(
            f"INSERT INTO {EmbeddingCache._meta.db_table} (model, sha256, vector, created_at) "
            "SELECT %s, s, v, now() FROM unnest(%s::text[], %b::vector[]) AS t(s, v) "
            "ON CONFLICT (model, sha256) DO NOTHING",
            [model, list(shas), [np.asarray(v, dtype=np.float32) for v in vectors]],
        )


def clear_local() -> None:
    """Forget the in-process layer (the database layer stays)."""
    with _local_lock:
        _local.clear()


def _local_vector(sha: str, model: str, query_model: str) -> np.ndarray | None:
    """This process's vector of a text: the model's, else (query_model, for a search's query) the
    query encoder's own."""
    with _local_lock:
        hit = _local.get((model, sha))
        if hit is None and query_model != model:
            hit = _local.get((query_model, sha))
    return hit


def _table_vectors(model: str, shas: list[str]) -> dict[str, np.ndarray]:
    """The table's vectors of these texts (full precision), now kept in this process too."""
    with vector_cursor() as cur:  # binary: no text parsing of 384 floats per hit
        cur.execute(f"SELECT sha256, vector FROM {EmbeddingCache._meta.db_table} WHERE model = %s AND sha256 = ANY(%s)",
                    [model, shas], binary=True)
        found = dict(cur.fetchall())
    for sha, vector in found.items():
        _remember((model, sha), vector)
    return found


# Texts being encoded ahead of their embed_texts call (embed_soon): (model, sha) → that encode's
# future and the text's row in it. One thread per process, started after any fork (none crosses one).
_soon: dict[tuple[str, str], tuple[Future, int]] = {}
_soon_lock = threading.Lock()
_SOON_MAX = 64


def embed_soon(texts: list[str]) -> None:
    """Start encoding the texts that neither this process nor the table holds, on a thread of its
    own, for a caller about to wait on something else (a model's answer); embed_texts then waits for
    that encode instead of starting one. Only the model runs on the thread, never the database."""
    model = embedding.model_name()
    with _soon_lock:
        wanted = {sha: text for text in dict.fromkeys(texts) if (sha := text_sha(text))
                  and (model, sha) not in _soon and _local_vector(sha, model, model) is None}
        # Encodes nobody asked for (their caller failed first): a failed one is tried again, a few
        # finished ones are kept for a later ask, and past that they are dropped.
        for key in [key for key, (future, _row) in _soon.items()
                    if future.done() and (future.exception() or len(_soon) > _SOON_MAX)]:
            del _soon[key]
    if wanted:
        wanted = {sha: text for sha, text in wanted.items() if sha not in _table_vectors(model, list(wanted))}
    if not wanted:
        return
    order = list(wanted)
    future = yielding.process_thread("embed-soon").submit(_encode_aside, [wanted[sha] for sha in order])
    stats["model_calls"] += 1
    stats["texts_encoded"] += len(order)
    with _soon_lock:
        _soon.update({(model, sha): (future, row) for row, sha in enumerate(order)})


def _encode_aside(texts: list[str]) -> np.ndarray:
    try:
        return embedding.encode(texts, batch_size=ENCODE_BATCH)
    finally:
        # The embedder coming back queues its catch-up, which a test's eager Celery runs right here:
        # whatever connection that opened on this thread is closed, not left for the process's life.
        connections.close_all()


def _take_soon(model: str, missing: dict[str, list[int]], out: np.ndarray, store: bool) -> None:
    """The missing texts embed_soon is encoding: wait for them (raising its EmbeddingError, as an
    encode here would), then keep them as embed_texts keeps what it encodes."""
    with _soon_lock:
        taken = {sha: _soon.pop((model, sha)) for sha in list(missing) if (model, sha) in _soon}
    if not taken:
        return
    vectors = {sha: np.asarray(future.result()[row], dtype=np.float32) for sha, (future, row) in taken.items()}
    for sha, vector in vectors.items():
        for i in missing.pop(sha):
            out[i] = vector
        _remember((model, sha), vector)
    if store:
        store_vectors(model, list(vectors), list(vectors.values()))


def embed_texts(texts: list[str], *, batch_size: int = ENCODE_BATCH, store: bool = True, query: bool = False) -> np.ndarray:
    """Unit vectors for texts, one row each; only texts never seen by this model reach the model.

    store=False keeps newly encoded vectors in this process only (a free-text query at search time:
    writing it to the table would cost an INSERT in the request path for a text rarely seen again);
    texts already in the table are still served from it.

    query=True: the texts are a search's query (embedding.encode(query=True): the fast query
    encoder, int8 by default). A full-precision vector already cached serves it; a new int8 vector
    is kept in this process under its own name ("…#int8") and never written to the table, so a
    memory stored later with the same text still gets the full-precision vector.

    Batches of 32: the model sorts texts by length, so smaller batches pad less when one call
    mixes short canonical queries with 300-character chunks (≈1.8× the rate of 64 on a seeding call).
    """
    texts = list(texts)
    dim = settings.EMBEDDING_DIM
    out = np.zeros((len(texts), dim), dtype=np.float32)
    if not texts:
        return out
    model = embedding.model_name()
    # A query may also be served by the query encoder's own earlier vectors (same process only).
    query_model = embedding.model_name(query=True) if query else model
    shas = [text_sha(t) for t in texts]
    missing: dict[str, list[int]] = {}
    for i, sha in enumerate(shas):
        hit = _local_vector(sha, model, query_model)
        if hit is not None:
            out[i] = hit
        else:
            missing.setdefault(sha, []).append(i)
    if missing and _soon:
        _take_soon(model, missing, out, store)
    if missing:
        for sha, vector in _table_vectors(model, list(missing)).items():
            for i in missing.pop(sha):
                out[i] = vector
    if missing:
        order = list(missing)
        # Named before the call: the encoder can only fall back (int8 → torch), never the other way,
        # so a vector named full precision here is one.
        encoded_by = embedding.model_name(query=True, count=len(order)) if query else model
        vectors = embedding.encode([texts[missing[sha][0]] for sha in order], batch_size=batch_size, query=query)
        stats["model_calls"] += 1
        stats["texts_encoded"] += len(order)
        vectors = np.asarray(vectors, dtype=np.float32)
        for sha, vector in zip(order, vectors):
            for i in missing[sha]:
                out[i] = vector
            _remember((encoded_by, sha), vector)
        if store and encoded_by == model:  # the table holds full-precision vectors only
            store_vectors(model, order, vectors)
    return out


def embed_one(text: str, *, store: bool = True, query: bool = False) -> np.ndarray:
    return embed_texts([text], store=store, query=query)[0]


class PendingQuery:
    """A search query's vector, encoded in a thread while the caller reads the database.

    query_memory's keyword side (BM25 statistics, the GIN probe) needs no vector: it runs while the
    encoder (~3 ms, which releases the GIL) makes one, instead of after it. The same vector as
    embed_one(text, store=False, query=True): this process's layer first, then the table (a text
    stored as a memory or a canonical query keeps its full-precision vector; the thread's is then
    dropped), else the encoder's. The thread touches no database connection (Django's are per thread).
    """

    def __init__(self, text: str):
        self.text = text
        self._model = embedding.model_name()
        self._sha = text_sha(text)
        self._vector: np.ndarray | None = None
        self._encoded: np.ndarray | None = None
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None
        self._encoded_by = embedding.model_name(query=True)  # named before the call, as in embed_texts
        hit = _local_vector(self._sha, self._model, self._encoded_by)
        if hit is not None:
            self._vector = hit
            return
        self._thread = threading.Thread(target=self._encode, name="wonda-query-encoder", daemon=True)
        self._thread.start()
        stats["model_calls"] += 1
        stats["texts_encoded"] += 1

    def _encode(self) -> None:
        try:
            self._encoded = np.asarray(embedding.encode([self.text], query=True)[0], dtype=np.float32)
        except BaseException as exc:  # handed to result()'s caller (EmbeddingError: degraded mode)
            self._error = exc

    def result(self) -> np.ndarray:
        """The vector (waits for the encoder); raises what the encoder raised (EmbeddingError)."""
        if self._vector is not None:
            return self._vector
        stored = _table_vectors(self._model, [self._sha]).get(self._sha)
        if stored is not None:
            self._vector = np.asarray(stored, dtype=np.float32)
            return self._vector
        self._thread.join()
        if self._error is not None:
            raise self._error
        self._vector = self._encoded
        _remember((self._encoded_by, self._sha), self._vector)
        return self._vector


def embed_ahead(texts: list[str]) -> int:
    """Vectors for texts a later write will store (a run's stage directions, known before it
    starts), kept in the embedding cache so that the write finds them made. An embedder that fails
    here costs nothing: the write embeds them itself. Returns the texts now at hand."""
    texts = list(dict.fromkeys(text for text in texts if text))
    if not texts:
        return 0
    try:
        embed_texts(texts)
    except EmbeddingError:
        return 0
    return len(texts)
