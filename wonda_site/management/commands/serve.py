"""Run the web server, a Celery worker and the MCP server together, and keep them running: a child
that dies is started again (with back-off, and the reason in the log), and no child's end takes the
others down. Ctrl-C stops them all cleanly."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field

from django.conf import settings
from django.core.management import BaseCommand

from chronicle.simulation.connection import local_servers
from wonda_site.workers import WORKER_ENV

BACKOFF_S = (1, 2, 5, 10, 30)  # waits before each restart in a row; a child up for STEADY_S starts over
STEADY_S = 60


@dataclass
class Child:
    name: str
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)  # on top of this process's
    proc: subprocess.Popen | None = None
    started: float = 0.0
    failures: int = 0
    due: float = 0.0  # when a dead child is started again
    reported: bool = field(default=False)

    def start(self) -> None:
        self.proc = subprocess.Popen(self.argv, env=os.environ | self.env if self.env else None)
        self.started = time.monotonic()
        self.reported = False


class Command(BaseCommand):
    help = "Start the web server, a Celery worker and the MCP server, restart any that dies; Ctrl-C stops them."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--addr", default=os.environ.get("WONDA_ADDR", "127.0.0.1:8000"))
        parser.add_argument("--concurrency", default=os.environ.get("WONDA_WORKER_CONCURRENCY", "2"))
        parser.add_argument("--worker-name", default="wonda@%h", help="the worker's Celery node name")
        parser.add_argument("--mcp-port", default=str(settings.MCP_PORT),
                            help="the MCP streamable HTTP server's port on 127.0.0.1 (0: do not start it)")

    def handle(self, *args, addr: str, concurrency: str, worker_name: str, mcp_port: str, **options) -> None:
        python = sys.executable
        children = [
            Child("web server", [python, "manage.py", "runserver", addr, "--noreload"]),
            Child("worker", [python, "-m", "celery", "-A", "wonda_site", "worker", "--loglevel", "INFO",
                             "--concurrency", str(concurrency), "--hostname", worker_name], env=WORKER_ENV),
        ]
        if str(mcp_port) != "0":  # outside agents' MCP over HTTP (api.mcp_http), local only
            children.append(Child("MCP server", [python, "manage.py", "mcp_http", "--port", str(mcp_port)]))
            self.stdout.write(f"MCP over HTTP: http://127.0.0.1:{mcp_port}/mcp?bank=<id>&agent=<name> "
                              "(Authorization: Bearer <API token>)")
        for child in children:
            child.start()
        self.stdout.write(self.style.SUCCESS(f"Wonda is starting on http://{addr}/  (Ctrl-C stops it)"))
        for name, url in local_servers():
            self.stdout.write(f"Found a local model server: {name} at {url}. A new run's Model settings can use it "
                              "(provider openai, that base URL; Test connection lists its models).")
        if settings.DEBUG:
            self.stdout.write(self.style.WARNING(
                "Development mode (DEBUG=1): error pages show code, settings and every URL. In production run with "
                "DEBUG=0, your own SECRET_KEY and ALLOWED_HOSTS, gunicorn instead of this server "
                "(docs/operations.md, \"Running on real PostgreSQL and Redis\"; docker-compose.yml does all of it)."))
        stopping = False

        def stop(*_args) -> None:
            nonlocal stopping
            stopping = True

        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTERM, stop)
        try:
            while not stopping:
                for child in children:
                    self.tend(child)
                time.sleep(0.5)
        finally:
            for child in children:
                if child.proc is not None and child.proc.poll() is None:
                    # SIGTERM: Celery finishes the task in hand (warm shutdown), runserver exits.
                    child.proc.send_signal(signal.SIGTERM)
            deadline = time.monotonic() + 30
            for child in children:
                if child.proc is None:
                    continue
                try:
                    child.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    child.proc.kill()
            self.stdout.write("Web server, worker and MCP server stopped.")

    def tend(self, child: Child) -> None:
        """Start a dead child again once its back-off has passed; say why it stopped, once."""
        now = time.monotonic()
        if child.proc is not None and child.proc.poll() is None:
            if child.failures and now - child.started > STEADY_S:
                child.failures = 0  # it has stayed up: the next failure waits the shortest time again
            return
        if not child.reported:
            wait = BACKOFF_S[min(child.failures, len(BACKOFF_S) - 1)]
            child.failures += 1
            child.due = now + wait
            child.reported = True
            code = child.proc.returncode if child.proc is not None else None
            self.stderr.write(self.style.WARNING(
                f"The {child.name} stopped (exit {code}){self.hint(child)}; starting it again in {wait} s. "
                "The others go on."))
            return
        if now >= child.due:
            self.heal_broker()
            child.start()
            self.stdout.write(f"The {child.name} is starting again.")

    def hint(self, child: Child) -> str:
        if child.name == "MCP server":
            return " (is its port taken? set WONDA_MCP_PORT)"
        if child.name == "worker":
            return " (often: the task queue, Redis, went away)"
        return ""

    def heal_broker(self) -> None:
        """The embedded Redis, started again on its own port if it died (an external one is left alone)."""
        if os.environ.get("CELERY_BROKER_URL") or os.environ.get("REDIS_URL"):
            return
        from wonda_site import embedded

        try:
            embedded.redis_url(settings.REDIS_DB)
        except Exception as exc:  # said, and tried again at the next restart
            self.stderr.write(self.style.WARNING(f"The task queue (embedded Redis) is not back yet: {exc}"))
