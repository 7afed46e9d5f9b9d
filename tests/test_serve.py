"""`manage.py serve` (what `make run` starts) keeps Wonda up: a child that dies is started again,
and the web server never goes down with it."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import psutil
import pytest
from django.db import connection

from tests.conftest import ARTIFACTS, ROOT


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _answers(url: str) -> bool:
    try:
        urllib.request.urlopen(url, timeout=2)
        return True
    except urllib.error.HTTPError:
        return True  # 503 from /healthz is an answer
    except OSError:
        return False


def _workers(serve: subprocess.Popen) -> list[int]:
    return [p.pid for p in psutil.Process(serve.pid).children() if "celery" in " ".join(p.cmdline())]


def _until(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_killed_worker_is_started_again_and_the_web_server_stays_up():
    port = _free_port()
    ARTIFACTS.mkdir(exist_ok=True)
    log = open(ARTIFACTS / "serve.log", "w")
    env = os.environ | {"WONDA_DB_NAME": connection.settings_dict["NAME"], "WONDA_QUEUE": "serve-test",
                        "PYTHONUNBUFFERED": "1"}
    serve = subprocess.Popen([sys.executable, "manage.py", "serve", "--addr", f"127.0.0.1:{port}", "--mcp-port", "0",
                              "--concurrency", "1"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                             start_new_session=True)
    url = f"http://127.0.0.1:{port}/healthz"
    try:
        _until(lambda: _answers(url), 60, "the web server")
        (first,) = _until(lambda: _workers(serve), 30, "the worker")
        os.kill(first, signal.SIGKILL)  # the worker's main process, as the OOM killer would
        time.sleep(1)
        assert serve.poll() is None and _answers(url)  # serve and the web server go on
        again = _until(lambda: [pid for pid in _workers(serve) if pid != first], 30, "a new worker")
        assert again and _answers(url)
        assert "The worker stopped (exit -9)" in (ARTIFACTS / "serve.log").read_text()
    finally:
        os.killpg(serve.pid, signal.SIGTERM)
        try:
            serve.wait(timeout=40)
        except subprocess.TimeoutExpired:
            os.killpg(serve.pid, signal.SIGKILL)
        log.close()
