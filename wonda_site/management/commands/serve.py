"""Run the web server, a Celery worker and the MCP server together, and keep them and the embedded
PostgreSQL and Redis they need running: a part that dies or stops answering is started again (with
back-off, and the reason in the log), and no part's end takes the others down. After PostgreSQL or
Redis comes back, the runs the outage may have cost are queued again at once. Ctrl-C stops the
three children cleanly (the embedded servers keep running, as after `make run`)."""

from __future__ import annotations

import os
import signal
import socket
import sys
import time

from django.conf import settings
from django.core.management import BaseCommand

from chronicle.simulation.providers.connection import local_servers
from core import embedded
from core.pool import pool_status
from wonda_site.supervisor import Child, Server, Supervisor, http_answers
from core.workers import WORKER_ENV


def _probe_url(addr: str) -> str:
    """Where to knock on a server listening at addr ("8000", "127.0.0.1:8000", "0.0.0.0:8000", "[::]:8000")."""
    host, _, port = addr.rpartition(":")
    host = host.strip("[]")
    host = {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)
    return f"http://{'[' + host + ']' if ':' in host else host}:{port}/livez"


def _node_name(name: str) -> str:
    """Celery's node name with its %h, %n and %d filled in, as the worker's heartbeats carry it."""
    host = socket.gethostname()
    return name.replace("%h", host).replace("%n", host.split(".")[0]).replace("%d", host.partition(".")[2])


def _worker_beats(node: str):
    def probe() -> bool | None:
        try:
            status = pool_status()
        except Exception:  # the broker is down: the worker cannot beat, and restarting it would not help
            return None
        return bool(status.get("per_worker", {}).get(node))

    return probe


def _recover_runs(parts: str) -> str:
    """Queue again every running run's next turn (a task never runs a turn twice): what the outage
    lost from the queue, or left waiting on a retry, goes on now rather than at the workers' timer."""
    from django.db import connection

    from chronicle.simulation.control import services  # here: serve's other children do not need it loaded

    connection.close()  # the connection from before the outage is gone with the server
    queued = services.simulations_recover()
    return f"After the {parts} came back, queued {len(queued)} run(s) again: {queued}." if queued else ""


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
        url = _probe_url(addr)
        children = [
            Child("web server", [python, "manage.py", "runserver", addr, "--noreload"], probe=lambda: http_answers(url)),
            Child("worker", [python, "-m", "celery", "-A", "wonda_site", "worker", "--loglevel", "INFO",
                             "--concurrency", str(concurrency), "--hostname", worker_name,
                             # the periodic pruning, when WONDA_PRUNE_EVERY_HOURS asks for it (one worker here)
                             *(["--beat", "--schedule", str(settings.VAR_DIR / "celerybeat-schedule")]
                               if settings.CELERY_BEAT_SCHEDULE else [])], env=WORKER_ENV,
                  probe=_worker_beats(_node_name(worker_name))),
        ]
        if str(mcp_port) != "0":  # outside agents' MCP over HTTP (api.mcp_http), local only
            mcp_url = f"http://127.0.0.1:{mcp_port}/livez"  # a 404 from it is an answer
            children.append(Child("MCP server", [python, "manage.py", "mcp_http", "--port", str(mcp_port)],
                                  probe=lambda: http_answers(mcp_url)))
            self.stdout.write(f"MCP over HTTP: http://127.0.0.1:{mcp_port}/mcp?bank=<id>&agent=<name> "
                              "(Authorization: Bearer <API token>)")
        supervisor = Supervisor(children, self.embedded_servers(), say=self.stdout.write,
                                warn=lambda text: self.stderr.write(self.style.WARNING(text)),
                                on_back=_recover_runs, hint=self.hint)
        for child in children:
            child.start()
        self.stdout.write(self.style.SUCCESS(f"Wonda is starting on http://{addr}/  (Ctrl-C stops it)"))
        for name, found in local_servers():
            self.stdout.write(f"Found a local model server: {name} at {found}. A new run's Model settings can use it "
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
                supervisor.tick()
                time.sleep(0.5)
        finally:
            supervisor.stop_children()
            self.stdout.write("Web server, worker and MCP server stopped.")

    @staticmethod
    def embedded_servers() -> list[Server]:
        """The embedded PostgreSQL and Redis, when this site uses them (an external one is its operator's)."""
        servers = []
        if not os.environ.get("DATABASE_URL"):
            servers.append(Server("database (embedded PostgreSQL)", embedded.postgres_pid, embedded.postgres_answers,
                                  embedded.start_postgres))
        if not (os.environ.get("CELERY_BROKER_URL") or os.environ.get("REDIS_URL")):
            servers.append(Server("task queue (embedded Redis)", embedded.redis_pid, embedded.redis_answers,
                                  lambda: embedded.redis_url(settings.REDIS_DB)))
        return servers

    def hint(self, child: Child) -> str:
        if child.name == "MCP server":
            return " (is its port taken? set WONDA_MCP_PORT)"
        if child.proc is not None and child.proc.returncode == -signal.SIGKILL:
            return " (killed: often the system, out of memory)"
        return ""
