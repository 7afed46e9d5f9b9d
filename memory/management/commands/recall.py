"""`manage.py recall --bank N --agent NAME "question"`: try retrieval and see why each result ranked."""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError

from memory.models import MemoryBank
from memory.recalling.filters import MemoryFilter
from memory.recalling.scoring import DEFAULT_SCORING, SCORING_PRESETS, SIMILARITY
from memory.recalling.search import recall


class Command(BaseCommand):
    help = "Print a bank's top memories for a question, with score components and the matched key."

    def add_arguments(self, parser):
        parser.add_argument("question")
        parser.add_argument("--bank", type=int, required=True, help="memory bank id")
        parser.add_argument("--agent", default=None, help="whose memories (blank: all)")
        parser.add_argument("--kind", action="append", dest="kinds", help="repeatable: episodic, character, scene…")
        parser.add_argument("--category", action="append", dest="categories")
        parser.add_argument("--about", default=None)
        parser.add_argument("--min-turn", type=int)
        parser.add_argument("--max-turn", type=int)
        parser.add_argument("--min-importance", type=float)
        parser.add_argument("--tag", action="append", dest="tags")
        parser.add_argument("-k", type=int, default=5)
        parser.add_argument("--scoring", choices=list(SCORING_PRESETS), default=DEFAULT_SCORING)
        parser.add_argument("--turn", type=int, default=None, help="current turn (recency)")
        parser.add_argument("--json", action="store_true", help="print JSON snapshots instead of a table")

    def handle(self, *args, **opts):
        bank = MemoryBank.objects.filter(pk=opts["bank"]).first()
        if bank is None:
            raise CommandError(f"no memory bank {opts['bank']}; banks: {list(MemoryBank.objects.values_list('pk', flat=True)[:20])}")
        flt = MemoryFilter(
            agent=opts["agent"], kinds=opts["kinds"], categories=opts["categories"], about=opts["about"],
            min_turn=opts["min_turn"], max_turn=opts["max_turn"], min_importance=opts["min_importance"], tags=opts["tags"],
        )
        results = recall(bank, opts["question"], filter=flt, k=opts["k"], scoring=opts["scoring"],
                         current_turn=opts["turn"])
        if opts["json"]:
            self.stdout.write(json.dumps([r.snapshot() for r in results], indent=2))
            return
        self.stdout.write(f'{len(results)} result(s) for "{opts["question"]}" in bank {bank.pk} ({opts["scoring"]})')
        for r in results:
            m = r.memory
            c = r.components
            via = repr(r.matched_key) if r.matched_key else "content"
            when = "" if m.turn is None else f" turn {m.turn}"
            self.stdout.write(
                f"{r.rank:>2}. score {r.score:.4f}  (sim {c[SIMILARITY]:.3f} · rec {c['recency']:.3f} · imp {c['importance']:.3f})"
                f"  [{m.agent or 'scene'}/{m.kind}/{m.category or '-'}{when}]  via {via}"
            )
            self.stdout.write(f"    {m.content[:200]}")
