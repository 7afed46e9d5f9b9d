"""The ranking statement: built (ranked_sql), run with the query vector in binary (run_ranked),
its rows turned into Memory objects; and the HNSW probes that feed it on the index path."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connection
from psycopg.sql import Literal

from memory.embedding.cache import vector_cursor
from memory.models import Memory
from memory.recalling.scoring import DECAY_COLUMNS, score_sql

HNSW_EF_SEARCH = 64         # candidate list per index probe (recall@10 ≈ 0.98 at 100k, see bench_memory)
# query_memory's walks feed a pool of 30 + 90 keys re-ranked exactly: its top 5 agreed with the exact
# scan as often at 32, 40, 48 as at 64 (0.965, bench_memory's 10k conversation), and 40 saves ~0.3 ms.
FUSION_EF_SEARCH = 40
MAX_SCAN_TUPLES = 100_000   # a filtered walk visits at most this many memories (hnsw.max_scan_tuples)

_COLUMNS = [f.column for f in Memory._meta.concrete_fields if f.name not in {"embedding", "search"}]
_SELECT = ", ".join(f"m.{c}" for c in _COLUMNS)
_ATTNAMES = [f.attname for f in Memory._meta.concrete_fields if f.name not in {"embedding", "search"}]
# What the ORM does to a column on the way in (JSONField decodes text: Django's connection reads
# jsonb as text, and a raw cursor on it too).
_CONVERTERS = [(i, f.from_db_value) for i, f in enumerate(f for f in Memory._meta.concrete_fields
                                                           if f.name not in {"embedding", "search"})
               if hasattr(f, "from_db_value")]


def count_candidates(where: str, params: list, limit: int) -> int:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM (SELECT 1 FROM memory_memory m WHERE {where} LIMIT %s) s", [*params, limit])
        return cursor.fetchone()[0]


def hnsw_settings(cursor, fetch: int, *, prefer_index: bool = False) -> None:
    """For this transaction: iterative index scans (a filtered query still gets fetch rows).
    prefer_index: a bank's own index exists, but the planner, misjudging how many rows a bank,
    agent and kind select, would sort the bank exactly (15 ms at 10,000 rows against ~1 ms): no
    sort where an index gives the order."""
    cursor.execute(*hnsw_settings_sql(fetch, prefer_index=prefer_index))


def hnsw_settings_sql(fetch: int, *, prefer_index: bool = False, generic: bool = False,
                      ef_search: int = HNSW_EF_SEARCH, max_scan: int | None = None) -> tuple[str, list]:
    """hnsw_settings' statement, for run_ranked to send ahead of the ranking (one round trip for both).
    plan_cache_mode, for a prepared ranking (run_ranked): generic (planned once, kept on the
    connection) when the statement's text holds its bank, filter and limits (literals=...); else
    planned for each search's values (a generic plan blind to the bank walked the wrong index).
    max_scan: how many memories a filtered walk may visit before it stops (MAX_SCAN_TUPLES unless given)."""
    return ("SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true), "
            "set_config('hnsw.ef_search', %s, true), set_config('hnsw.max_scan_tuples', %s, true), "
            "set_config('enable_sort', %s, true), set_config('plan_cache_mode', %s, true)",
            [str(max(ef_search, fetch)), str(max_scan or MAX_SCAN_TUPLES), "off" if prefer_index else "on",
             "force_generic_plan" if generic else "force_custom_plan"])


def index_probes(where: str, *, window: bool = False) -> list[str]:
    """The HNSW top lists, as subqueries of the ranking statement (its pool_ids) over named
    parameters: the %(depth)s nearest memories by content, the 3·depth nearest keys' memories (a
    line is a key's memory up to five times, for its pair and window keys: three times the keys reach
    the depth best lines by key, which twice did not always do at a depth of 30), and with a time window
    its turns' nearest (a query naming a turn rarely says its words). The filter is applied in each
    walk (iterative scans keep them full); k.bank_id repeats the bank: the bank key index's predicate.
    Each yields (id, ks): ks, a key's similarity, from the key walk (ranked_sql takes a memory's
    best walked key as its best key: the walk meets a line's best key before its others)."""
    probes = [
        f"(SELECT m.id, NULL::float8 AS ks FROM memory_memory m WHERE {where} "
        "ORDER BY m.embedding <=> %(vec)s::vector LIMIT %(depth)s)",
        f"(SELECT k.memory_id AS id, 1 - (k.embedding <=> %(vec)s::vector) AS ks FROM memory_memorykey k "
        f"JOIN memory_memory m ON m.id = k.memory_id "
        f"WHERE k.bank_id = %(bank)s AND {where} ORDER BY k.embedding <=> %(vec)s::vector LIMIT 3 * %(depth)s)",
    ]
    if window:
        probes.append(f"(SELECT m.id, NULL::float8 AS ks FROM memory_memory m WHERE {where} "
                      "AND m.turn BETWEEN %(tlo)s AND %(thi)s ORDER BY m.embedding <=> %(vec)s::vector LIMIT %(depth)s)")
    return probes


