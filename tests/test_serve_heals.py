"""`manage.py serve` brings back the embedded Redis and PostgreSQL when they are killed (SIGKILL, as a
crash or the OOM killer would): on the same port or socket, with their data, and the site's
/healthz says every part is up again, with nobody typing a command.

The servers killed here are a stack of their own (its own var directory, migrated once for the
module), never the test session's."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import psutil
import psycopg
import pytest
import redis

from tests import leftovers
from tests.conftest import ARTIFACTS, ROOT
from tests.test_serve import _free_port, _until

pytestmark = pytest.mark.worker


def _healthz(port: int) -> dict:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as error:  # 503: some part is down, and the body says which
        return json.loads(error.read())
    except OSError:
        return {}


def _up(port: int, *parts: str) -> bool:
    report = _healthz(port).get("parts", {})
    return all(report.get(part, {}).get("ok") for part in parts)


class Stack:
    def __init__(self, var: Path):
        self.var, self.port = var, _free_port()
        self.env = {k: v for k, v in os.environ.items() if k not in ("XDG_RUNTIME_DIR", "WONDA_DB_NAME")} | {
            "WONDA_VAR_DIR": str(var), "PYTHONUNBUFFERED": "1",
            "WONDA_QUERY_ENCODER": "torch",  # no ONNX export into a fresh var directory: the worker is up at once
            "WONDA_SERVER_PATIENCE_SECONDS": "3",  # 10 by default: a silent server is restarted sooner here
        }
        self.log_path = ARTIFACTS / "serve-heals.log"

    def manage(self, *args: str) -> None:
        subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=self.env, check=True,
                       capture_output=True, timeout=180)

    def start(self) -> None:
        ARTIFACTS.mkdir(exist_ok=True)
        self.log = open(self.log_path, "w")
        self.serve = subprocess.Popen(
            [sys.executable, "manage.py", "serve", "--addr", f"127.0.0.1:{self.port}", "--mcp-port", "0",
             "--concurrency", "1"], cwd=ROOT, env=self.env, stdout=self.log, stderr=subprocess.STDOUT,
            start_new_session=True)

    def said(self) -> str:
        return self.log_path.read_text()

    def stop(self) -> None:
        os.killpg(self.serve.pid, signal.SIGTERM)
        try:
            self.serve.wait(timeout=40)
        except subprocess.TimeoutExpired:
            os.killpg(self.serve.pid, signal.SIGKILL)
        self.log.close()
        self.manage("stop_embedded")  # the stack's own PostgreSQL and Redis: nothing of it outlives the module

    def redis_port(self) -> int:
        return int((self.var / "redis" / "port").read_text())

    def redis_pid(self) -> int | None:
        try:
            pid = int((self.var / "redis" / "redis.pid").read_text())
            return pid if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE else None
        except (OSError, ValueError, psutil.NoSuchProcess):
            return None

    def postmaster(self) -> int | None:
        try:
            pid = int((self.var / "pg" / "postmaster.pid").read_text().split()[0])
            return pid if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE else None
        except (OSError, ValueError, IndexError, psutil.NoSuchProcess):
            return None

    def sql(self, statement: str):
        with psycopg.connect(host=str(self.var / "pg"), dbname="wonda", user="postgres", connect_timeout=3,
                             autocommit=True) as conn:
            return conn.execute(statement).fetchall() if statement.lstrip().upper().startswith("SELECT") \
                else conn.execute(statement)


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    # The session adopts daemonised servers to find what a test leaves (tests/leftovers.py); a server
    # killed here would stay its zombie, which looks alive to serve's restart. Init reaps them
    # instead, as on a real machine; the stack stops its own servers at the end.
    leftovers.adopt_orphans(False)
    stack = Stack(tmp_path_factory.mktemp("serve-var"))
    try:
        stack.manage("migrate", "-v0")  # starts the stack's PostgreSQL and Redis
        stack.start()
        try:
            _until(lambda: _up(stack.port, "database", "redis", "worker"), 120, "the stack's web server and worker")
            yield stack
        finally:
            stack.stop()
    finally:
        leftovers.adopt_orphans(True)


def test_a_killed_redis_comes_back_on_its_port_with_its_queue(stack):
    port = stack.redis_port()
    client = redis.Redis(port=port, db=9, socket_timeout=2)
    client.rpush("wonda-test-queued", "a message waiting for a worker")
    time.sleep(1.5)  # appendfsync everysec: what was written a second ago is on disk
    killed = stack.redis_pid()
    os.kill(killed, signal.SIGKILL)
    started = time.monotonic()
    again = _until(lambda: (pid := stack.redis_pid()) not in (None, killed) and pid, 15, "a new Redis")
    assert stack.redis_port() == port and again != killed
    assert client.lrange("wonda-test-queued", 0, -1) == [b"a message waiting for a worker"]  # the AOF kept it
    _until(lambda: _up(stack.port, "redis", "worker"), 30, "/healthz to say the broker and the worker are up")
    assert time.monotonic() - started < 30
    _until(lambda: "The task queue (embedded Redis) answers again" in stack.said(), 5, "serve to say so")
    assert "The task queue (embedded Redis) is not running: starting it again." in stack.said()


def test_a_redis_that_answers_nobody_is_stopped_and_started_again(stack):
    """Paused (its process there, answering nobody): killed after the patience, then started on its port."""
    port, paused = stack.redis_port(), stack.redis_pid()
    os.kill(paused, signal.SIGSTOP)
    try:
        _until(lambda: not psutil.pid_exists(paused) or psutil.Process(paused).status() == psutil.STATUS_ZOMBIE,
               20, "serve to stop the silent Redis")
    finally:
        if stack.redis_pid() == paused:
            os.kill(paused, signal.SIGCONT)
    _until(lambda: stack.redis_pid() not in (None, paused), 10, "a new Redis")
    assert stack.redis_port() == port
    assert redis.Redis(port=port, socket_timeout=2).ping()
    _until(lambda: "has not answered for" in stack.said(), 5, "serve to say why it stopped it")
    assert f"The task queue (embedded Redis) (pid {paused}) has not answered for" in stack.said()


def test_a_killed_postgres_comes_back_with_its_data(stack):
    stack.sql("CREATE TABLE IF NOT EXISTS heal_probe (note text)")
    stack.sql("INSERT INTO heal_probe VALUES ('written before the crash')")
    killed = stack.postmaster()
    os.kill(killed, signal.SIGKILL)  # the postmaster; its backends end on their own
    started = time.monotonic()
    _until(lambda: (pid := stack.postmaster()) not in (None, killed) and pid, 30, "a new postmaster")
    rows = _until(lambda: _rows(stack), 30, "PostgreSQL to take connections")
    assert rows == [("written before the crash",)]
    _until(lambda: _up(stack.port, "database", "worker"), 30, "/healthz to say the database and the worker are up")
    assert time.monotonic() - started < 30
    _until(lambda: "The database (embedded PostgreSQL) answers again" in stack.said(), 5, "serve to say so")
    assert "The database (embedded PostgreSQL) is not running: starting it again." in stack.said()


def _rows(stack):
    try:
        return stack.sql("SELECT note FROM heal_probe")
    except psycopg.OperationalError:
        return None
