"""Run a Celery worker and the web server together; Ctrl-C stops both cleanly."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from django.conf import settings
from django.core.management import BaseCommand


class Command(BaseCommand):
    help = "Start a Celery worker and the development web server; Ctrl-C stops both."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--addr", default=os.environ.get("WONDA_ADDR", "127.0.0.1:8000"))
        parser.add_argument("--concurrency", default=os.environ.get("WONDA_WORKER_CONCURRENCY", "2"))
        parser.add_argument("--mcp-port", default=os.environ.get("WONDA_MCP_PORT", "8766"),
                            help="the MCP streamable HTTP server's port on 127.0.0.1 (0: do not start it)")

    def handle(self, *args, addr: str, concurrency: str, mcp_port: str, **options) -> None:
        python = sys.executable
        worker = subprocess.Popen(
            [python, "-m", "celery", "-A", "wonda_site", "worker", "--loglevel", "INFO",
             "--concurrency", str(concurrency), "--hostname", "wonda@%h"],
        )
        web = subprocess.Popen([python, "manage.py", "runserver", addr, "--noreload"])
        children, names = [web, worker], ["web server", "worker"]
        if str(mcp_port) != "0":  # outside agents' MCP over HTTP (api.mcp_http), local only
            children.append(subprocess.Popen([python, "manage.py", "mcp_http", "--port", str(mcp_port)]))
            names.append("MCP server")
            self.stdout.write(f"MCP over HTTP: http://127.0.0.1:{mcp_port}/mcp?bank=<id>&agent=<name> "
                              "(Authorization: Bearer <API token>)")
        self.stdout.write(self.style.SUCCESS(f"Wonda is starting on http://{addr}/  (Ctrl-C stops web and worker)"))
        if settings.DEBUG:
            self.stdout.write(self.style.WARNING(
                "Development mode (DEBUG=1): error pages show code, settings and every URL. In production run with "
                "DEBUG=0, your own SECRET_KEY and ALLOWED_HOSTS, gunicorn instead of this server "
                "(README: \"Running on real PostgreSQL and Redis\"; docker-compose.yml does all of it)."))
        stopping = False

        def stop(*_args) -> None:
            nonlocal stopping
            stopping = True

        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTERM, stop)
        try:
            # Web and worker must stay up; the MCP server is optional (its port may be taken): its
            # end is reported, and the rest goes on.
            while not stopping and all(child.poll() is None for child in children[:2]):
                if len(children) == 3 and children[2].poll() is not None and names[2]:
                    self.stderr.write(self.style.WARNING(
                        f"The MCP server stopped (exit {children[2].returncode}; is port {mcp_port} taken? set "
                        "WONDA_MCP_PORT). The web server and the worker go on."))
                    names[2] = ""
                time.sleep(0.5)
        finally:
            for child in children:
                if child.poll() is None:
                    # SIGTERM: Celery finishes the task in hand (warm shutdown), runserver exits.
                    child.send_signal(signal.SIGTERM)
            deadline = time.monotonic() + 30
            for child in children:
                try:
                    child.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    child.kill()
            self.stdout.write("Web server and worker stopped.")
        if not stopping:
            failed = [name for name, child in zip(names[:2], children) if child.returncode not in (0, None)]
            if failed:
                raise SystemExit(f"{', '.join(failed)} exited unexpectedly; see the log above.")
