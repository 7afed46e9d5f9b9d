"""Filtered, scored retrieval over a bank: exact below EXACT_LIMIT candidates, HNSW above.

A memory's similarity is its best match over its content embedding and its canonical-query keys
(MemoryKey); the result says which key matched. Scores and their components are computed in SQL.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np
from django.conf import settings
from django.db import connection, transaction

from memory.indexing import has_bank_index
from memory.lexical import lexical_query, lexical_query_from_stats, name_grams, termstat_count
from memory.models import Memory

EXACT_LIMIT = 10_000        # up to this many matching memories the scan is exact (identical top k)
NARROW_EXACT_LIMIT = 30_000  # a filter narrower than the bank: exact up to here (beats a filtered HNSW walk)
INDEXED_EXACT_LIMIT = 2_000  # in a bank with its own index (> EXACT_LIMIT memories), exact only up to here
HNSW_EF_SEARCH = 64         # candidate list per index probe (recall@10 ≈ 0.98 at 100k, see bench_memory)
HNSW_FETCH = 40             # over-fetch from each index before the exact re-rank (at least 4·k)
RECENCY_DECAY = 0.1         # per turn: recency = exp(-0.1 · turns ago), a half-life of ~7 turns
FUSION_DEPTH = 50           # fusion ranks the top 50 by similarity ∪ the top 50 by BM25 (at least k each)
LEXICAL_POOL_ROWS = 1_000   # above it, the BM25 list scores at most ~this many rows of the rarest terms

SCORING_PRESETS: dict[str, dict[str, float]] = {
    "similarity": {"similarity": 1.0, "recency": 0.0, "importance": 0.0},   # seed 000
    "hybrid": {"similarity": 0.6, "recency": 0.2, "importance": 0.2},       # seed 002
    "decayed": {"similarity": 0.6, "recency": 0.1, "importance": 0.3},      # seed 004: importance decays, access boosts
}


@dataclass
class MemoryFilter:
    agent: str | None = None
    kinds: list[str] | None = None
    categories: list[str] | None = None
    about: str | None = None
    min_turn: int | None = None
    max_turn: int | None = None
    min_importance: float | None = None
    tags: list[str] | None = None
    tags_mode: str = "any"  # "any" | "all"
    participant: str | None = None
    sources: list[str] | None = None
    statuses: list[str] = field(default_factory=lambda: ["active"])

    def to_dict(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v is not None}

    @classmethod
    def from_dict(cls, data: dict) -> "MemoryFilter":
        return cls(**{k: v for k, v in (data or {}).items() if k in cls.__dataclass_fields__})

    def narrower_than_bank(self) -> bool:
        """True when anything beyond the bank and the status restricts the candidates."""
        return any(v not in (None, [], "") for k, v in asdict(self).items() if k not in {"statuses", "tags_mode"})

    def counted_by_termstat(self) -> bool:
        """True when memory_termstat holds this filter's BM25 statistics: active memories of a
        bank, by agent and kind, nothing else."""
        others = {k: v for k, v in asdict(self).items() if k not in {"agent", "kinds", "statuses", "tags_mode"}}
        return self.statuses == ["active"] and all(v in (None, [], "") for v in others.values())

    def where(self, bank_id: int) -> tuple[str, list]:
        """SQL over alias m, and its parameters. A max_turn keeps gifted memories (they have no turn)."""
        clauses, params = ["m.bank_id = %s"], [bank_id]
        if self.agent is not None:
            clauses.append("m.agent = %s"); params.append(self.agent)
        if self.kinds:
            clauses.append("m.kind = ANY(%s)"); params.append(list(self.kinds))
        if self.categories:
            clauses.append("m.category = ANY(%s)"); params.append(list(self.categories))
        if self.about:
            clauses.append("lower(m.about) = lower(%s)"); params.append(self.about)
        if self.min_turn is not None:
            clauses.append("m.turn >= %s"); params.append(int(self.min_turn))
        if self.max_turn is not None:
            clauses.append("(m.turn IS NULL OR m.turn <= %s)"); params.append(int(self.max_turn))
        if self.min_importance is not None:
            clauses.append("m.importance >= %s"); params.append(float(self.min_importance))
        if self.tags:
            op = "@>" if self.tags_mode == "all" else "&&"
            clauses.append(f"m.tags {op} %s::varchar(50)[]"); params.append(list(self.tags))
        if self.participant:
            clauses.append("(%s = ANY(m.participants) OR m.speaker = %s)"); params += [self.participant, self.participant]
        if self.sources:
            clauses.append("m.source = ANY(%s)"); params.append(list(self.sources))
        if self.statuses:
            clauses.append("m.status = ANY(%s)"); params.append(list(self.statuses))
        clauses.append("NOT m.embedding_stale")  # edited, vector not yet recomputed: not found by its old meaning
        return " AND ".join(clauses), params


@dataclass
class RecallResult:
    memory: Memory
    rank: int
    score: float
    components: dict[str, float]
    matched_key: str | None

    def snapshot(self) -> dict:
        return self.memory.snapshot() | {
            "rank": self.rank, "score": round(self.score, 6),
            "components": {k: round(v, 6) for k, v in self.components.items()}, "matched_key": self.matched_key,
        }


def episode_context_text(previous: str, content: str) -> str:
    """The text of an episodic memory's in-reply-to key: the line before it, then the line."""
    return f"{previous} {content}"


