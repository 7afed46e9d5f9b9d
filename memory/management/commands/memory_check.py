"""`manage.py memory_check [--repair]`: the memory store's integrity (memory.measuring.integrity), as a report."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from memory.measuring.integrity import memory_check


class Command(BaseCommand):
    help = "Find (and with --repair, fix) damaged memories, keys, BM25 statistics, stuck seeding and orphan indexes."

    def add_arguments(self, parser):
        parser.add_argument("--repair", action="store_true", help="fix what is found")

    def handle(self, *args, **opts):
        findings = memory_check(repair=opts["repair"])
        width = max(len(f.check) for f in findings)
        for f in findings:
            status = "ok" if not f.found else (f"{f.found} found, {f.fixed} fixed" if opts["repair"] else f"{f.found} found")
            line = f"{f.check:<{width}}  {status}"
            if f.detail:
                line += f"  ({', '.join(f.detail)}{', …' if f.found > len(f.detail) else ''})"
            self.stdout.write(line)
        damaged = sum(f.found for f in findings)
        if not damaged:
            self.stdout.write(self.style.SUCCESS("Nothing to mend."))
        elif opts["repair"]:
            self.stdout.write(self.style.SUCCESS(f"Mended {sum(f.fixed for f in findings)} of {damaged}."))
        else:
            self.stdout.write(self.style.WARNING(f"{damaged} problem(s): run with --repair to mend them."))
