"""recall(): exact below EXACT_LIMIT candidates, HNSW above, and the choice between them.

The query is read first (memory.recalling.query: its vector, fusion, enhancement). The plain ranking
(_plain_rows) scores similarity with the preset's recency and importance; the fused one
(_fused_rows, query_memory) adds BM25 and the speaker boost. Either scans every candidate
exactly or takes the indexes' top lists, whichever answers the filter faster without coming back short.
"""

from __future__ import annotations

import re
from contextlib import nullcontext
from contextvars import ContextVar
from dataclasses import dataclass, replace

import numpy as np
from django.conf import settings
from django.db import connection, transaction

from memory.embedding.cache import vector_cursor
from memory.embedding.errors import EmbeddingError
from memory.recalling.enhance import SYNONYM_IDF_SCALE, EnhancedQuery
from memory.recalling.filters import MemoryFilter, Recalled, RecallResult, reranked
from memory.recalling.indexing import has_bank_index
from memory.recalling.lexical import LexicalQuery, lexical_query, lexical_query_from_stats, name_grams, termstat_count_kept
from memory.living.mood import CALM as MOOD_CALM, prime
from memory.recalling.options import RecallOptions
from memory.recalling.query import Search, enhanced_vector
from memory.recalling.scoring import FEEDBACK_LINES, FEEDBACK_MIN_POOL, FUSION_DEPTH, Fusion, SIMILARITY, resolve_weights
from memory.recalling.selectivity import kept_share, share_seen
from memory.recalling.sql import (
    FUSION_EF_SEARCH, PLAN_LITERALS, Ranked, count_candidates, hnsw_settings_sql, index_probes, literal_where, pyformat,
    ranked_sql, run_ranked,
)

EXACT_LIMIT = 10_000        # up to this many matching memories the scan is exact (identical top k)
NARROW_EXACT_LIMIT = 30_000  # a filter narrower than the bank: exact up to here (beats a filtered HNSW walk)
INDEXED_EXACT_LIMIT = 2_000  # in a bank with its own index (> EXACT_LIMIT memories), exact only up to here
HNSW_FETCH = 40             # over-fetch from each index before the exact re-rank (at least 4·k)
MOOD_EXTRA = 5              # candidates beyond k a primed search ranks (memory.living.mood)
LEXICAL_POOL_ROWS = 1_000   # above it, the BM25 list scores at most ~this many rows of the rarest terms
# A filter beyond agent and kinds (tags, importance…) walks the index when it keeps at least this share
# of what agent and kinds select: the walk then visits ~HNSW_FETCH / share memories (800 at 5 %).
WALK_SHARE_MIN = 0.05
SPECULATIVE_SCAN_TUPLES = 20_000  # such a walk stops here (an estimate that was wrong): the exact scan answers


# Which path answered the last search in this context, "exact" (a scan) or "index" (the HNSW
# indexes): recall() hands it on as its answer's `.path` (metrics: retrieval latency by path).
_path: ContextVar[str] = ContextVar("recall_path", default="exact")


# "What did Jordan say…?" asks for Jordan's lines: what is only about Jordan (what I know of them,
# their comings and goings) is favoured for any other question naming them.
ASKS_WHAT_WAS_SAID = re.compile(r"\b(?:say|says|said|saying|tell|tells|told|ask|asks|asked|mention(?:s|ed)?|whisper(?:s|ed)?)\b",
                                re.IGNORECASE)
# "What happened…?", "What disturbed…?", "What did the weather do…?" ask for an event: what the
# writer's directions made happen (a stage memory) is favoured, as a question naming someone
# favours what is about them.
ASKS_WHAT_HAPPENED = re.compile(
    r"\bwhat (?:\w+ )?(?:happened|happens|went on|was going on|went wrong|disturbed|interrupted|changed|broke)\b"
    r"|\bwhat did the \w+ do\b|\b(?:did|has) (?:anything|something) (?:\w+ )?happen", re.IGNORECASE)
# "What keeps coming up…?", "What has everyone argued about all day?", "…judging by tonight?" ask for
# a pattern across many lines: what the agent concluded from them (a reflection) is favoured as much.
ASKS_FOR_A_PATTERN = re.compile(
    r"\b(?:keeps?|kept) (?:on )?\w+ing\b|\ball (?:day|night|evening|morning|afternoon|week)\b"
    r"|\b(?:again and again|over and over|time and again|every time)\b|\bjudging by\b", re.IGNORECASE)


