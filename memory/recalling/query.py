"""recall()'s query as it ranks it: the vector (or its encoding under way, beside the keyword side),
the fusion and enhancement that apply, and the fall-back to keywords when the embedder is down."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from django.conf import settings

from memory.embedding.cache import PendingQuery, embed_texts
from memory.embedding.errors import EmbeddingError
from memory.recalling.enhance import CONTEXT_WEIGHT, SYNONYM_VECTOR_WEIGHT, EnhancedQuery
from memory.recalling.filters import Recalled, RecallResult
from memory.recalling.options import RecallOptions
from memory.recalling.scoring import Fusion, SIMILARITY
from memory.recalling.sql import Ranked


@dataclass
class Search:
    """One search's query as recall ranks it: its vector (or the encoding under way), the fusion and
    enhancement that apply, and whether it fell back to keywords (the embedder is down)."""
    query: str | None
    vector: object = None
    fused: Fusion | None = None
    enhance: EnhancedQuery | None = None
    exact: bool | None = None
    keyword_only: bool = False
    pending: PendingQuery | None = None
    extra_vectors: list | None = None
    qvec: np.ndarray | None = None

    @classmethod
    def start(cls, query: str | None, query_vector, opts: RecallOptions) -> Search:
        """The fusion and enhancement that apply, and the query's encoding: begun in the background
        for a fused search (its keyword side is read meanwhile), else done here."""
        search = cls(query, vector=query_vector, exact=opts.exact,
                     enhance=opts.enhance if opts.enhance is not None and opts.enhance.used else None)
        if opts.fusion and query and settings.RETRIEVAL_FUSION:
            search.fused = Fusion.from_settings(opts.lexical_weight, opts.speaker_boost, opts.feedback)
        if query_vector is None and query:
            # A query's vector stays in this process: canonical queries were cached in the table at
            # seeding (still read from it), a free-text one is not worth an INSERT per request.
            if search.fused is not None:
                search.pending = PendingQuery(query)  # encoded while the keyword side is read (_lexical_side)
            else:
                try:
                    # The query and what enhancement mixes into it, in one call of the model (two calls
                    # of a long query were ~36 ms of a ~40 ms recall_facts).
                    extra = enhancement_texts(search.enhance, lexical=False) if search.enhance is not None else []
                    vectors = embed_texts([query, *extra], store=False, query=True)
                    search.vector, search.extra_vectors = vectors[0], list(vectors[1:])
                except EmbeddingError:
                    search.keyword_only = True
        return search

    def degrade(self, speaker_boost: float | None) -> None:
        """Degraded mode (memory.embedding.health): rank by the query's words alone (BM25 and the
        speaker boost), exactly, rather than fail the agent's search; the answer says so."""
        self.keyword_only, self.enhance, self.exact = True, None, True
        self.fused = Fusion.from_settings(1.0, speaker_boost, 0.0)

    def results(self, rows: list[Ranked], path: str) -> Recalled:
        """The rows as recall answers them; path: how they were found, "keyword" in degraded mode."""
        window = self.enhance.window if self.enhance is not None else None
        return Recalled([
            RecallResult(
                memory=row.memory, rank=i + 1, score=float(row.score),
                components={SIMILARITY: float(row.c_similarity), "recency": float(row.c_recency),
                            "importance": float(row.c_importance)}
                | ({"lexical": float(row.c_lexical), "speaker": float(row.c_speaker)} if self.fused else {})
                | ({"temporal": float(row.c_time)} if window is not None else {}),
                matched_key=row.matched_key,
            )
            for i, row in enumerate(rows)
        ], path="keyword" if self.keyword_only else path)


def enhancement_texts(enhance: EnhancedQuery, *, lexical: bool) -> list[str]:
    """What enhancement embeds besides the query: the context, and (without a BM25 side to carry
    them) the query with its synonyms."""
    return ([enhance.context] if enhance.context else []) + \
        ([enhance.expanded_text] if enhance.expansions and not lexical else [])


def enhanced_vector(query_vector, enhance: EnhancedQuery, *, lexical: bool, extra: list | None = None) -> np.ndarray:
    """The query vector with the context's mixed in (context injection) and, for a ranking without
    a BM25 side to carry them, the synonyms' (the query re-embedded with its expansions); unit length.
    extra: those texts' vectors, when they were encoded with the query."""
    vector = np.asarray(query_vector, dtype=np.float32)
    texts = enhancement_texts(enhance, lexical=lexical)
    if not texts:
        return vector
    extra = iter(extra if extra is not None and len(extra) == len(texts) else embed_texts(texts, store=False, query=True))
    if enhance.context:
        vector = (1 - CONTEXT_WEIGHT) * vector + CONTEXT_WEIGHT * next(extra)
    if enhance.expansions and not lexical:
        vector = (1 - SYNONYM_VECTOR_WEIGHT) * vector + SYNONYM_VECTOR_WEIGHT * next(extra)
    return (vector / (np.linalg.norm(vector) or 1.0)).astype(np.float32)
