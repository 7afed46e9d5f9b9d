"""bench_memory's work: real model, real database, each bank inside a table ≥ 3× its size in others.

Big banks are filled in SQL from real embeddings of a few thousand generated sentences, mixed and
re-normalised (pgvector's + and l2_normalize), so loading 400k rows takes seconds, not an hour of
model time; the seeding rate is measured separately on real text through the real pipeline.
"""

from __future__ import annotations

import random
import resource
import statistics
import time

import numpy as np
from django.core.management import call_command
from django.db import connection, connections

from memory import embedding
from memory.embedding import cache
from memory.forming.seed_specs import character_specs, scenario_specs
from memory.forming.seeding import seed_bank
from memory.forming.sheets import CharacterSheet, ScenarioSheet
from memory.services.store import SIMILARITY_THRESHOLD
from memory.models import EmbeddingCache
from memory.recalling.filters import MemoryFilter
from memory.recalling.indexing import agent_index_prefix, index_names
from memory.recalling.search import recall
from memory.services import bank_create
from memory.recalling.scoring import SIMILARITY
from core import embedded

FIRST = ["Ada", "Bram", "Cleo", "Dario", "Esme", "Farid", "Greta", "Hugo", "Ines", "Jonas", "Kira", "Lev", "Mina",
         "Nico", "Odile", "Pavel", "Quinn", "Rosa", "Soren", "Tamsin", "Ugo", "Vera", "Wren", "Xavi", "Yara", "Zeno"]
ROLES = ["harbour pilot", "night-shift nurse", "retired judge", "bakery owner", "museum restorer", "ferry mechanic",
         "city councillor", "radio host", "orchard keeper", "locksmith", "opera prompter", "glassblower"]
PLACES = ["a fishing village", "the old mill district", "a mountain monastery", "a border town", "the river delta",
          "a crowded tenement", "a lighthouse island", "the university quarter", "a vineyard estate", "a mining camp"]
EVENTS = ["lost a brother to the winter storm", "won a chess tournament at twelve", "ran away with a travelling circus",
          "burned down the family workshop by accident", "found a box of letters under the floorboards",
          "taught illiterate neighbours to read", "testified against a corrupt mayor", "nursed soldiers through a fever",
          "spent a year sailing alone", "inherited debts instead of land", "learned three languages from sailors",
          "was betrayed by a business partner"]
FEELINGS = ["still distrusts", "quietly admires", "has never forgiven", "laughs about", "keeps thinking about",
            "rarely speaks of", "is proud of", "feels guilty about"]
OBJECTS = ["the sea", "authority", "old friends", "money", "promises", "strangers", "music", "silence", "books", "rain"]
TRAITS = ["stubborn", "curious", "patient", "reckless", "warm", "guarded", "witty", "meticulous", "restless", "kind"]
SKILLS = ["navigation", "cooking", "bookkeeping", "first aid", "carpentry", "persuasion", "singing", "lockpicking"]
VALUES = ["loyalty", "truth", "freedom", "family", "craft", "justice", "courage", "thrift"]


def sentences(rng: random.Random, name: str, n: int) -> list[str]:
    out = []
    for _ in range(n):
        out.append(rng.choice([
            f"{name} grew up in {rng.choice(PLACES)} and {rng.choice(EVENTS)}.",
            f"At {rng.randint(8, 60)}, {name} {rng.choice(EVENTS)}, which changed everything.",
            f"{name} {rng.choice(FEELINGS)} {rng.choice(OBJECTS)} since moving to {rng.choice(PLACES)}.",
            f"People in {rng.choice(PLACES)} remember that {name} {rng.choice(EVENTS)}.",
            f"Every {rng.choice(['spring', 'winter', 'harvest', 'holiday'])} {name} returns to {rng.choice(PLACES)} "
            f"because {name.split()[0]} {rng.choice(FEELINGS)} {rng.choice(OBJECTS)}.",
        ]))
    return out


