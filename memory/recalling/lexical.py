"""Lexical side of query_memory's fusion: BM25 over PostgreSQL full-text search, and names in a question.

Memory.search is to_tsvector('english', content) (stop words out, Snowball stems) with a GIN index.
ts_rank has no inverse document frequency, so BM25 is computed here: document frequencies per query
term, then each row's score in the ranking SQL. Term frequency is taken as 1 (a memory rarely
repeats a content word); length normalisation uses the number of distinct lexemes.

The frequencies come from memory_termstat (TermStat, kept by triggers) when the filter is one it
covers: a bank's active memories, by agent and kind. Any other filter counts them live over its
candidates (one statement, each count a GIN bitmap scan: ~18 ms at 10,000 candidates).
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass, field

from django.db import connection

BM25_K1 = 1.2   # the usual BM25 constants (Robertson & Zaragoza), not tuned here
BM25_B = 0.75
MAX_TERMS = 32  # a pasted paragraph as a query costs at most this many term counts
TERM_BUCKETS = (4, 8, 16, MAX_TERMS)  # score_sql(padded=True)'s sizes


@dataclass
class LexicalQuery:
    terms: list[str]       # lexemes that occur in at least one candidate
    idf: list[float]
    avg_length: float
    candidates: int | None = None  # how many rows `where` selects (counted anyway for the idf)
    df: list[int] = field(default_factory=list)  # documents holding each term

    def rare_terms(self, max_rows: int) -> "LexicalQuery":
        """The rarest terms whose matches add up to at most max_rows: what a GIN lookup can score
        quickly (a word in every line, like "said", is left to the similarity side)."""
        chosen, total = [], 0
        for i in sorted(range(len(self.terms)), key=lambda i: self.df[i]):
            total += self.df[i]
            if total > max_rows:
                break
            chosen.append(i)
        chosen.sort()
        return LexicalQuery([self.terms[i] for i in chosen], [self.idf[i] for i in chosen], self.avg_length,
                            self.candidates, [self.df[i] for i in chosen])

    def score_sql(self, prefix: str = "lt", *, padded: bool = False) -> tuple[str, dict]:
        """BM25 of row m over alias m, and its parameters; "0" when nothing can match.
        padded: as many terms as the next of TERM_BUCKETS, the extra ones the first term again
        weighing 0 (the same score): a statement kept prepared then has a few shapes, not one per
        number of words in a question."""
        if not self.terms:
            return "0.0::float8", {}
        terms, idf = list(self.terms), list(self.idf)
        if padded:
            size = next((b for b in TERM_BUCKETS if b >= len(terms)), len(terms))
            terms, idf = terms + [terms[0]] * (size - len(terms)), idf + [0.0] * (size - len(idf))
        params: dict = {}
        hits = []
        for i, (term, idf) in enumerate(zip(terms, idf)):
            params[f"{prefix}{i}"], params[f"{prefix}w{i}"] = tsquery_lexeme(term), idf
            hits.append(f"CASE WHEN m.search @@ %({prefix}{i})s::tsquery THEN %({prefix}w{i})s ELSE 0 END")
        norm = f"({BM25_K1 + 1} / (1 + {BM25_K1} * (1 - {BM25_B} + {BM25_B} * length(m.search) / %({prefix}avg)s)))"
        params[f"{prefix}avg"] = max(self.avg_length, 1.0)
        return f"(({' + '.join(hits)}) * {norm})::float8", params

    def tsquery_sql(self, prefix: str = "lt") -> str:
        """Any of the terms, as one tsquery (for the GIN index on the HNSW path); score_sql(prefix)'s parameters."""
        return "(" + " || ".join(f"%({prefix}{i})s::tsquery" for i in range(len(self.terms))) + ")"


def tsquery_lexeme(term: str) -> str:
    """A lexeme as tsquery input, quoted for tsquery's syntax (a quote doubled, a backslash escaped):
    bound as a tsquery parameter it is parsed once per search, where quote_literal(term)::tsquery in the
    statement was parsed again for every row of a statement planned once (~0.1–0.3 ms a search)."""
    return "'" + term.replace("\\", "\\\\").replace("'", "''") + "'"


def lexical_query(query: str, where: str, params: list) -> LexicalQuery:
    """The query's lexemes with their BM25 idf over the candidates that `where` (alias m) selects."""
    sql = f"""
        WITH t AS (SELECT DISTINCT term FROM unnest(tsvector_to_array(to_tsvector('english', %s))) term LIMIT {MAX_TERMS}),
             base AS (SELECT count(*) AS n, COALESCE(avg(length(m.search)), 0) AS avgdl FROM memory_memory m WHERE {where})
        SELECT t.term, base.n, base.avgdl,
               (SELECT count(*) FROM memory_memory m WHERE {where} AND m.search @@ quote_literal(t.term)::tsquery)
          FROM base LEFT JOIN t ON true ORDER BY t.term"""
    with connection.cursor() as cursor:
        cursor.execute(sql, [query, *params, *params])
        rows = cursor.fetchall()
    terms, idf, dfs, avg, candidates = [], [], [], 0.0, None
    for term, n, avgdl, df in rows:
        avg, candidates = float(avgdl), int(n)
        if term is not None and df:
            terms.append(term)
            dfs.append(int(df))
            idf.append(_idf(n, df))
    return LexicalQuery(terms, idf, avg, candidates, dfs)