@dataclass
class Fusion:
    """query_memory's stages; a weight of 0 switches its stage off (ablation in evaluate_retrieval)."""
    lexical_weight: float
    speaker_boost: float

    @classmethod
    def from_settings(cls, lexical_weight: float | None = None, speaker_boost: float | None = None) -> "Fusion":
        return cls(
            float(settings.RETRIEVAL_LEXICAL_WEIGHT if lexical_weight is None else lexical_weight),
            float(settings.RETRIEVAL_SPEAKER_BOOST if speaker_boost is None else speaker_boost),
        )


def resolve_weights(scoring: str, weights: dict | None) -> dict[str, float]:
    if scoring not in SCORING_PRESETS:
        raise ValueError(f"unknown scoring {scoring!r}: use one of {', '.join(SCORING_PRESETS)}")
    resolved = dict(SCORING_PRESETS[scoring])
    for key, value in (weights or {}).items():
        if key not in resolved:
            raise ValueError(f"unknown weight {key!r}: use similarity, recency or importance")
        resolved[key] = float(value)
    return resolved


_COLUMNS = [f.column for f in Memory._meta.concrete_fields if f.name not in {"embedding", "search"}]
_SELECT = ", ".join(f"m.{c}" for c in _COLUMNS)
_ATTNAMES = [f.attname for f in Memory._meta.concrete_fields if f.name not in {"embedding", "search"}]
# What the ORM does to a column on the way in (JSONField decodes text: Django's connection reads
# jsonb as text, and a raw cursor on it too).
_CONVERTERS = [(i, f.from_db_value) for i, f in enumerate(f for f in Memory._meta.concrete_fields
                                                           if f.name not in {"embedding", "search"})
               if hasattr(f, "from_db_value")]


def _decay(exponent: str) -> str:
    """exp(−x) in float8, x capped: PostgreSQL raises on underflow (exp(−1000) is an error, not 0),
    which a memory thousands of turns old would otherwise hit."""
    return f"exp(-LEAST(({exponent})::float8, 700.0))"


def _score_sql(scoring: str) -> str:
    """Components over alias m (a candidate row carrying sim); %(turn)s is the current turn."""
    age = "GREATEST(%(turn)s - COALESCE(m.turn, 0), 0)"
    recency = _decay(f"{RECENCY_DECAY} * {age}")
    if scoring == "decayed":
        # Seed 004: importance · exp(−decay·age) · (1 + 0.1·ln(accesses)), recent access boost ×1.1.
        importance = (
            f"LEAST(1.0, m.importance / 10.0 * {_decay(f'm.decay_rate * {age}')}"
            " * (1 + 0.1 * ln(GREATEST(m.access_count, 1)))"
            " * (CASE WHEN m.last_accessed_turn IS NOT NULL AND %(turn)s - m.last_accessed_turn <= 1 THEN 1.1 ELSE 1 END))"
        )
    else:
        importance = "m.importance / 10.0"
    return f"m.sim AS c_similarity, {recency}::float8 AS c_recency, {importance}::float8 AS c_importance"


def _count_candidates(where: str, params: list, limit: int) -> int:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM (SELECT 1 FROM memory_memory m WHERE {where} LIMIT %s) s", [*params, limit])
        return cursor.fetchone()[0]