def make_cast(rng: random.Random, index: int, size: int) -> tuple[list[CharacterSheet], ScenarioSheet]:
    cast = []
    for j in range(size):
        name = f"{rng.choice(FIRST)} {chr(65 + (index * size + j) % 26)}{index}-{j}"
        cast.append(CharacterSheet(
            name=name, role=rng.choice(ROLES), archetype=rng.choice(["The Skeptic", "The Caretaker", "The Rebel", "The Sage"]),
            description=" ".join(sentences(rng, name, 2)), background=" ".join(sentences(rng, name, 9)),
            communication_style=f"{rng.choice(TRAITS).capitalize()} and {rng.choice(TRAITS)}; speaks of {rng.choice(OBJECTS)}.",
            decision_style=f"Decides by {rng.choice(['instinct', 'counting costs', 'asking elders', 'sleeping on it'])}.",
            traits=rng.sample(TRAITS, 3), skills=rng.sample(SKILLS, 3), values=rng.sample(VALUES, 3),
            goals=[f"get to {rng.choice(PLACES)} before {rng.choice(['dawn', 'the storm', 'the wedding'])}"],
        ))
    scenario = ScenarioSheet(title=f"Gathering {index}", location=rng.choice(PLACES), atmosphere=rng.choice(FEELINGS),
                             time_of_day=rng.choice(["dawn", "noon", "dusk", "midnight"]),
                             description=" ".join(sentences(rng, cast[0].name, 2)))
    return cast, scenario


def use_database(name: str) -> None:
    """Point this process at a benchmark's own embedded database (created and migrated when missing)."""
    embedded.postgres_settings(name)
    connections["default"].close()
    connections["default"].settings_dict["NAME"] = name
    call_command("migrate", verbosity=0)


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def measure_seeding(log, *, casts: int, cast_size: int) -> dict:
    rng = random.Random(1)
    plans = [make_cast(rng, i, cast_size) for i in range(casts)]
    texts = []
    for cast, scenario in plans:
        specs = scenario_specs(scenario) + [s for sheet in cast for s in character_specs(sheet, cast)]
        texts += [s.content for s in specs] + [k for s in specs for k in s.keys]
    unique = list(dict.fromkeys(texts))
    model = embedding.local.load_model()
    # Same sentences and the same batch size as the pipeline's model calls (so both time the same
    # work), warm model for both.
    model.encode(unique[:64], batch_size=cache.ENCODE_BATCH, normalize_embeddings=True, show_progress_bar=False)  # warm
    started = time.perf_counter()
    vectors = model.encode(unique, batch_size=cache.ENCODE_BATCH, normalize_embeddings=True, show_progress_bar=False)
    encode_s = time.perf_counter() - started

    EmbeddingCache.objects.filter(model=embedding.model_name()).delete()  # bench database only: start cold
    cache.clear_local()
    banks, memories = [], 0
    started = time.perf_counter()
    for i, (cast, scenario) in enumerate(plans):
        bank = bank_create(name=f"bench seed {i}")
        memories += seed_bank(bank=bank, characters=cast, scenario=scenario)["memories"]
        banks.append(bank)
    seed_s = time.perf_counter() - started
    seed_rate = memories / seed_s
    # Raw encoding again, after the seeding: the rate the seeding is compared with is the mean of the
    # two, so a machine that slows down or speeds up meanwhile (a shared VM) does not tilt the ratio.
    started = time.perf_counter()
    model.encode(unique, batch_size=cache.ENCODE_BATCH, normalize_embeddings=True, show_progress_bar=False)
    encode_s = (encode_s + time.perf_counter() - started) / 2
    encode_rate = len(unique) / encode_s
    log(f"raw model.encode: {len(unique)} sentences in {encode_s:.1f}s = {encode_rate:.0f}/s (mean of before and after seeding)")
    log(f"seed pipeline: {memories} memories ({len(unique)} distinct texts) in {seed_s:.1f}s = {seed_rate:.0f}/s")
    return {"encode_rate": encode_rate, "seed_rate": seed_rate, "base_vectors": np.asarray(vectors, dtype=np.float32),
            "base_texts": unique,
            "seed_banks": banks, "casts": plans}