def recall(bank, query: str | None = None, *, agent: str | None = None, filter: MemoryFilter | None = None,
           k: int = 5, query_vector=None, options: RecallOptions | None = None, **chosen) -> list[RecallResult]:
    """Top k memories of a bank for a query, honouring the filter exactly.

    How it ranks is RecallOptions (memory.recalling.options): `options`, with any of its fields
    given here as keywords on top (recall(bank, q, scoring="decayed", exact=True)).
    exact=None chooses: an exact scan while at most EXACT_LIMIT memories match, else the HNSW
    indexes (iterative scan, over-fetch, exact re-rank). A pure read: the caller records what was
    recalled (memory.services.accesses_record) in its own transaction, so a redone turn counts once.
    fusion=True (free-text search: query_memory) adds BM25 and the speaker boost to similarity,
    weights from settings.RETRIEVAL_* unless given; canonical queries keep plain similarity. Fused,
    exact=None is an exact scan up to RETRIEVAL_FUSION_EXACT_LIMIT candidates, else the indexes' top lists.
    enhance (QueryEnhancement.apply's answer): context and synonyms shape the query vector and the
    BM25 terms, a time window adds a "temporal" component; None or nothing used: the same ranking.
    clock (a scenario clock's skips, scoring.clock_age): memories age by the time that passed, not
    only by turns, in the presets' recency and decay.
    associations (a weight, 0: off): links (associate_memories, a reflection's evidence) are followed
    one hop, spreading activation: a memory linked to one of the top k gains weight × that one's
    score as its "association" component, so a linked memory the query alone ranks lower may enter.
    mood (memory.living.mood, −1..1): memories whose feeling matches it gain a "mood" component.
    distort (memory.forming.distortion.RetrievalDistortion): the agent's retrieval-stage filter, applied
    last (depression: a positive memory loses half its score, a negative "distortion" component).
    feedback (fusion only; β, settings.RETRIEVAL_FEEDBACK_WEIGHT unless given, 0: off): the query
    vector moves toward its best few candidates and they are ranked again (sql.ranked_sql).
    """
    opts = replace(options, **chosen) if options is not None else RecallOptions(**chosen)
    flt = MemoryFilter(**(filter.to_dict() if filter else {}))
    if agent is not None:
        flt.agent = agent
    weights = resolve_weights(opts.scoring, opts.weights)
    k = int(k)
    if k <= 0:
        return []
    bank_id = bank.pk if hasattr(bank, "pk") else int(bank)
    search = Search.start(query, query_vector, opts)
    # A mood primes (memory.living.mood): a few more candidates, so a matching memory just below the k may enter.
    primed = abs(float(opts.mood or 0.0)) >= MOOD_CALM
    rows = _ranked_rows(search, flt, bank_id, k + MOOD_EXTRA if primed else k, opts, weights)
    results = search.results(rows, _path.get())
    path = results.path  # the ranking's path, kept through what follows
    if opts.associations and results and flt.ids is None and not search.keyword_only:
        results = _spread(bank, results, flt, k=k, weight=float(opts.associations), query_vector=search.qvec,
                          options=opts)
    if opts.distort is not None and results:
        results = opts.distort.apply(results)
    results = prime(results, float(opts.mood))[:k] if primed and results else results
    return results if isinstance(results, Recalled) else Recalled(results, path=path)


def _ranked_rows(search: Search, flt: MemoryFilter, bank_id: int, k: int, opts: RecallOptions,
                 w: dict) -> list[Ranked]:
    """The ranking's rows: plain or fused, exact or through the indexes (see recall)."""
    outermost = not connection.in_atomic_block
    # Outside a transaction no block is opened (BEGIN and COMMIT were two round trips of a ~10 ms
    # search): the reads need no common snapshot, and run_ranked sends the planner settings and the
    # ranking in one pipeline, which PostgreSQL runs as one implicit transaction (the settings, local
    # to it, end with it). Inside the caller's transaction a savepoint keeps a failed search from
    # spoiling it.
    with (transaction.atomic() if not outermost else nullcontext()):
        side = None
        if search.pending is not None:
            side = _lexical_side(search.query, flt, bank_id, k, search.exact, search.fused, search.enhance)
            try:
                search.vector = search.pending.result()
            except EmbeddingError:
                side = None
                search.degrade(opts.speaker_boost)
        if search.keyword_only and search.pending is None:
            search.degrade(opts.speaker_boost)
        if search.enhance is not None and search.vector is not None:
            search.vector = enhanced_vector(search.vector, search.enhance, extra=search.extra_vectors,
                                             lexical=bool(search.fused and search.fused.lexical_weight))
        has_vector = search.vector is not None
        search.qvec = qvec = np.asarray(search.vector, dtype=np.float32) if has_vector else None
        base = {"vec": qvec, "turn": int(opts.current_turn or 0),
                "skips": [float(x) for x in opts.clock] if opts.clock else None,
                "ws": w[SIMILARITY], "wr": w["recency"],
                "wi": w["importance"], "k": k}
        window = search.enhance.window if search.enhance is not None else None
        if window is not None:
            base |= {"tlo": window.lo, "thi": window.hi, "tw": window.weight, "twidth": window.width}
        if search.fused and (has_vector or search.keyword_only):
            rows = _fused_rows(search.query, flt, bank_id, qvec, base, k, opts.scoring, search.exact, search.fused,
                               search.enhance, side)
        else:
            rows = _plain_rows(flt, bank_id, qvec, base, k, opts.scoring, search.exact, window)
        if not outermost:
            # hnsw_settings' planner settings would outlive this search in the caller's transaction.
            with connection.cursor() as cursor:
                cursor.execute("SELECT set_config('enable_sort', 'on', true); SET LOCAL plan_cache_mode TO DEFAULT")
    return rows


