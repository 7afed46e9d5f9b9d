"""First-run set-up for `make run`: migrate, make sure someone can log in, load the demo once."""

from __future__ import annotations

import secrets

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import BaseCommand, call_command

from chronicle.demo import load_demo, load_recorded


class Command(BaseCommand):
    help = "Migrate the database, create a first user (credentials printed) and load the demo once."

    def handle(self, *args, **options) -> None:
        call_command("migrate", interactive=False, verbosity=0)
        self.stdout.write("Database migrated.")
        user = self._ensure_user()
        if load_demo(owner=user):
            self.stdout.write("Demo scenario loaded (dinner planning, three characters).")
        for title in load_recorded(owner=user):
            self.stdout.write(f"Recorded run loaded: {title} (lines written by a model, replayed).")

    def _ensure_user(self):
        User = get_user_model()
        credentials = settings.VAR_DIR / "credentials.txt"
        first = User.objects.order_by("pk").first()
        if first is not None:
            if credentials.exists():
                self.stdout.write(self.style.SUCCESS(f"Log in with the credentials in {credentials}:"))
                self.stdout.write(credentials.read_text())
            return first
        password = secrets.token_urlsafe(9)
        user = User.objects.create_superuser(username="writer", email="", password=password)
        credentials.write_text(f"username: writer\npassword: {password}\n")
        credentials.chmod(0o600)
        self.stdout.write(self.style.SUCCESS("Created your first user (staff, can open /admin/):"))
        self.stdout.write(f"  username: writer\n  password: {password}\n  (saved in {credentials})")
        return user