AGENTS = [f"agent{i}" for i in range(8)]
KINDS = ["episodic"] * 6 + ["semantic"] * 2 + ["character", "observation"]


def fill_bank(bank_id: int, n: int, base_count: int, seed: int) -> None:
    """n memories made in SQL from three random base vectors (a + w·b + w²·c, re-normalised)."""
    with connection.cursor() as cur:
        cur.execute("SELECT setseed(%s)", [seed / 1000])
        cur.execute(
            f"""
            INSERT INTO memory_memory (bank_id, agent, kind, category, about, turn, speaker, content, embedding,
                importance, emotional_valence, participants, location, tags, related_goals, access_count,
                decay_rate, source, status, metadata, created_at, updated_at)
            SELECT %s, (%s::text[])[1 + (g * 7 + {seed}) %% 8], (%s::text[])[1 + (g * 13 + {seed}) %% 10], 'dialogue', '',
                   (g * 31 + {seed}) %% 500, '', 'bench memory ' || g,
                   l2_normalize(a.v + b.v * w.half + c.v * w.quarter),
                   ((g * 17 + {seed}) %% 11)::float8, 0, '{{}}', '',
                   CASE WHEN g %% 5 = 0 THEN ARRAY['red'] WHEN g %% 7 = 0 THEN ARRAY['red', 'blue'] ELSE ARRAY['blue'] END::varchar(50)[],
                   '{{}}', 0, 0.01, CASE WHEN g %% 3 = 0 THEN 'gifted' ELSE 'earned' END, 'active', '{{}}', now(), now()
              FROM generate_series(1::bigint, %s::bigint) g
             CROSS JOIN LATERAL (SELECT floor(random() * {base_count})::int + 0 * g AS ia,
                                        floor(random() * {base_count})::int + 0 * g AS ib,
                                        floor(random() * {base_count})::int + 0 * g AS ic,
                                        floor(random() * 4)::int + 0 * g AS iw) r
              JOIN bench_base a ON a.i = r.ia
              JOIN bench_base b ON b.i = r.ib
              JOIN bench_base c ON c.i = r.ic
              JOIN bench_weights w ON w.i = r.iw
            """,
            [bank_id, AGENTS, KINDS, n],
        )


def conversation_lines(rng: random.Random, per_speaker: int = 700) -> list[str]:
    """Distinct lines for fill_conversation: about 2,800 sentences in the four speakers' names."""
    return list(dict.fromkeys(line for name in FIRST[:4] for line in sentences(rng, name, per_speaker)))