def linked_ids(memory_ids: list[int]) -> dict[int, set[int]]:
    """Each memory's links, both ways (Memory.evidence: associate_memories, a reflection's evidence,
    a consolidation's originals, a belief's teller)."""
    links: dict[int, set[int]] = {}
    with connection.cursor() as cursor:
        cursor.execute("SELECT from_memory_id, to_memory_id FROM memory_memory_evidence "
                       "WHERE from_memory_id = ANY(%s) OR to_memory_id = ANY(%s)", [memory_ids, memory_ids])
        for a, b in cursor.fetchall():
            links.setdefault(a, set()).add(b)
            links.setdefault(b, set()).add(a)
    return links


def _spread(bank, results: list[RecallResult], flt: MemoryFilter, *, k: int, weight: float, query_vector,
            options: RecallOptions) -> list[RecallResult]:
    """One hop of spreading activation over the top k (see recall): the neighbours the filter allows
    are ranked as the query ranks them, then every memory linked to a top-k one gains weight × the
    best such score; the top k of all of them is the answer."""
    top = {r.memory.pk: r for r in results}
    links = linked_ids(list(top))
    if not links:
        return results
    new = sorted({n for pk in top for n in links.get(pk, ())} - set(top))
    pool = dict(top)
    if new:
        narrowed = MemoryFilter(**{**flt.to_dict(), "ids": new})
        # Ranked as the query ranks them, without spreading again or distorting (recall does that once).
        ranking = RecallOptions(scoring=options.scoring, weights=options.weights, current_turn=options.current_turn,
                                clock=options.clock)
        for r in recall(bank, filter=narrowed, k=len(new), query_vector=query_vector, options=ranking):
            pool[r.memory.pk] = r
    for pk, r in pool.items():
        sources = [top[n].score for n in links.get(pk, ()) if n in top and n != pk]
        if sources:
            boost = weight * max(sources)
            r.components = {**r.components, "association": round(boost, 6)}
            r.score += boost
    return reranked(pool.values(), k)


