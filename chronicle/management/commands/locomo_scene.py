"""Turn a LoCoMo conversation into a Wonda scene with probes (chronicle.locomo says how).

    manage.py locomo_scene FILE SAMPLE [-o OUT]

FILE is LoCoMo JSON (a list of samples, as the corpus's locomo10.json); SAMPLE is a sample_id
("conv-26") or its place in the list from 1. The scene goes to OUT (default: stdout), ready for
`manage.py evaluate_agents OUT` or the import page.
"""

from __future__ import annotations

import json
from pathlib import Path

from django.core.management import BaseCommand, CommandError

from chronicle.locomo import LocomoError, scene


class Command(BaseCommand):
    help = "Convert one LoCoMo conversation into a Wonda scene file: its lines as a script, its questions as probes."

    def add_arguments(self, parser) -> None:
        parser.add_argument("file", help="LoCoMo JSON: a list of samples")
        parser.add_argument("sample", help="a sample_id (conv-26) or the sample's place in the list, from 1")
        parser.add_argument("-o", "--output", default="", help="write the scene here (default: stdout)")
        parser.add_argument("--minutes-per-turn", type=float, default=1.0,
                            help="story minutes one line takes between the sessions' dates (default 1)")

    def handle(self, *args, file: str, sample: str, output: str, minutes_per_turn: float, **options) -> None:
        try:
            samples = json.loads(Path(file).read_text(encoding="utf-8"))
        except OSError as exc:
            raise CommandError(f"{file}: {exc.strerror or exc}") from None
        except ValueError as exc:
            raise CommandError(f"{file} is not JSON: {exc}") from None
        if not isinstance(samples, list):
            raise CommandError(f"{file}: expected a list of samples, as LoCoMo's locomo10.json holds.")
        ids = [str(s.get("sample_id", "")) for s in samples if isinstance(s, dict)]
        chosen = next((s for s in samples if isinstance(s, dict) and str(s.get("sample_id", "")) == sample), None)
        if chosen is None and sample.isdigit() and 1 <= int(sample) <= len(samples):
            chosen = samples[int(sample) - 1]
        if not isinstance(chosen, dict):
            raise CommandError(f"{file} has no sample {sample!r} (it has {', '.join(ids) or 'none'}, or 1–{len(samples)}).")
        try:
            data = scene(chosen, minutes_per_turn=minutes_per_turn)
        except LocomoError as exc:
            raise CommandError(f"{file}, sample {sample}: {exc}") from None
        text = json.dumps(data, ensure_ascii=False, indent=1)
        if output:
            Path(output).write_text(text + "\n", encoding="utf-8")
            self.stderr.write(f"{output}: {len(data['script'])} lines, {len(data['probes'])} probes, "
                              f"{data['settings']['stage_directions'].count(chr(10)) + 1} sessions.")
        else:
            self.stdout.write(text)