def fill_conversation(bank_id: int, n: int, first: int, count: int, *, listener: str = "agent0", seed: int = 0) -> None:
    """n episodic memories of one listener, as remember_utterance stores them: "X said: …" with a
    real sentence (bench_base rows first … first + count − 1), turns in order, and its reply keys
    (the line before and this one; the last three lines). Sentences repeat when n > count, so each
    vector is the sentence's real one plus 9% of another's, re-normalised (exact duplicates would
    make a degenerate HNSW graph); a key's vector is its lines' sum, normalised."""
    with connection.cursor() as cur:
        cur.execute(
            """
            INSERT INTO memory_memory (bank_id, agent, kind, category, about, turn, speaker, content, embedding,
                importance, emotional_valence, participants, location, tags, related_goals, access_count,
                decay_rate, source, status, metadata, created_at, updated_at)
            SELECT %s, %s, 'episodic', 'dialogue', '', g, s.name, s.name || ' said: ' || b.t,
                   l2_normalize(b.v + o.v * w.quarter), 5.0, 0,
                   ARRAY[s.name, %s]::varchar(100)[], '', '{}'::varchar(50)[], '{}', 0, 0.01, 'earned', 'active', '{}',
                   now(), now()
              FROM generate_series(1, %s) g
              JOIN bench_base b ON b.i = %s + (g * 7919 + %s) %% %s
              JOIN bench_base o ON o.i = %s + (g * 104729 + %s) %% %s
              JOIN bench_weights w ON w.i = 0
             CROSS JOIN LATERAL (SELECT (%s::text[])[1 + (g + %s) %% 4] AS name) s
            """,
            [bank_id, listener, listener, n, first, seed, count, first, seed + 1, count, FIRST[:4], seed],
        )
        # Statistics first: on a fresh database (none yet for memory_memory) the planner joins the
        # lines with themselves by nested loop below, hours at 10,000 lines instead of a second.
        cur.execute("ANALYZE memory_memory")
        # Capture's reply keys (memory.recalling.episode_keys): the pair, a key of both lines, and
        # the window of three, a key of all three.
        cur.execute(
            """
            INSERT INTO memory_memorykey (memory_id, query, embedding)
            SELECT o.id, left(p.content || ' ' || m.content, 300), l2_normalize(p.embedding + m.embedding)
              FROM memory_memory m JOIN memory_memory p ON p.bank_id = m.bank_id AND p.agent = m.agent AND p.turn = m.turn - 1
             CROSS JOIN LATERAL (VALUES (m.id), (p.id)) o(id)
             WHERE m.bank_id = %s
            ON CONFLICT DO NOTHING
            """,
            [bank_id],
        )
        cur.execute(
            """
            INSERT INTO memory_memorykey (memory_id, query, embedding)
            SELECT o.id, left(q.content || ' ' || p.content || ' ' || m.content, 300),
                   l2_normalize(q.embedding + p.embedding + m.embedding)
              FROM memory_memory m
              JOIN memory_memory p ON p.bank_id = m.bank_id AND p.agent = m.agent AND p.turn = m.turn - 1
              JOIN memory_memory q ON q.bank_id = m.bank_id AND q.agent = m.agent AND q.turn = m.turn - 2
             CROSS JOIN LATERAL (VALUES (m.id), (p.id), (q.id)) o(id)
             WHERE m.bank_id = %s
            ON CONFLICT DO NOTHING
            """,
            [bank_id],
        )


def load_base(vectors: np.ndarray, texts: list[str]) -> None:
    with connection.cursor() as cur:
        cur.execute("DROP TABLE IF EXISTS bench_base; DROP TABLE IF EXISTS bench_weights")
        dim = int(vectors.shape[1])
        cur.execute(f"CREATE TABLE bench_base (i int PRIMARY KEY, v vector({dim}), t text)")
        cur.execute(f"CREATE TABLE bench_weights (i int PRIMARY KEY, half vector({dim}), quarter vector({dim}))")
        for start in range(0, len(vectors), 500):
            rows = [(start + j, "[" + ",".join(f"{x:.6f}" for x in v) + "]", texts[start + j])
                    for j, v in enumerate(vectors[start:start + 500])]
            cur.executemany("INSERT INTO bench_base VALUES (%s, %s::vector, %s)", rows)
        dim = vectors.shape[1]
        for i, w in enumerate([0.3, 0.5, 0.7, 0.9]):
            cur.execute("INSERT INTO bench_weights VALUES (%s, %s::vector, %s::vector)",
                        [i, "[" + ",".join([str(w)] * dim) + "]", "[" + ",".join([str(w * w)] * dim) + "]"])


def filtered_queries(rng: random.Random) -> list[MemoryFilter]:
    agent = rng.choice(AGENTS)
    return [
        MemoryFilter(),
        MemoryFilter(agent=agent),
        MemoryFilter(agent=agent, kinds=["episodic"]),
        MemoryFilter(kinds=["semantic", "character"], min_importance=6),
        MemoryFilter(tags=["red"], sources=["earned"]),
        MemoryFilter(min_turn=100, max_turn=300, tags=["red", "blue"], tags_mode="all"),
    ]