def _plain_rows(flt: MemoryFilter, bank_id: int, qvec, base: dict, k: int, scoring: str,
                exact: bool | None, window=None) -> list[Ranked]:
    """Similarity (and the preset's recency and importance) over every candidate: exact while at
    most EXACT_LIMIT match (NARROW_EXACT_LIMIT for a filter narrower than a bank without its own
    index), else HNSW."""
    where, params = flt.where(bank_id)
    has_vector = qvec is not None
    guarded = speculative = False
    counted = None  # what agent and kinds select, when the other conditions' share decided the path
    if exact is None and has_vector:
        if flt.counted_by_termstat():
            # memory_termstat knows how many match (a few index rows, not a count of thousands).
            candidates, bank_size = termstat_count_kept(bank_id, flt.agents(), flt.kinds, kept_above=EXACT_LIMIT)
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
            # Unless the bank has its own index and the conditions termstat cannot count (tags,
            # importance, turns…) keep a good share of what it does count: the walk then fills its
            # list after a few hundred memories, where the scan reads thousands.
            counted = _counted_beside(flt, bank_id)
            speculative = counted is not None and _walk_pays(flt, bank_id, counted)
            exact = guarded = not speculative
        else:
            exact = count_candidates(where, params, EXACT_LIMIT + 1) <= EXACT_LIMIT
    if exact is None:
        exact = True  # no vector: nothing for an index to order by
    named_where, named = pyformat(where, params)
    pool = prelude = None
    if not exact:
        # The indexes' top lists, re-ranked exactly, in one statement (a round trip each cost more than its walk).
        fetch = max(HNSW_FETCH, 4 * k)
        named |= {"depth": fetch, "bank": bank_id}
        pool = " UNION ".join(index_probes(named_where, window=window is not None))
        # A walk chosen on an estimate gives up sooner: short, the scan below answers.
        prelude = hnsw_settings_sql(fetch, prefer_index=has_bank_index(bank_id),
                                    max_scan=SPECULATIVE_SCAN_TUPLES if speculative else None)
    sql = ranked_sql(scoring, named_where, has_vector, guarded=guarded, temporal=window is not None, pool_ids=pool)
    rows = run_ranked(sql, named | base | {"guard": NARROW_EXACT_LIMIT + 1}, prelude)
    if counted is not None and guarded:
        # The scan counted what the filter keeps: the next search with it decides on that, not the estimate.
        share_seen(flt, bank_id, (rows[0].n if rows else 0) / max(counted, 1))
    if speculative and len(rows) < k:
        share_seen(flt, bank_id, 0.0)
    if guarded and rows and rows[0].n > NARROW_EXACT_LIMIT:
        return _plain_rows(flt, bank_id, qvec, base, k, scoring, False, window)
    if not exact and len(rows) < k:
        # More than EXACT_LIMIT match, so k do: an index scan that came back short is redone exactly.
        return _plain_rows(flt, bank_id, qvec, base, k, scoring, True, window)
    _path.set("exact" if exact else "index")
    return rows


def _counted_beside(flt: MemoryFilter, bank_id: int) -> int | None:
    """How many memories the filter's agent and kinds select (termstat), when the bank has its own
    index to walk and the filter's other conditions could be estimated; else None (a scan)."""
    if flt.statuses != ["active"] or flt.ids is not None or not has_bank_index(bank_id):
        return None
    return termstat_count_kept(bank_id, flt.agents(), flt.kinds, kept_above=EXACT_LIMIT)[0]


def _walk_pays(flt: MemoryFilter, bank_id: int, counted: int) -> bool:
    """A filter beyond agent and kinds walks the bank's own index when it keeps more than
    INDEXED_EXACT_LIMIT memories and at least WALK_SHARE_MIN of those agent and kinds select
    (memory.recalling.selectivity): a rarer condition would have the walk visit most of the graph to
    fill its list, where the scan reads a few rows."""
    share = kept_share(flt, bank_id)
    return share >= WALK_SHARE_MIN and counted * share > INDEXED_EXACT_LIMIT


@dataclass
class _LexicalSide:
    """What query_memory's ranking reads before it has a vector (recall reads it while the query is
    encoded): the BM25 statistics, which also count the candidates; the path; and on the index
    path the GIN's top list, the rows holding the question's rarer words."""
    where: str
    params: list
    lex: LexicalQuery | None
    candidates: int
    exact: bool
    bank_index: bool
    lexical_ids: list[int] | None = None


def _lexical_side(query: str, flt: MemoryFilter, bank_id: int, k: int, exact: bool | None, fusion: Fusion,
                  enhance: EnhancedQuery | None) -> _LexicalSide:
    where, params = flt.where(bank_id)
    lex = None
    if fusion.lexical_weight:
        # The BM25 statistics also say how many memories match.
        text = enhance.lexical_text if enhance is not None and enhance.expansions else query
        lex = (lexical_query_from_stats(text, bank_id, flt.agents(), flt.kinds) if flt.counted_by_termstat()
               else lexical_query(text, where, params))
        if text != query:
            _scale_expansions(lex, query)
        candidates = lex.candidates
    else:
        candidates = count_candidates(where, params, NARROW_EXACT_LIMIT + 1)
    bank_index = False
    if exact is None:
        exact = candidates <= settings.RETRIEVAL_FUSION_EXACT_LIMIT
        if not exact:
            # The bank's own HNSW indexes, or an exact scan while a worker builds them (asked for
            # by the writes that grew the bank: memory.recalling.indexing.bank_index_wanted).
            bank_index = has_bank_index(bank_id)
            if not bank_index:
                exact = True
    elif not exact:
        bank_index = has_bank_index(bank_id)
    side = _LexicalSide(where, params, lex, candidates, exact, bank_index)
    rare = lex.rare_terms(LEXICAL_POOL_ROWS) if lex is not None and not exact else None
    if rare and rare.terms:
        # The rows holding the query's rarer words, by GIN, scored with every term (a rare word
        # vectors miss): one of the index path's three top lists.
        named_where, named = pyformat(where, params)
        lexical_sql, lex_params = lex.score_sql()
        # Bound server-side (vector_cursor): the idf weights arrive as float8, not as numeric
        # literals formatted here and summed as numeric for each of up to LEXICAL_POOL_ROWS rows.
        with vector_cursor() as cursor:
            cursor.execute(f"SELECT m.id FROM memory_memory m WHERE {named_where} AND m.search @@ {rare.tsquery_sql('lr')} "
                           f"ORDER BY {lexical_sql} DESC, m.id LIMIT %(depth)s",
                           named | lex_params | rare.score_sql("lr")[1] | {"depth": max(FUSION_DEPTH, k)})
            side.lexical_ids = [row[0] for row in cursor.fetchall()]
    return side