def _hnsw_settings(cursor, fetch: int, *, prefer_index: bool = False) -> None:
    """For this transaction: iterative index scans (a filtered query still gets fetch rows).
    prefer_index: a bank's own index exists, but the planner, misjudging how many rows a bank,
    agent and kind select, would sort the bank exactly (15 ms at 10,000 rows against ~1 ms): no
    sort where an index gives the order."""
    cursor.execute(
        "SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true), "
        "set_config('hnsw.ef_search', %s, true), set_config('hnsw.max_scan_tuples', '100000', true), "
        "set_config('enable_sort', %s, true)",
        [str(max(HNSW_EF_SEARCH, fetch)), "off" if prefer_index else "on"],
    )


def _index_candidates(where: str, params: list, vector: np.ndarray, fetch: int, bank_id: int,
                      bank_index: bool = False) -> list[int]:
    """Approximate nearest ids through the HNSW indexes (the bank's own when it has them);
    iterative scans keep filtered results full."""
    from memory.cache import vector_cursor

    with vector_cursor() as cursor:  # the vector in binary
        _hnsw_settings(cursor, fetch, prefer_index=bank_index)
        cursor.execute(
            f"SELECT m.id FROM memory_memory m WHERE {where} ORDER BY m.embedding <=> %s::vector LIMIT %s",
            [*params, vector, fetch], prepare=False,
        )
        ids = [row[0] for row in cursor.fetchall()]
        cursor.execute(  # k.bank_id: the predicate of the bank's own key index
            f"SELECT k.memory_id FROM memory_memorykey k JOIN memory_memory m ON m.id = k.memory_id "
            f"WHERE k.bank_id = %s AND {where} ORDER BY k.embedding <=> %s::vector LIMIT %s",
            [bank_id, *params, vector, fetch], prepare=False,
        )
        ids += [row[0] for row in cursor.fetchall()]
    return list(dict.fromkeys(ids))


def _ranked_sql(scoring: str, where_sql: str, has_vector: bool, fusion: bool = False, lexical_sql: str = "0.0::float8",
                guarded: bool = False, pool_ids: str | None = None) -> str:
    """One pass over the candidates: content similarity, best key per memory, score, top k; then
    the full rows of those k only. Ordering by an expression over a CTE keeps the HNSW index out:
    this scan is exact. pool_ids, a query of memory ids (the indexes' top lists), restricts the
    candidates to those, in the same statement.

    With fusion, relative score fusion: the pool is the top FUSION_DEPTH candidates by similarity ∪
    the top FUSION_DEPTH by BM25, and within it relevance = (1 − wl)·minmax(similarity) +
    wl·BM25/max(BM25) + wb·[speaker named] (linear fusion beat reciprocal-rank fusion: R@10 0.67 vs
    0.58 offline); the preset's similarity weight then applies to that relevance. BM25 is scaled by
    its maximum, not min-max: when every candidate holds the question's word (a name in a short
    dialogue), min-max would turn their length differences into a 0-to-1 spread. Defined on the two
    top lists only, the same ranking comes out whether the lists are computed here over every
    candidate or fetched from the HNSW and GIN indexes (recall() chooses).
    """
    content_sim = "1 - (m.embedding <=> %(vec)s::vector)" if has_vector else "0.0::float8"
    # The best key per candidate through a LATERAL probe of the memory_id index: linear in the
    # candidates whatever the statistics say (a fresh bank's stale ones made the planner join every
    # candidate with every key: 24 ms for 419 lines). Ordering by an expression keeps HNSW out.
    keys = (
        """LEFT JOIN LATERAL (
            SELECT 1 - (k.embedding <=> %(vec)s::vector) AS sim_k, k.query
              FROM memory_memorykey k WHERE k.memory_id = c.id ORDER BY sim_k DESC, k.id LIMIT 1
        ) kb ON true"""
        if has_vector
        else "LEFT JOIN (SELECT NULL::float8 AS sim_k, NULL::varchar AS query) kb ON false"
    )
    if fusion:
        extra = (f", {lexical_sql} AS lex, (m.speaker <> '' AND (lower(m.speaker) = ANY(%(names)s) "
                 "OR lower(split_part(m.speaker, ' ', 1)) = ANY(%(names)s)))::int::float8 AS spk")
        relevance = """(1 - %(wl)s) * (CASE WHEN max(sim) OVER () > min(sim) OVER ()
                            THEN (sim - min(sim) OVER ()) / (max(sim) OVER () - min(sim) OVER ()) ELSE 1.0 END)
                       + %(wl)s * (CASE WHEN max(lex) OVER () > 0 THEN lex / max(lex) OVER () ELSE 0.0 END)
                       + %(wb)s * spk"""
        lexical_cols = """, (CASE WHEN max(lex) OVER () > 0 THEN lex / max(lex) OVER () ELSE 0.0 END) AS c_lexical,
                          spk AS c_speaker"""
        pool = """pool AS (
            (SELECT * FROM best ORDER BY sim DESC, id LIMIT %(depth)s)
            UNION
            (SELECT * FROM best WHERE lex > 0 ORDER BY lex DESC, id LIMIT %(depth)s)
        ),"""
    else:
        extra, relevance, lexical_cols = "", "sim", ", 0.0::float8 AS c_lexical, 0.0::float8 AS c_speaker"
        pool = "pool AS (SELECT * FROM best),"
    ids = f"ids AS ({pool_ids})," if pool_ids else ""
    in_ids = "m.id IN (SELECT id FROM ids) AND " if pool_ids else ""
    return f"""
        WITH {ids} c AS MATERIALIZED (
            SELECT m.id, {content_sim} AS sim_c, m.turn, m.importance, m.decay_rate, m.access_count,
                   m.last_accessed_turn {extra}
              FROM memory_memory m WHERE {in_ids}{where_sql}{" LIMIT %(guard)s" if guarded else ""}
        ),
        best AS (
            SELECT c.*, GREATEST(c.sim_c, kb.sim_k) AS sim,
                   CASE WHEN kb.sim_k > c.sim_c THEN kb.query END AS matched_key
              FROM c {keys}
        ),
        {pool}
        fused AS (SELECT pool.*, ({relevance})::float8 AS relevance {lexical_cols} FROM pool),
        comp AS (SELECT m.id, m.turn, m.matched_key, m.relevance, m.c_lexical, m.c_speaker, {_score_sql(scoring)}
                   FROM fused m),
        top AS (
            SELECT comp.*, %(ws)s * relevance + %(wr)s * c_recency + %(wi)s * c_importance AS score
              FROM comp ORDER BY score DESC, turn DESC NULLS LAST, id LIMIT %(k)s
        )
        SELECT top.id, top.matched_key, top.c_similarity, top.c_recency, top.c_importance, top.c_lexical,
               top.c_speaker, top.score, {"(SELECT count(*) FROM c)" if guarded else "NULL::bigint"} AS n, {_SELECT}
          FROM top JOIN memory_memory m ON m.id = top.id
         ORDER BY top.score DESC, top.turn DESC NULLS LAST, top.id"""


