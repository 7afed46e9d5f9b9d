from django.core.management import BaseCommand

from core import embedded


class Command(BaseCommand):
    help = "Stop the embedded PostgreSQL and Redis under var/ (data is kept)."

    def handle(self, *args, **options) -> None:
        stopped = embedded.stop_all()
        self.stdout.write(f"Stopped: {', '.join(stopped)}" if stopped else "Nothing embedded was running.")