def matching(bank, flt: MemoryFilter, cap: int) -> int:
    where, params = flt.where(bank.pk)
    with connection.cursor() as cur:
        cur.execute(f"SELECT count(*) FROM (SELECT 1 FROM memory_memory m WHERE {where} LIMIT %s) s", [*params, cap])
        return cur.fetchone()[0]


def measure_bank(bank, queries: np.ndarray, *, k: int = 10, latency_n: int = 200, exact_n: int = 60) -> dict:
    rng = random.Random(bank.pk)
    latencies = []
    for i in range(latency_n):
        flt = filtered_queries(rng)[i % 3]  # bank-wide, one agent, one agent's episodes
        started = time.perf_counter()
        recall(bank, query_vector=queries[i % len(queries)], filter=flt, k=k)
        latencies.append((time.perf_counter() - started) * 1000)
    # Seed 004's recall as the API runs it: the same filters with a tag filter, and the similarity
    # floor on what comes back (memory.services.store.recall_filtered, its access log aside).
    tagged: dict[str, list[float]] = {"any": [], "any_strict": []}
    for i in range(latency_n):
        for mode, times in tagged.items():
            flt = filtered_queries(rng)[i % 3]
            flt.tags, flt.tags_mode = ["red"], mode
            started = time.perf_counter()
            found = recall(bank, query_vector=queries[i % len(queries)], filter=flt, k=k)
            [r for r in found if r.components.get(SIMILARITY, 0.0) >= SIMILARITY_THRESHOLD]
            times.append((time.perf_counter() - started) * 1000)
    recalls, hnsw_recalls, short = [], [], 0
    for i in range(exact_n):
        flt = filtered_queries(rng)[i % 6]
        q = queries[(i * 7 + 3) % len(queries)]
        got = recall(bank, query_vector=q, filter=flt, k=k)
        truth = recall(bank, query_vector=q, filter=flt, k=k, exact=True)
        if len(got) < min(k, matching(bank, flt, k)):
            short += 1
        if truth:
            recalls.append(len({r.memory.pk for r in got} & {r.memory.pk for r in truth}) / len(truth))
            # The index path alone, forced even where recall() would scan exactly: how good is HNSW here?
            forced = recall(bank, query_vector=q, filter=flt, k=k, exact=False)
            hnsw_recalls.append(len({r.memory.pk for r in forced} & {r.memory.pk for r in truth}) / len(truth))
    return {"p50": pct(latencies, 50), "p95": pct(latencies, 95), "tagged_p50": pct(tagged["any"], 50),
            "strict_p50": pct(tagged["any_strict"], 50), "recall": statistics.fmean(recalls) if recalls else 1.0,
            "hnsw_recall": statistics.fmean(hnsw_recalls) if hnsw_recalls else 1.0, "short": short}


def index_mb(bank_id: int) -> float:
    """Disk size of a bank's own vector indexes (memories, keys, and its big agents'), 0 when it has none."""
    with connection.cursor() as cur:
        cur.execute("SELECT coalesce(sum(pg_relation_size(c.oid)), 0) FROM pg_class c "
                    "WHERE c.relname = ANY(%s) OR c.relname LIKE %s",
                    [list(index_names(bank_id)), agent_index_prefix(bank_id)])
        return round(float(cur.fetchone()[0]) / 2**20, 1)


def table_mb() -> float:
    """The memories and keys tables on disk, every index and TOAST included."""
    with connection.cursor() as cur:
        cur.execute("SELECT pg_total_relation_size('memory_memory') + pg_total_relation_size('memory_memorykey')")
        return round(float(cur.fetchone()[0]) / 2**20, 1)


def process_rss_mb() -> float:
    """The most memory this process held (the model, the query vectors, the result rows)."""
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