@dataclass
class _Ranked:
    id: int
    matched_key: str | None
    c_similarity: float
    c_recency: float
    c_importance: float
    c_lexical: float
    c_speaker: float
    score: float
    n: int | None = None  # candidates scanned (guarded statements only)
    memory: Memory | None = None


_RANK_COLUMNS = 9  # _Ranked's fields before memory; the memory's own columns follow


def _run_ranked(sql: str, named: dict) -> list[_Ranked]:
    """The ranking statement with the query vector bound in binary (a text literal costs ~1–2 ms to
    format and parse); its rows carry the k memories' columns (embedding and search deferred), so
    no second query fetches them."""
    from django.db import DEFAULT_DB_ALIAS

    from memory.cache import vector_cursor

    with vector_cursor() as cur:
        cur.execute(sql, named, prepare=False)
        rows = cur.fetchall()
    ranked = []
    for row in rows:
        values = list(row[_RANK_COLUMNS:])
        for i, convert in _CONVERTERS:
            values[i] = convert(values[i], None, connection)
        ranked.append(_Ranked(*row[:_RANK_COLUMNS], memory=Memory.from_db(DEFAULT_DB_ALIAS, _ATTNAMES, values)))
    return ranked


def _pyformat(where: str, params: list) -> tuple[str, dict]:
    """Turn positional %s placeholders into named ones so one dict feeds the whole statement."""
    named: dict = {}
    parts = where.split("%s")
    out = parts[0]
    for i, part in enumerate(parts[1:]):
        named[f"p{i}"] = params[i]
        out += f"%(p{i})s" + part
    return out, named