def time_sql() -> str:
    """The temporal boost (enhance.TimeWindow.boost) over alias m: %(tw)s inside turns
    %(tlo)s..%(thi)s, decaying by exp(−distance/%(twidth)s) outside; 0 for a memory without a turn."""
    return ("(CASE WHEN m.turn IS NULL THEN 0.0 ELSE %(tw)s * exp(-GREATEST(%(tlo)s - m.turn, m.turn - %(thi)s, 0)"
            "::float8 / %(twidth)s) END)::float8")


def ranked_sql(scoring: str, where_sql: str, has_vector: bool, fusion: bool = False, lexical_sql: str = "0.0::float8",
               guarded: bool = False, pool_ids: str | None = None, temporal: bool = False,
               feedback: bool = False) -> str:
    """One pass over the candidates: content similarity, best key per memory, score, top k; then
    the full rows of those k only. Ordering by an expression over a CTE keeps the HNSW index out:
    this scan is exact. pool_ids, a query of memory ids (the indexes' top lists), restricts the
    candidates to those, in the same statement; each of its lists applies where_sql itself.

    With fusion, relative score fusion: the pool is the top FUSION_DEPTH candidates by similarity ∪
    the top FUSION_DEPTH by BM25, and within it relevance = (1 − wl)·minmax(similarity) +
    wl·BM25/max(BM25) + wb·[speaker named] (linear fusion beat reciprocal-rank fusion: R@10 0.67 vs
    0.58 offline); the preset's similarity weight then applies to that relevance. BM25 is scaled by
    its maximum, not min-max: when every candidate holds the question's word (a name in a short
    dialogue), min-max would turn their length differences into a 0-to-1 spread. Defined on the two
    top lists only, the same ranking comes out whether the lists are computed here over every
    candidate or fetched from the HNSW and GIN indexes (recall() chooses).

    feedback (fusion only; pseudo-relevance feedback): the query vector moves toward its %(fbm)s most
    relevant candidates, q' = normalize(q + β·mean(their vectors)) (%(fbw)s: β in every dimension),
    if the pool holds at least %(fbmin)s (among a few, the best are not telling: q' would only drift
    toward the loudest), and the pool is ranked again with q' (content and keys), BM25 unchanged:
    one statement, no second round of probes, and the same answer on both paths (the pool is). A question whose
    answer spans lines (multi-hop) finds the lines that resemble its first answers.

    temporal (a query naming a time, enhance.TimeWindow): the boost time_sql() is added to the
    score as its own component, and with fusion the window's top FUSION_DEPTH by similarity join
    the pool. Off, the statement is the one it was before query enhancement.

    The statement's parts, in order: its candidates (_candidates_cte), each one's best key and
    relevance (_best_ctes), the feedback round (_feedback_ctes), then score, top k and rows (_scored).
    """
    feedback = feedback and fusion and has_vector
    chain = _best_ctes(has_vector, fusion, temporal, walked=bool(pool_ids))
    final = "fused"
    if feedback:
        chain += _feedback_ctes(scoring, has_vector, fusion, temporal)
        final = "fused2"
    ids = f"ids AS (SELECT id, max(ks) AS ks FROM ({pool_ids}) p GROUP BY id)," if pool_ids else ""
    return f"""
        WITH {ids} {_candidates_cte(scoring, where_sql, has_vector, fusion, lexical_sql, guarded, pool_ids)}
        {chain}
        {_scored(scoring, final, temporal, guarded, _matched_key_sql(has_vector, feedback))}"""


