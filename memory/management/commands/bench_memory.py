"""`manage.py bench_memory [--sizes 1000,10000,100000]`: retrieval and seeding figures; last line is JSON."""

from __future__ import annotations

import json
import os
import random
import statistics
import time

import numpy as np
from django.conf import settings
from django.core.management.base import BaseCommand
from django.db import connection

from memory import embedding
from memory.embedding import cache
from memory.measuring import bench
from memory.models import MemoryBank
from memory.recalling.indexing import build_bank_index, drop_bank_index
from memory.recalling.tools import ToolContext, call_tool, search_memory
from memory.services import bank_create


TOOL_BANK_SIZE = 10_000  # query_memory p50 ≤ 25 ms with 10,000 memories in a bank
# The table holds 3× the largest bank (other banks' rows around it, as in a shared database), but at
# most the largest bank plus 200,000 rows: a 1,000,000 bank then sits in 1.2 M rows, not 3 M (~7 GB).
OTHER_ROWS_CAP = 200_000


class Command(BaseCommand):
    help = "Benchmark seeding and retrieval with the real model and database (prints a JSON last line)."

    def add_arguments(self, parser):
        parser.add_argument("--sizes", default="1000,10000,100000")
        parser.add_argument("--casts", type=int, default=12, help="casts seeded through the real pipeline")
        parser.add_argument("--cast-size", type=int, default=4)
        parser.add_argument("--database", default="wonda_bench",
                            help="embedded database to use (created, migrated, emptied); ignored with --in-place")
        parser.add_argument("--in-place", action="store_true",
                            help="use the configured database (bench banks are removed afterwards; slower loading)")

    def log(self, text: str) -> None:
        self.stderr.write(text)
        self.stderr.flush()

    def handle(self, *args, **opts):
        sizes = [int(s) for s in opts["sizes"].split(",") if s.strip()]
        dedicated = not opts["in_place"] and not os.environ.get("DATABASE_URL")
        if dedicated:
            bench.use_database(opts["database"])
            with connection.cursor() as cur:
                cur.execute("TRUNCATE memory_memorybank, memory_memory, memory_memorykey, memory_memory_evidence, memory_termstat CASCADE")
        self.log(f"database {connection.settings_dict['NAME']} ({'dedicated' if dedicated else 'in place'}); sizes {sizes}")
        total_started = time.perf_counter()
        try:
            figures = self.run_bench(sizes, opts, dedicated)
        finally:
            for bank_id in MemoryBank.objects.filter(name__startswith="bench ").values_list("pk", flat=True):
                drop_bank_index(bank_id)
            if dedicated:  # give the disk back (~2 GB at the default sizes)
                with connection.cursor() as cur:
                    cur.execute("TRUNCATE memory_memorybank, memory_memory, memory_memorykey, memory_memory_evidence, memory_termstat CASCADE")
                    cur.execute("DROP TABLE IF EXISTS bench_base; DROP TABLE IF EXISTS bench_weights")
            else:
                self.cleanup()
        figures["total_s"] = round(time.perf_counter() - total_started, 1)
        self.print_table(figures)
        self.stdout.write(json.dumps(figures, separators=(",", ":")))

    def run_bench(self, sizes: list[int], opts, dedicated: bool) -> dict:
        seeding = bench.measure_seeding(self.log, casts=opts["casts"], cast_size=opts["cast_size"])
        base = seeding["base_vectors"]
        banks, conversation, load_s, filler = self.load(sizes, seeding)
        built, table_rows, index_s = self.index(banks, conversation)
        self.log(f"loaded {table_rows} rows in {load_s:.1f}s (filler {filler}); index + analyze {index_s:.1f}s")
        per_size = self.measure_banks(banks, base)
        tool_ms, agree = self.measure_query_memory(conversation)
        canonical_ms = self.measure_query_self(seeding)
        return {
            "encode_rate": round(seeding["encode_rate"], 1),
            "seed_rate": round(seeding["seed_rate"], 1),
            "seed_ratio": round(seeding["seed_rate"] / seeding["encode_rate"], 3),
            "recall_p50_ms": {str(s): round(v["p50"], 2) for s, v in per_size.items()},
            "recall_p95_ms": {str(s): round(v["p95"], 2) for s, v in per_size.items()},
            "tagged_p50_ms": {str(s): round(v["tagged_p50"], 2) for s, v in per_size.items()},
            "strict_p50_ms": {str(s): round(v["strict_p50"], 2) for s, v in per_size.items()},
            "tool_p50_ms": round(statistics.median(tool_ms), 2),
            "tool_p95_ms": round(bench.pct(tool_ms, 95), 2),
            "tool_vs_exact": round(statistics.fmean(agree), 4),
            "canonical_p50_ms": round(statistics.median(canonical_ms), 2),
            "recall_vs_exact": {str(s): round(v["recall"], 4) for s, v in per_size.items()},
            "short": sum(v["short"] for v in per_size.values()),
            "hnsw_only_recall": {str(s): round(v["hnsw_recall"], 4) for s, v in per_size.items()},
            "table_rows": table_rows,
            "index_build_s": {str(s): round(built.get(b.pk, 0.0), 1) for s, b in banks.items()},
            "index_mb": {str(s): bench.index_mb(b.pk) for s, b in banks.items()},
            "table_mb": bench.table_mb(),
            "process_rss_mb": bench.process_rss_mb(),
        }

    def load(self, sizes: list[int], seeding: dict) -> tuple[dict, MemoryBank, float, int]:
        """The banks of each size, query_memory's conversation and the filler around them, in SQL;
        with the seconds it took and the filler's rows."""
        base = seeding["base_vectors"]
        lines = bench.conversation_lines(random.Random(7))
        started = time.perf_counter()
        line_vectors = embedding.encode(lines, batch_size=cache.ENCODE_BATCH)
        self.log(f"{len(lines)} conversation lines embedded in {time.perf_counter() - started:.1f}s")
        bench.load_base(np.concatenate([base, line_vectors]), seeding["base_texts"] + lines)
        seeded = sum(MemoryBank.objects.get(pk=b.pk).memories.count() for b in seeding["seed_banks"])
        table_target = min(3 * max(sizes), max(sizes) + OTHER_ROWS_CAP)
        filler = max(0, table_target - sum(sizes) - seeded)
        started = time.perf_counter()
        banks = {}
        for i, size in enumerate(sizes):
            banks[size] = bank_create(name=f"bench size {size}")
            bench.fill_bank(banks[size].pk, size, len(base), seed=11 + i)
        # query_memory's bank: 10,000 lines of a conversation, every one a memory of the searching
        # agent (the worst case: each is a candidate), with its in-reply-to key.
        conversation = bank_create(name=f"bench conversation {TOOL_BANK_SIZE}")
        bench.fill_conversation(conversation.pk, TOOL_BANK_SIZE, len(base), len(lines), listener="agent0")
        filler -= TOOL_BANK_SIZE
        if filler > 0:
            bench.fill_bank(bank_create(name="bench filler").pk, filler, len(base), seed=97)
        return banks, conversation, time.perf_counter() - started, filler

    def index(self, banks: dict, conversation: MemoryBank) -> tuple[dict[int, float], int, float]:
        """Statistics, the big banks' own indexes and a checkpoint: the seconds each index took, the
        table's rows, and the seconds for statistics and indexes together."""
        started = time.perf_counter()
        with connection.cursor() as cur:
            cur.execute("VACUUM ANALYZE memory_memory")
            cur.execute("VACUUM ANALYZE memory_memorykey")
        # What the first big search of a bank asks a worker for (memory.recalling.indexing), done here.
        built: dict[int, float] = {}
        for bank in [conversation] + [b for size, b in banks.items() if size > settings.RETRIEVAL_FUSION_EXACT_LIMIT]:
            indexed_at = time.perf_counter()
            build_bank_index(bank.pk)
            built[bank.pk] = time.perf_counter() - indexed_at
            self.log(f"{bank.name}: its own vector indexes built in {built[bank.pk]:.1f}s")
        with connection.cursor() as cur:
            cur.execute("SELECT count(*) FROM memory_memory")
            table_rows = cur.fetchone()[0]
        index_s = time.perf_counter() - started
        started = time.perf_counter()
        with connection.cursor() as cur:
            # What the load left to write is written now, not by the checkpointer during the timed
            # searches that follow (after the default sizes it takes ~0.2 s: little is left by then).
            cur.execute("CHECKPOINT")
        self.log(f"checkpoint {time.perf_counter() - started:.1f}s")
        return built, table_rows, index_s

    def measure_banks(self, banks: dict, base: np.ndarray) -> dict:
        """recall() over each bank size: latency, and the top 10 against the exact scan."""
        rng = np.random.default_rng(5)
        picks = base[rng.integers(0, len(base), size=(300, 2))]
        queries = picks[:, 0] + 0.7 * picks[:, 1] + 0.05 * rng.normal(size=(300, base.shape[1]))
        queries = (queries / np.linalg.norm(queries, axis=1, keepdims=True)).astype(np.float32)
        per_size = {}
        for size, bank in banks.items():
            started = time.perf_counter()
            per_size[size] = bench.measure_bank(bank, queries)
            self.log(f"size {size}: {per_size[size]} ({time.perf_counter() - started:.1f}s)")
        return per_size

    def measure_query_memory(self, conversation: MemoryBank) -> tuple[list[float], list[float]]:
        """query_memory over the conversation: each call's milliseconds, and its top 5 against the exact scan's."""
        rng = random.Random(99)
        texts = [line for name in bench.FIRST[:4] for line in bench.sentences(rng, name, 30)]
        rng.shuffle(texts)
        ctx = ToolContext(bank=conversation, agent="agent0", current_turn=TOOL_BANK_SIZE + 1)
        for text in texts[:5]:  # warm: model, plans, buffers
            call_tool("query_memory", {"query": text}, context=ctx)
        # Timed first, compared after, as measure_bank does: the exact scan that checks an answer reads
        # 10,000 lines and 50,000 keys, and run between two timed searches it left the next one to
        # start from cold caches (~1–2 ms more), a cost no agent's turn has.
        tool_ms, answers = [], []
        for text in texts:
            result = call_tool("query_memory", {"query": text}, context=ctx)
            assert not result.error, result.error
            tool_ms.append(result.latency_ms)
            answers.append([r.memory.pk for r in result.results])
        agree = []
        for text, got in zip(texts, answers):
            # The same search over every candidate: does the index path find the same five?
            _flt, exact = search_memory(ToolContext(bank=conversation, agent="agent0", current_turn=TOOL_BANK_SIZE + 1),
                                        text, exact=True)
            agree.append(len(set(got) & {r.memory.pk for r in exact}) / max(len(exact), 1))
        self.log(f"query_memory at {TOOL_BANK_SIZE}: p50 {statistics.median(tool_ms):.1f} ms, "
                 f"p95 {bench.pct(tool_ms, 95):.1f} ms, top 5 vs exact scan {statistics.fmean(agree):.3f}")
        return tool_ms, agree

    def measure_query_self(self, seeding: dict) -> list[float]:
        """query_self's milliseconds on a seeded character: canonical queries, answered without the model."""
        seed_bank = seeding["seed_banks"][0]
        hero = seeding["casts"][0][0][0].name
        ctx = ToolContext(bank=seed_bank, agent=hero, current_turn=1)
        call_tool("query_self", {}, context=ctx)
        calls_before = cache.stats["model_calls"]
        canonical_ms = []
        for _ in range(100):
            result = call_tool("query_self", {}, context=ctx)
            assert result.response["memories"], result.response
            canonical_ms.append(result.latency_ms)
        assert cache.stats["model_calls"] == calls_before, "query_self called the model"
        return canonical_ms

    def print_table(self, f: dict) -> None:
        out = self.stdout.write
        out("")
        out(f"encode_rate   {f['encode_rate']:>10} sentences/s (raw model.encode)")
        out(f"seed_rate     {f['seed_rate']:>10} memories/s (real seeding pipeline)   seed_ratio {f['seed_ratio']}")
        out(f"tool_p50_ms   {f['tool_p50_ms']:>10} (query_memory incl. embedding, 10,000 lines of one agent; "
            f"p95 {f['tool_p95_ms']}, top 5 vs exact scan {f['tool_vs_exact']})")
        out(f"canonical_p50 {f['canonical_p50_ms']:>10} ms (query_self, cache, no model call)")
        out(f"table rows    {f['table_rows']:>10}   short results: {f['short']}   total {f['total_s']}s")
        out(f"table size    {f['table_mb']:>10} MB on disk (memories and keys, with their indexes); "
            f"this process {f['process_rss_mb']} MB resident at most")
        out("")
        out(f"{'bank size':>10} | {'p50 ms':>8} | {'p95 ms':>8} | {'tagged p50':>10} | {'strict p50':>10} | "
            f"{'recall@10 vs exact':>18} | "
            f"{'HNSW path alone':>15} | {'index build s':>13} | {'index MB':>8}")
        for size in f["recall_p50_ms"]:
            out(f"{int(size):>10,} | {f['recall_p50_ms'][size]:>8} | {f['recall_p95_ms'][size]:>8} | "
                f"{f['tagged_p50_ms'][size]:>10} | {f['strict_p50_ms'][size]:>10} | {f['recall_vs_exact'][size]:>18} | "
                f"{f['hnsw_only_recall'][size]:>15} | "
                f"{f['index_build_s'][size]:>13} | {f['index_mb'][size]:>8}")
        out("tagged p50 / strict p50: the same searches with seed 004's tag filter (tags [red], Any / AnyStrict) "
            "and its similarity floor")
        out("")

    def cleanup(self) -> None:
        with connection.cursor() as cur:
            cur.execute("DROP TABLE IF EXISTS bench_base; DROP TABLE IF EXISTS bench_weights")
            cur.execute("SELECT id FROM memory_memorybank WHERE name LIKE 'bench %%'")
            ids = [r[0] for r in cur.fetchall()]
            if ids:
                cur.execute("DELETE FROM memory_memorykey k USING memory_memory m WHERE k.memory_id = m.id AND m.bank_id = ANY(%s)", [ids])
                cur.execute("DELETE FROM memory_memory WHERE bank_id = ANY(%s)", [ids])
                cur.execute("DELETE FROM memory_memorybank WHERE id = ANY(%s)", [ids])