def recall(bank, query: str | None = None, *, agent: str | None = None, filter: MemoryFilter | None = None,
           k: int = 5, scoring: str = "similarity", weights: dict | None = None, current_turn: int | None = None,
           query_vector=None, exact: bool | None = None, fusion: bool = False,
           lexical_weight: float | None = None, speaker_boost: float | None = None) -> list[RecallResult]:
    """Top k memories of a bank for a query, honouring the filter exactly.

    exact=None chooses: an exact scan while at most EXACT_LIMIT memories match, else the HNSW
    indexes (iterative scan, over-fetch, exact re-rank). A pure read: the caller records what was
    recalled (memory.services.accesses_record) in its own transaction, so a redone turn counts once.
    fusion=True (free-text search: query_memory) adds BM25 and the speaker boost to similarity,
    weights from settings.RETRIEVAL_* unless given; canonical queries keep plain similarity. Fused,
    exact=None is an exact scan up to RETRIEVAL_FUSION_EXACT_LIMIT candidates, else the indexes' top lists.
    """
    flt = MemoryFilter(**(filter.to_dict() if filter else {}))
    if agent is not None:
        flt.agent = agent
    w = resolve_weights(scoring, weights)
    k = int(k)
    if k <= 0:
        return []
    if query_vector is None and query:
        from memory.cache import embed_one

        # A query's vector stays in this process: canonical queries were cached in the table at
        # seeding (still read from it), a free-text one is not worth an INSERT per request.
        query_vector = embed_one(query, store=False, query=True)
    fused = None
    if fusion and query and settings.RETRIEVAL_FUSION:
        fused = Fusion.from_settings(lexical_weight, speaker_boost)
    bank_id = bank.pk if hasattr(bank, "pk") else int(bank)
    has_vector = query_vector is not None
    qvec = np.asarray(query_vector, dtype=np.float32) if has_vector else None

    outermost = not connection.in_atomic_block
    with transaction.atomic():
        base = {"vec": qvec, "turn": int(current_turn or 0), "ws": w["similarity"], "wr": w["recency"],
                "wi": w["importance"], "k": k}
        if fused and has_vector:
            rows = _fused_rows(query, flt, bank_id, qvec, base, k, scoring, exact, fused)
        else:
            rows = _plain_rows(flt, bank_id, qvec, base, k, scoring, exact)
        if not outermost:
            # _hnsw_settings' planner setting would outlive this search in the caller's transaction.
            with connection.cursor() as cursor:
                cursor.execute("SELECT set_config('enable_sort', 'on', true)")
    return [
        RecallResult(
            memory=row.memory, rank=i + 1, score=float(row.score),
            components={"similarity": float(row.c_similarity), "recency": float(row.c_recency),
                        "importance": float(row.c_importance)}
            | ({"lexical": float(row.c_lexical), "speaker": float(row.c_speaker)} if fused else {}),
            matched_key=row.matched_key,
        )
        for i, row in enumerate(rows)
    ]


def _plain_rows(flt: MemoryFilter, bank_id: int, qvec, base: dict, k: int, scoring: str,
                exact: bool | None) -> list[_Ranked]:
    """Similarity (and the preset's recency and importance) over every candidate: exact while at
    most EXACT_LIMIT match (NARROW_EXACT_LIMIT for a filter narrower than a bank without its own
    index), else HNSW."""
    where, params = flt.where(bank_id)
    has_vector = qvec is not None
    guarded = False
    if exact is None and has_vector:
        if flt.counted_by_termstat():
            # memory_termstat knows how many match (a few index rows, not a count of thousands).
            candidates, bank_size = termstat_count(bank_id, flt.agent, flt.kinds)
            exact = candidates <= EXACT_LIMIT
            if exact and candidates > INDEXED_EXACT_LIMIT and bank_size > EXACT_LIMIT:
                # A bank past EXACT_LIMIT promises ≥ 0.95 of the exact top k, not all of it: its own
                # index answers a few thousand candidates faster than scanning them (~1 ms a thousand).
                if has_bank_index(bank_id):
                    exact = False
            if not exact and flt.narrower_than_bank() and candidates <= NARROW_EXACT_LIMIT and not has_bank_index(bank_id):
                # Without the bank's own index (the bank's writes ask a worker for it) an exact scan
                # of a narrow filter is faster than a filtered walk.
                exact = True
        elif flt.narrower_than_bank():
            # A filter narrower than the bank is usually exact: scan it exactly at once, at most
            # NARROW_EXACT_LIMIT + 1 rows, instead of counting first; more than that, the index path.
            exact = guarded = True
        else:
            exact = _count_candidates(where, params, EXACT_LIMIT + 1) <= EXACT_LIMIT
    if exact is None:
        exact = True  # no vector: nothing for an index to order by
    named_where, named = _pyformat(where, params)
    if not exact:
        # Re-rank the index's candidates exactly (they already satisfy the filter; it is kept anyway).
        bank_index = has_bank_index(bank_id)
        named["ids"] = _index_candidates(where, params, qvec, max(HNSW_FETCH, 4 * k), bank_id, bank_index)
        named_where = f"m.id = ANY(%(ids)s) AND {named_where}"
    sql = _ranked_sql(scoring, named_where, has_vector, guarded=guarded)
    rows = _run_ranked(sql, named | base | {"guard": NARROW_EXACT_LIMIT + 1})
    if guarded and rows and rows[0].n > NARROW_EXACT_LIMIT:
        return _plain_rows(flt, bank_id, qvec, base, k, scoring, exact=False)
    if not exact and len(rows) < k:
        # More than EXACT_LIMIT match, so k do: an index scan that came back short is redone exactly.
        return _plain_rows(flt, bank_id, qvec, base, k, scoring, exact=True)
    return rows