def _candidates_cte(scoring: str, where_sql: str, has_vector: bool, fusion: bool, lexical_sql: str, guarded: bool,
                    pool_ids: str | None) -> str:
    """c: every candidate (or the pool's) with its content similarity and what its score reads."""
    content_sim = "1 - (m.embedding <=> %(vec)s::vector)" if has_vector else "0.0::float8"
    # A question naming someone favours what they said and what is about them (a knowledge memory,
    # their comings and goings): "how do I get on with Gordon?" is about Gordon, not said by him.
    # Half as much: a question naming someone is as often about what happened around them. A question
    # asking what happened favours the writer's events (stage memories) as much, and one asking for a
    # pattern ("what keeps coming up") the agent's reflections.
    extra = (f", {lexical_sql} AS lex, CASE WHEN m.speaker <> '' AND (lower(m.speaker) = ANY(%(names)s) "
             "OR lower(split_part(m.speaker, ' ', 1)) = ANY(%(names)s)) THEN 1.0 WHEN m.about <> '' AND "
             "(lower(m.about) = ANY(%(about)s) OR lower(split_part(m.about, ' ', 1)) = ANY(%(about)s)) "
             "THEN 0.5 WHEN %(events)s AND m.category = 'stage' THEN 0.5 "
             "WHEN %(insights)s AND m.kind = 'reflection' THEN 0.5 ELSE 0.0 END::float8 AS spk") if fusion else ""
    # The pool's lists apply the filter themselves (index_probes, the GIN list): not checked again.
    candidates = "JOIN ids ON ids.id = m.id" if pool_ids else f"WHERE {where_sql}"
    return f"""c AS MATERIALIZED (
            SELECT m.id, {content_sim} AS sim_c, m.turn, m.importance, m.decay_rate, m.access_count,
                   m.last_accessed_turn{DECAY_COLUMNS if scoring == "decayed" else ""} {extra},
                   {"ids.ks" if pool_ids else "NULL::float8 AS ks"}
              FROM memory_memory m {candidates}{" LIMIT %(guard)s" if guarded else ""}
        ),"""


def _keys_join(vector: str, has_vector: bool, walked: bool = False) -> str:
    """Each candidate's best key through a LATERAL probe of the memory_id index: linear in the
    candidates whatever the statistics say (a fresh bank's stale ones made the planner join every
    candidate with every key: 24 ms for 419 lines). Ordering by an expression keeps HNSW out.
    Its similarity only: which key it was (its text) is looked up for the k answers at the end.
    walked: a candidate the key walk found (c.ks) has its best key already; the others are probed."""
    if not has_vector:
        return "LEFT JOIN (SELECT NULL::float8 AS sim_k) kb ON false"
    return f"""LEFT JOIN LATERAL (
            SELECT max(1 - (k.embedding <=> {vector})) AS sim_k FROM memory_memorykey k
             WHERE k.memory_id = c.id{" AND c.ks IS NULL" if walked else ""}
        ) kb ON true"""


def _fused_cte(best: str, name: str, fusion: bool, temporal: bool) -> str:
    """The pool of the best-CTE `best` and its relevance, as the CTEs <name>_pool and <name>."""
    if not fusion:
        return (f"{name} AS (SELECT {best}.*, sim AS relevance, 0.0::float8 AS c_lexical, "
                f"0.0::float8 AS c_speaker FROM {best}),")
    in_window = (f"""
            UNION
            (SELECT * FROM {best} WHERE turn BETWEEN %(tlo)s AND %(thi)s ORDER BY sim DESC, id LIMIT %(depth)s)"""
                 if temporal else "")
    return f"""{name}_pool AS (
            (SELECT * FROM {best} ORDER BY sim DESC, id LIMIT %(depth)s)
            UNION
            (SELECT * FROM {best} WHERE lex > 0 ORDER BY lex DESC, id LIMIT %(depth)s){in_window}
        ),
        {name} AS (SELECT p.*, ((1 - %(wl)s) * (CASE WHEN max(sim) OVER () > min(sim) OVER ()
                                THEN (sim - min(sim) OVER ()) / (max(sim) OVER () - min(sim) OVER ()) ELSE 1.0 END)
                           + %(wl)s * (CASE WHEN max(lex) OVER () > 0 THEN lex / max(lex) OVER () ELSE 0.0 END)
                           + %(wb)s * spk)::float8 AS relevance,
                          (CASE WHEN max(lex) OVER () > 0 THEN lex / max(lex) OVER () ELSE 0.0 END) AS c_lexical,
                          spk AS c_speaker
                     FROM {name}_pool p),"""


def _best_ctes(has_vector: bool, fusion: bool, temporal: bool, walked: bool) -> str:
    """best: each candidate's best key and similarity; fused: the pool and its relevance."""
    return f"""best AS (
            SELECT c.*, COALESCE(c.ks, kb.sim_k) AS sim_k, GREATEST(c.sim_c, c.ks, kb.sim_k) AS sim
              FROM c {_keys_join("%(vec)s::vector", has_vector, walked=walked)}
        ),
        {_fused_cte("best", "fused", fusion, temporal)}"""