def _fused_rows(query: str, flt: MemoryFilter, bank_id: int, qvec, base: dict, k: int, scoring: str,
                exact: bool | None, fusion: Fusion, enhance: EnhancedQuery | None = None,
                side: _LexicalSide | None = None) -> list[Ranked]:
    """query_memory's ranking (see sql.ranked_sql). Up to RETRIEVAL_FUSION_EXACT_LIMIT candidates one
    scan makes both top lists exactly; above, HNSW gives the similarity list (content and keys) and
    the GIN index the BM25 list from the query's rarer terms, and only that pool is scored.
    side: _lexical_side's answer when recall read it already (while the query was encoded)."""
    if side is None:
        side = _lexical_side(query, flt, bank_id, k, exact, fusion, enhance)
    exact, lex = side.exact, side.lex
    depth = max(FUSION_DEPTH, k)
    window = enhance.window if enhance is not None else None
    # The index path of a filter of fixed values (query_memory's: a bank, an agent, kinds) is planned
    # once per connection (sql.run_ranked): the filter and the limits go into the statement's text.
    # Not with a time window, whose width decides between walking the turns and the vectors.
    generic = not exact and settings.RETRIEVAL_PREPARED and flt.counted_by_termstat() and window is None
    if generic:
        named_where, named = literal_where(side.where, side.params), {}
    else:
        named_where, named = pyformat(side.where, side.params)
    named |= base | {"wl": fusion.lexical_weight, "wb": fusion.speaker_boost, "depth": depth,
                     "names": name_grams(query) if fusion.speaker_boost else [],
                     "about": name_grams(query) if fusion.speaker_boost and not ASKS_WHAT_WAS_SAID.search(query) else [],
                     "events": bool(fusion.speaker_boost and ASKS_WHAT_HAPPENED.search(query)),
                     "insights": bool(fusion.speaker_boost and ASKS_FOR_A_PATTERN.search(query))}
    feedback = bool(fusion.feedback) and qvec is not None
    if feedback:
        named |= {"fbm": FEEDBACK_LINES, "fbmin": FEEDBACK_MIN_POOL,
                  "fbw": np.full(len(qvec), fusion.feedback, dtype=np.float32)}
    lexical_sql = "0.0::float8"
    if lex is not None:
        lexical_sql, lex_params = lex.score_sql(padded=generic)
        named |= lex_params
    pool = None
    if not exact:
        # The top lists in the ranking statement itself: content and keys by HNSW, and the GIN's
        # (read before, by _lexical_side).
        pool = index_probes(named_where, window=window is not None)
        if side.lexical_ids:
            pool.append("(SELECT unnest(%(lexids)s::bigint[]) AS id, NULL::float8 AS ks)")
            named["lexids"] = side.lexical_ids
        named["bank"] = bank_id
    rows = run_ranked(ranked_sql(scoring, named_where, qvec is not None, True, lexical_sql,
                                 pool_ids=" UNION ".join(pool) if pool else None, temporal=window is not None,
                                 feedback=feedback), named,
                      hnsw_settings_sql(depth, prefer_index=side.bank_index, generic=generic,
                                        ef_search=FUSION_EF_SEARCH) if pool else None,
                      literals=PLAN_LITERALS if generic else ())
    if not exact and len(rows) < min(k, side.candidates):
        return _fused_rows(query, flt, bank_id, qvec, base, k, scoring, True, fusion, enhance)
    _path.set("exact" if exact else "index")
    return rows


def _scale_expansions(lex, query: str) -> None:
    """Synonym expansion: a term only the expansion brought in weighs SYNONYM_IDF_SCALE of its idf."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT tsvector_to_array(to_tsvector('english', %s))", [query])
        own = set(cursor.fetchone()[0] or [])
    lex.idf = [idf if term in own else idf * SYNONYM_IDF_SCALE for term, idf in zip(lex.terms, lex.idf)]
