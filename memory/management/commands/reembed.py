"""`manage.py reembed [--bank N] [--batch 256] [--limit N] [--restart]`: every memory's and key's vector
computed again with the configured embedding model (memory.embedding.reembed), with progress,
resumable: started again after it stopped, it goes on from the last batch it wrote. A model of
another size (WONDA_EMBEDDING_DIM) moves every bank and resizes the vector columns."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from memory import embedding
from memory.embedding.errors import EmbeddingError
from memory.embedding.reembed import BATCH, DimensionMismatch, Progress, reembed, state_path
from memory.models import MemoryBank


class Command(BaseCommand):
    help = "Re-embed memories and keys with the configured model (after changing it); resumable."

    def add_arguments(self, parser):
        parser.add_argument("--bank", type=int, help="only this bank (default: every bank)")
        parser.add_argument("--batch", type=int, default=BATCH, help="rows per batch (each one committed)")
        parser.add_argument("--limit", type=int, help="stop after this many rows; run again to go on")
        parser.add_argument("--restart", action="store_true", help="start from the first row, not where the last run stopped")

    def handle(self, *args, bank=None, batch=BATCH, limit=None, restart=False, **opts):
        if bank is not None and not MemoryBank.objects.filter(pk=bank).exists():
            raise CommandError(f"There is no memory bank {bank}.")
        if batch < 1 or (limit is not None and limit < 1):
            raise CommandError("--batch and --limit must be at least 1.")
        where = f"bank {bank}" if bank is not None else "every bank"
        if not restart and state_path(bank).exists():
            self.stdout.write(f"Resuming the re-embedding of {where} with {embedding.model_name()} where it stopped.")
        else:
            self.stdout.write(f"Re-embedding {where} with {embedding.model_name()}.")

        def report(p: Progress) -> None:
            self.stdout.write(f"{p.table}: {p.done:,} of {p.total:,} ({100 * p.done / max(p.total, 1):.0f} %), up to #{p.last_id}")

        try:
            state = reembed(bank_id=bank, batch=batch, limit=limit, restart=restart, report=report)
        except DimensionMismatch as exc:
            raise CommandError(str(exc)) from None
        except EmbeddingError as exc:
            raise CommandError(f"The embedding model could not be reached ({exc}); run again to go on from here.") from None
        if state["done"] and state["resized"]:
            self.stdout.write(self.style.SUCCESS(
                f"Done: {where} re-embedded with {embedding.model_name()}; the tables now hold {state['size']}-d vectors. "
                "Restart the workers and the web server with the new settings; big banks' indexes are being rebuilt."))
        elif state["done"]:
            self.stdout.write(self.style.SUCCESS(f"Done: {where} re-embedded with {embedding.model_name()}."))
        else:
            self.stdout.write("Stopped after --limit rows; run the same command again to go on.")