def _feedback_ctes(scoring: str, has_vector: bool, fusion: bool, temporal: bool) -> str:
    """q' from the first ranking's best few; the second ranking is over the first's pool (fused),
    its vectors read again by id (carried through the CTEs, they cost more)."""
    return f"""
        fb AS MATERIALIZED (SELECT CASE WHEN (SELECT count(*) FROM fused) >= %(fbmin)s
                           THEN l2_normalize(%(vec)s::vector + %(fbw)s::vector * avg(e.embedding))
                           ELSE %(vec)s::vector END AS q
                              FROM (SELECT id FROM fused ORDER BY relevance DESC, id LIMIT %(fbm)s) t
                              JOIN memory_memory e ON e.id = t.id),
        best2 AS (
            SELECT c.id, c.turn, c.importance, c.decay_rate, c.access_count, c.last_accessed_turn{
                ", c.emotion, c.goal_critical" if scoring == "decayed" else ""}, c.lex, c.spk,
                   e.sim_c, kb.sim_k, GREATEST(e.sim_c, kb.sim_k) AS sim
              FROM fused c CROSS JOIN fb
              JOIN LATERAL (SELECT 1 - (e.embedding <=> fb.q) AS sim_c FROM memory_memory e WHERE e.id = c.id) e ON true
              {_keys_join("fb.q", has_vector)}
        ),
        {_fused_cte("best2", "fused2", fusion, temporal)}"""


def _matched_key_sql(has_vector: bool, feedback: bool) -> str:
    """The key an answer was found by (its best, when better than its content), for the k answers only."""
    if not has_vector:
        return "NULL::varchar"
    return f"""CASE WHEN top.sim_k > top.sim_c THEN (
            SELECT k.query FROM memory_memorykey k WHERE k.memory_id = top.id
             ORDER BY 1 - (k.embedding <=> {"(SELECT q FROM fb)" if feedback else "%(vec)s::vector"}) DESC, k.id LIMIT 1) END"""


def _scored(scoring: str, final: str, temporal: bool, guarded: bool, matched_key: str) -> str:
    """comp: the score's components over the last relevance CTE; top: the k best; then their rows."""
    return f"""comp AS (SELECT m.id, m.turn, m.sim_c, m.sim_k, m.relevance, m.c_lexical, m.c_speaker, {score_sql(scoring)},
                        {time_sql() if temporal else "0.0::float8"} AS c_time
                   FROM {final} m),
        top AS (
            SELECT comp.*, %(ws)s * relevance + %(wr)s * c_recency + %(wi)s * c_importance{" + c_time" if temporal else ""} AS score
              FROM comp ORDER BY score DESC, turn DESC NULLS LAST, id LIMIT %(k)s
        )
        SELECT top.id, {matched_key} AS matched_key, top.c_similarity, top.c_recency, top.c_importance, top.c_lexical,
               top.c_speaker, top.score, {"(SELECT count(*) FROM c)" if guarded else "NULL::bigint"} AS n,
               top.c_time, {_SELECT}
          FROM top JOIN memory_memory m ON m.id = top.id
         ORDER BY top.score DESC, top.turn DESC NULLS LAST, top.id"""


@dataclass
class Ranked:
    id: int
    matched_key: str | None
    c_similarity: float
    c_recency: float
    c_importance: float
    c_lexical: float
    c_speaker: float
    score: float
    n: int | None = None  # candidates scanned (guarded statements only)
    c_time: float = 0.0   # the temporal boost (query enhancement), already weighted
    memory: Memory | None = None


_RANK_COLUMNS = 10  # Ranked's fields before memory; the memory's own columns follow


