"""`manage.py evaluate_retrieval FILE [--k 1 5 10 20] [--scoring NAME]`: recall@k of query_memory on
LoCoMo-format conversations, beside plain cosine; the last line is JSON.

Stages can be switched off for an ablation: --lexical-weight 0, --speaker-boost 0, --no-context-keys.
Query enhancement is switched on with --enhance context temporal synonyms (any of them; the
conversation's last line is the context); --calibrate fits the confidence scale the tools answer.
"""

from __future__ import annotations

import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from django.test.utils import override_settings

from memory.measuring.evaluation import CATEGORIES, evaluate
from memory.recalling.scoring import DEFAULT_SCORING, SCORING_PRESETS, SIMILARITY
from core.migrations_state import unapplied_migrations


class Command(BaseCommand):
    help = "Recall@k of query_memory on a LoCoMo-format file (one fresh bank per conversation); last line is JSON."

    def add_arguments(self, parser):
        parser.add_argument("file")
        parser.add_argument("--k", type=int, nargs="+", default=[1, 5, 10, 20])
        parser.add_argument("--scoring", default=DEFAULT_SCORING, choices=list(SCORING_PRESETS))
        parser.add_argument("--lexical-weight", type=float, default=None, help="override WONDA_RETRIEVAL_LEXICAL_WEIGHT")
        parser.add_argument("--speaker-boost", type=float, default=None, help="override WONDA_RETRIEVAL_SPEAKER_BOOST")
        parser.add_argument("--feedback", type=float, default=None,
                            help="override WONDA_RETRIEVAL_FEEDBACK_WEIGHT (0: no pseudo-relevance feedback)")
        parser.add_argument("--no-context-keys", action="store_true", help="capture without the in-reply-to key")
        parser.add_argument("--no-fusion", action="store_true", help="query_memory ranks by the scoring preset alone")
        parser.add_argument("--enhance", nargs="+", default=[], choices=["context", "temporal", "synonyms"],
                            help="query enhancement, as a simulation's options switch it on")
        parser.add_argument("--calibrate", action="store_true",
                            help="fit the confidence scale on (similarity, is-evidence) pairs of the answers")
        parser.add_argument("--split", action="store_true",
                            help="also print each conversation's figures, overall and per category")
        parser.add_argument("--fusion-exact-limit", type=int, default=None,
                            help="override WONDA_RETRIEVAL_FUSION_EXACT_LIMIT (0: every search takes the index path)")

    def handle(self, *args, **opts):
        unapplied = unapplied_migrations()
        if unapplied:
            raise CommandError(f"this database is not set up yet ({len(unapplied)} migrations not applied): "
                               "run `manage.py migrate` (or `make run` once), then this command again")
        path = Path(opts["file"])
        try:
            samples = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise CommandError(f"cannot read {path}: {exc}") from exc
        if isinstance(samples, dict):
            samples = [samples]
        if any(k <= 0 for k in opts["k"]):
            raise CommandError("--k values must be positive")
        overrides = {}
        if opts["lexical_weight"] is not None:
            overrides["RETRIEVAL_LEXICAL_WEIGHT"] = opts["lexical_weight"]
        if opts["speaker_boost"] is not None:
            overrides["RETRIEVAL_SPEAKER_BOOST"] = opts["speaker_boost"]
        if opts["feedback"] is not None:
            overrides["RETRIEVAL_FEEDBACK_WEIGHT"] = opts["feedback"]
        if opts["no_context_keys"]:
            overrides["RETRIEVAL_CONTEXT_KEYS"] = False
        if opts["no_fusion"]:
            overrides["RETRIEVAL_FUSION"] = False
        if opts["fusion_exact_limit"] is not None:
            overrides["RETRIEVAL_FUSION_EXACT_LIMIT"] = opts["fusion_exact_limit"]
        with override_settings(**overrides):
            figures = evaluate(samples, ks=opts["k"], scoring=opts["scoring"], log=self.stderr.write,
                               enhance={name: True for name in opts["enhance"]}, calibrate=opts["calibrate"])
        out = self.stdout.write
        ks = list(figures["recall"])
        out(f"{figures['questions']} questions, scoring {opts['scoring']}, {figures['seconds']}s")
        out(f"{'':16}" + "".join(f"{'R@' + k:>8}" for k in ks))
        out(f"{'query_memory':16}" + "".join(f"{figures['recall'][k]:>8.3f}" for k in ks))
        out(f"{'plain cosine':16}" + "".join(f"{figures['cosine'][k]:>8.3f}" for k in ks))
        for cat, row in figures["by_category"].items():
            cos = figures["cosine_by_category"][cat]
            out(f"{CATEGORIES.get(cat, 'category ' + cat):16}" + "".join(f"{row[k]:>8.3f}" for k in ks)
                + "   cosine " + " ".join(f"{cos[k]:.3f}" for k in ks))
        if opts["split"]:
            for name, conv in figures["by_conversation"].items():
                out(f"{name} ({conv['questions']} questions)")
                out(f"{'  all':16}" + "".join(f"{conv['recall'][k]:>8.3f}" for k in ks))
                for cat, row in conv["by_category"].items():
                    out(f"{'  ' + CATEGORIES.get(cat, cat):16}" + "".join(f"{row[k]:>8.3f}" for k in ks))
        for name, row in figures.get("enhancement", {}).get("applied", {}).items():
            out(f"{name}: changed {row['questions']} questions, R@10 there {row['without']:.3f} -> {row['with']:.3f}")
        if cal := figures.get("calibration"):
            out(f"calibration: {cal['relevant_pairs']} relevant pairs (mean similarity {cal['relevant_mean']}), "
                f"{cal['irrelevant_pairs']} irrelevant ({cal['irrelevant_mean']}); "
                f"fit slope {cal['slope']}, intercept {cal['intercept']}")
            for row in cal["bins"]:
                out(f"  similarity {row[SIMILARITY]}: {row['pairs']:>6} pairs, relevant (equal priors) "
                    f"{row['relevant']:.3f}, calibrated now {row['calibrated']:.3f}")
        out(json.dumps(figures, separators=(",", ":")))