def _fused_rows(query: str, flt: MemoryFilter, bank_id: int, qvec, base: dict, k: int, scoring: str,
                exact: bool | None, fusion: Fusion) -> list[_Ranked]:
    """query_memory's ranking (see _ranked_sql). Up to RETRIEVAL_FUSION_EXACT_LIMIT candidates one
    scan makes both top lists exactly; above, HNSW gives the similarity list (content and keys) and
    the GIN index the BM25 list from the query's rarer terms, and only that pool is scored."""
    where, params = flt.where(bank_id)
    depth = max(FUSION_DEPTH, k)
    lex = None
    if fusion.lexical_weight:
        # The BM25 statistics also say how many memories match.
        lex = (lexical_query_from_stats(query, bank_id, flt.agent, flt.kinds) if flt.counted_by_termstat()
               else lexical_query(query, where, params))
        candidates = lex.candidates
    else:
        candidates = _count_candidates(where, params, NARROW_EXACT_LIMIT + 1)
    bank_index = False
    if exact is None:
        exact = candidates <= settings.RETRIEVAL_FUSION_EXACT_LIMIT
        if not exact:
            # The bank's own HNSW indexes, or an exact scan while a worker builds them (asked for
            # by the writes that grew the bank: memory.indexing.bank_index_wanted).
            bank_index = has_bank_index(bank_id)
            if not bank_index:
                exact = True
    elif not exact:
        bank_index = has_bank_index(bank_id)
    named_where, named = _pyformat(where, params)
    filter_where = named_where
    named |= base | {"wl": fusion.lexical_weight, "wb": fusion.speaker_boost, "depth": depth,
                     "names": name_grams(query) if fusion.speaker_boost else []}
    lexical_sql = "0.0::float8"
    if lex is not None:
        lexical_sql, lex_params = lex.score_sql()
        named |= lex_params
    pool = None
    if not exact:
        # The three top lists in the ranking statement itself: content and keys by HNSW, and rows
        # holding the query's rarer words by GIN, scored with every term (a rare word vectors miss).
        pool = [
            f"(SELECT m.id FROM memory_memory m WHERE {filter_where} ORDER BY m.embedding <=> %(vec)s::vector LIMIT %(depth)s)",
            # k.bank_id repeats the bank: the predicate of the bank's own key index.
            f"(SELECT k.memory_id AS id FROM memory_memorykey k JOIN memory_memory m ON m.id = k.memory_id "
            f"WHERE k.bank_id = %(bank)s AND {filter_where} ORDER BY k.embedding <=> %(vec)s::vector LIMIT %(depth)s)",
        ]
        rare = lex.rare_terms(LEXICAL_POOL_ROWS) if lex is not None else None
        if rare and rare.terms:
            pool.append(f"(SELECT m.id FROM memory_memory m WHERE {filter_where} AND m.search @@ {rare.tsquery_sql('lr')} "
                        f"ORDER BY {lexical_sql} DESC, m.id LIMIT %(depth)s)")
            named |= rare.score_sql("lr")[1]
        named["bank"] = bank_id
        with connection.cursor() as cursor:
            _hnsw_settings(cursor, depth, prefer_index=bank_index)
    rows = _run_ranked(_ranked_sql(scoring, named_where, True, True, lexical_sql,
                                   pool_ids=" UNION ".join(pool) if pool else None), named)
    if not exact and len(rows) < min(k, candidates):
        return _fused_rows(query, flt, bank_id, qvec, base, k, scoring, True, fusion)
    return rows