def run_ranked(sql: str, named: dict, prelude: tuple[str, list] | None = None,
               literals: tuple[str, ...] = ()) -> list[Ranked]:
    """The ranking statement with the query vector bound in binary (a text literal costs ~1–2 ms to
    format and parse); its rows carry the k memories' columns (embedding and search deferred), so
    no second query fetches them. prelude (hnsw_settings_sql) goes ahead of it in one round trip
    (pipeline mode); its settings are local to the transaction: the caller's, or outside one the
    implicit transaction PostgreSQL runs a pipeline's statements in (up to its Sync). The statement
    is prepared on this connection (settings.RETRIEVAL_PREPARED: parsed once, not on every search; a
    small bank's exact ranking took longer to plan, ~1.3 ms, than to run, ~0.5). With a prelude (a
    big bank's search) it is, by the prelude's plan_cache_mode, planned for its values or, with
    literals (the names of integer parameters: depth, k, bank…, written into the text with the
    filter's values, literal_where), planned once: those are all its plan depends on, and planning
    the ~40 nodes was ~1.3 ms of a ~6 ms statement."""
    if literals:
        sql = _with_literals(sql, tuple((name, int(named[name])) for name in literals if name in named))
    statement, order = positional(sql)
    params = [named[name] for name in order]
    prepare = settings.RETRIEVAL_PREPARED
    with vector_cursor(raw=True) as cur:
        if prepare:
            _allow_prepare(cur.connection)
        if prelude is not None:
            with cur.connection.pipeline(), cur.connection.cursor() as first:
                first.execute(*prelude, prepare=False)
                cur.execute(statement, params, prepare=prepare)
        else:
            cur.execute(statement, params, prepare=prepare)
        rows = cur.fetchall()
    ranked = []
    for row in rows:
        values = list(row[_RANK_COLUMNS:])
        for i, convert in _CONVERTERS:
            values[i] = convert(values[i], None, connection)
        ranked.append(Ranked(*row[:_RANK_COLUMNS], memory=Memory.from_db(DEFAULT_DB_ALIAS, _ATTNAMES, values)))
    return ranked


# The integer parameters of ranked_sql and index_probes that a plan depends on (LIMITs, the bank of
# the key index's predicate): run_ranked's literals for a statement planned once.
PLAN_LITERALS = ("depth", "k", "bank", "fbm", "fbmin")
PREPARED_MAX = 32  # statements kept per connection: each holds ~0.7 MB of the server's memory (its plan)


def _allow_prepare(conn) -> None:
    """Let explicit prepare=True work on Django's connection. Django turns psycopg's prepared
    statements off (prepare_threshold None, with which psycopg ignores prepare=True); a threshold no
    statement reaches keeps them off for every other query (Django's own cursors never prepare).
    psycopg drops the least recently used past PREPARED_MAX (a ranking has a few shapes per bank and
    agent: lexical.TERM_BUCKETS)."""
    if conn.prepare_threshold is None:
        conn.prepare_threshold = 2**31 - 1
        conn.prepared_max = PREPARED_MAX


_PLACEHOLDER = re.compile(r"%\((\w+)\)s|%%")


@lru_cache(maxsize=256)
def positional(sql: str) -> tuple[str, tuple[str, ...]]:
    """A statement with named placeholders as PostgreSQL's $1, $2…, and the names in that order.
    psycopg converts a statement on every call when it is over 4 kB (the ranking statement is
    ~6 kB: ~0.7 ms of Python a search); a search has a few dozen shapes, so they are kept here."""
    order: dict[str, int] = {}

    def number(match: re.Match) -> str:
        if match.group(0) == "%%":
            return "%"
        return f"${order.setdefault(match.group(1), len(order) + 1)}"

    return _PLACEHOLDER.sub(number, sql), tuple(order)


@lru_cache(maxsize=256)
def _with_literals(sql: str, values: tuple[tuple[str, int], ...]) -> str:
    """sql with these named integer parameters written in (run_ranked's literals); kept, like positional."""
    known = dict(values)
    return _PLACEHOLDER.sub(lambda m: str(known[m.group(1)]) if m.group(1) in known else m.group(0), sql)


_literal_wheres: dict[tuple[str, str], str] = {}


def literal_where(where: str, params: list) -> str:
    """where with its values written in as SQL literals (psycopg's quoting; a '%' doubled for
    positional()): a statement whose plan is kept needs its bank (which partial index) and filter in
    its text. For a filter of a few fixed values (a bank, an agent, kinds): one text per filter,
    kept in this process (quoting them was ~0.07 ms a search)."""
    key = (where, repr(params))
    hit = _literal_wheres.get(key)
    if hit is None:
        if len(_literal_wheres) > 1_000:
            _literal_wheres.clear()
        hit = _literal_wheres[key] = _quote_where(where, params)
    return hit


def _quote_where(where: str, params: list) -> str:
    connection.ensure_connection()
    parts = where.split("%s")
    out = parts[0]
    for value, part in zip(params, parts[1:], strict=True):
        out += Literal(value).as_string(connection.connection).replace("%", "%%") + part
    return out


def pyformat(where: str, params: list) -> tuple[str, dict]:
    """Turn positional %s placeholders into named ones so one dict feeds the whole statement."""
    named: dict = {}
    parts = where.split("%s")
    out = parts[0]
    for i, part in enumerate(parts[1:]):
        named[f"p{i}"] = params[i]
        out += f"%(p{i})s" + part
    return out, named