def _idf(n: int, df: int) -> float:
    return math.log(1 + (n - df + 0.5) / (df + 0.5))


def _termstat_group(agent: str | list[str] | None, kinds: list[str] | None) -> tuple[str, list]:
    """SQL selecting memory_termstat rows of one agent or some (or all) and some kinds (or all)."""
    clauses, params = ["TRUE"], []
    if isinstance(agent, list):
        clauses.append("agent = ANY(%s)"); params.append(agent)
    elif agent is not None:
        clauses.append("agent = %s"); params.append(agent)
    if kinds:
        clauses.append("kind = ANY(%s)"); params.append(list(kinds))
    return " AND ".join(clauses), params


def lexical_query_from_stats(query: str, bank_id: int, agent: str | list[str] | None,
                             kinds: list[str] | None) -> LexicalQuery:
    """The same figures as lexical_query for a bank's active memories of one agent (or all) and
    some kinds (or all), read from memory_termstat: a few index rows instead of counting."""
    group, params = _termstat_group(agent, kinds)
    clauses, params = ["s.bank_id = %s", group], [bank_id, *params]
    sql = f"""
        WITH t AS (SELECT DISTINCT term FROM unnest(tsvector_to_array(to_tsvector('english', %s))) term LIMIT {MAX_TERMS})
        SELECT s.term, sum(s.df), sum(s.length) FROM memory_termstat s
         WHERE {" AND ".join(clauses)} AND s.term = ANY(ARRAY(SELECT term FROM t) || ''::text)
         GROUP BY s.term ORDER BY s.term"""
    with connection.cursor() as cursor:
        cursor.execute(sql, [query, *params])
        rows = cursor.fetchall()
    counts = {term: (int(df), int(length)) for term, df, length in rows}
    n, total_length = counts.pop("", (0, 0))
    terms = [t for t, (df, _) in counts.items() if df > 0]
    dfs = [counts[t][0] for t in terms]
    return LexicalQuery(terms, [_idf(n, df) for df in dfs], total_length / n if n else 0.0, n, dfs)


_WORD = re.compile(r"[^\W_]+(?:[-'][^\W_]+)*")


def name_grams(query: str) -> list[str]:
    """Lower-case runs of one to three words of the question, possessives dropped: a speaker whose
    name (or first name) is one of them is named in the question."""
    words = [re.sub(r"'s$", "", w) for w in _WORD.findall(query.lower().replace("\u2019", "'"))]
    grams = {" ".join(words[i:i + n]) for n in (1, 2, 3) for i in range(len(words) - n + 1)}
    return sorted(grams)


def termstat_count(bank_id: int, agent: str | list[str] | None, kinds: list[str] | None) -> tuple[int, int]:
    """How many active memories of a bank match (one agent's, some kinds'), and how many the bank
    holds in all, from memory_termstat: a few index rows, not a count of thousands."""
    group, params = _termstat_group(agent, kinds)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT COALESCE(sum(df) FILTER (WHERE {group}), 0), COALESCE(sum(df), 0) "
            "FROM memory_termstat WHERE bank_id = %s AND term = ''",
            [*params, bank_id],
        )
        matching, total = cursor.fetchone()
        return int(matching), int(total)


_counts: dict[tuple, tuple[int, int, float]] = {}
COUNT_TTL_S = 10.0  # a big bank's counts are looked up again after this


def termstat_count_kept(bank_id: int, agents: list[str] | None, kinds: list[str] | None, *,
                        kept_above: int) -> tuple[int, int]:
    """termstat_count, kept COUNT_TTL_S in this process for a bank past `kept_above` memories (recall's
    EXACT_LIMIT): there a count a few seconds old only chooses between an exact scan and the index
    path (both right: the index path falls back to a scan when short), and the lookup was ~0.4 ms of
    a 5 ms search."""
    key = (bank_id, None if agents is None else tuple(agents), tuple(kinds or ()))
    now = time.monotonic()
    hit = _counts.get(key)
    if hit is not None and now - hit[2] < COUNT_TTL_S:
        return hit[0], hit[1]
    matching, total = termstat_count(bank_id, agents, kinds)
    if total > kept_above:
        if len(_counts) > 10_000:
            _counts.clear()
        _counts[key] = (matching, total, now)
    return matching, total
