"""What `manage.py serve` keeps running, judged by whether each part answers, not only by whether it runs.

Children (the web server, the worker, the MCP server) are processes serve started: one that exits
is started again with back-off; one that stays up but has not answered for CHILD_PATIENCE_S is
killed and started again the same way. The embedded servers (PostgreSQL, Redis under var/) are
started by whichever process needs them first and outlive serve; serve watches them too: a dead
one is started again at once, on the same socket or port and with its data, and one whose process
is alive but has not answered for SERVER_PATIENCE_S is killed first. When a part that was down
answers again, `on_back` runs (serve re-queues the runs it may have cost) until it succeeds.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Callable

import psutil

BACKOFF_S = (1, 2, 5, 10, 30)  # waits before each restart in a row; a part up for STEADY_S starts over
STEADY_S = 60
START_GRACE_S = 300  # a child is judged by its probe once it has answered, or after this (a first start exports models)
CHILD_PATIENCE_S = 30  # a busy web server or worker on two shared cores may be slow; not that slow
SERVER_PATIENCE_S = float(os.environ.get("WONDA_SERVER_PATIENCE_SECONDS", "10"))
SERVER_PROBE_EVERY_S = 1.0  # between, only its process is looked for (a crash is seen within a tick)
CHILD_PROBE_EVERY_S = 5.0


def http_answers(url: str, timeout: float = 3.0) -> bool:
    """Any HTTP reply (a 404, a 503) is an answer: the process lives; only silence is not."""
    try:
        urllib.request.urlopen(url, timeout=timeout).close()
        return True
    except urllib.error.HTTPError:
        return True
    except (OSError, ValueError):
        return False


def _kill_tree(pid: int) -> None:
    """SIGKILL a process and its own children (a worker's pool goes with it)."""
    try:
        root = psutil.Process(pid)
        family = root.children(recursive=True) + [root]
    except psutil.NoSuchProcess:
        return
    for proc in family:
        try:
            proc.send_signal(signal.SIGKILL)
        except psutil.NoSuchProcess:
            pass


@dataclass
class Child:
    name: str
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)  # on top of this process's
    probe: Callable[[], bool | None] | None = None  # True answers, False silent, None cannot tell now
    proc: subprocess.Popen | None = None
    started: float = 0.0
    failures: int = 0
    due: float = 0.0  # when a dead child is started again
    reported: bool = False
    answered: bool = False  # since its last start
    silent_since: float | None = None
    probed: float = 0.0
    why: str = ""  # why serve itself stopped it, said instead of a guess

    def start(self) -> None:
        self.proc = subprocess.Popen(self.argv, env=os.environ | self.env if self.env else None)
        self.started = time.monotonic()
        self.reported, self.answered, self.silent_since, self.why = False, False, None, ""

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


@dataclass
class Server:
    """An embedded server serve did not start but keeps up: pid() its process, answers() its probe,
    start() brings it back with its data (a crash's leftovers are its own to clear)."""
    name: str
    pid: Callable[[], int | None]
    answers: Callable[[], bool]
    start: Callable[[], object]
    down_since: float | None = None
    probed: float = 0.0
    failures: int = 0
    due: float = 0.0
    said: str = ""  # the last thing said about it, so that a long outage is not a line a tick


class Supervisor:
    def __init__(self, children: list[Child], servers: list[Server], *, say: Callable[[str], None],
                 warn: Callable[[str], None], on_back: Callable[[str], str] | None = None,
                 hint: Callable[[Child], str] = lambda child: ""):
        self.children, self.servers = children, servers
        self.say, self.warn, self.on_back, self.hint = say, warn, on_back, hint
        self.back_pending: list[str] = []  # parts whose return has not yet been followed by on_back
        self.next_back_try = 0.0

    def tick(self) -> None:
        for server in self.servers:
            self.tend_server(server)
        self.run_on_back()
        for child in self.children:
            self.tend_child(child)

    # --- embedded servers ------------------------------------------------------------------

    def tend_server(self, server: Server) -> None:
        now = time.monotonic()
        pid = server.pid()
        if pid is not None and server.down_since is None and now - server.probed < SERVER_PROBE_EVERY_S:
            return  # its process is there and it answered a moment ago
        server.probed = now
        if pid is not None and server.answers():
            if server.down_since is not None:
                self.say(f"The {server.name} answers again ({now - server.down_since:.1f} s after serve found it down).")
                if server.name not in self.back_pending:
                    self.back_pending.append(server.name)
            server.down_since, server.failures, server.said = None, 0, ""
            return
        if server.down_since is None:
            server.down_since = now
        if now < server.due:
            return
        silent = now - server.down_since
        if pid is not None:
            if silent < SERVER_PATIENCE_S:
                return
            self.warn(f"The {server.name} (pid {pid}) has not answered for {silent:.0f} s: stopping it (SIGKILL) "
                      "and starting it again.")
            _kill_tree(pid)
            _wait_gone(pid, 5)
        elif server.failures == 0:
            self.warn(f"The {server.name} is not running: starting it again.")
        try:
            server.start()
        except Exception as exc:  # said once per kind of failure, tried again after the back-off
            wait = BACKOFF_S[min(server.failures, len(BACKOFF_S) - 1)]
            server.failures += 1
            server.due = time.monotonic() + wait
            text = f"The {server.name} did not start ({type(exc).__name__}: {str(exc)[:300]}); trying again in {wait} s."
            if text != server.said:
                self.warn(text)
                server.said = text
            return
        self.say(f"The {server.name} was started again.")
        server.due = 0.0  # the next tick finds it answering and says so

    def run_on_back(self) -> None:
        """Re-queue what the outage cost, once per return; until it succeeds (the database may still be
        coming back when the broker is, and the other way round)."""
        if not self.back_pending or self.on_back is None or time.monotonic() < self.next_back_try:
            return
        if any(s.down_since is not None for s in self.servers):
            return  # the runs need both: wait for the other one
        parts = " and ".join(self.back_pending)
        try:
            said = self.on_back(parts)
        except Exception as exc:
            self.next_back_try = time.monotonic() + 2
            self.warn(f"After the {parts} came back, the runs could not be queued again yet ({type(exc).__name__}); "
                      "trying again in 2 s.")
            return
        self.back_pending.clear()
        if said:
            self.say(said)

    # --- children --------------------------------------------------------------------------

    def tend_child(self, child: Child) -> None:
        """Start a dead child again once its back-off has passed; say why it stopped, once; stop one
        that has not answered for CHILD_PATIENCE_S."""
        now = time.monotonic()
        if child.running():
            if child.failures and now - child.started > STEADY_S:
                child.failures = 0  # it has stayed up: the next failure waits the shortest time again
            self.judge(child, now)
            return
        if not child.reported:
            wait = BACKOFF_S[min(child.failures, len(BACKOFF_S) - 1)]
            child.failures += 1
            child.due = now + wait
            child.reported = True
            code = child.proc.returncode if child.proc is not None else None
            reason = f" ({child.why})" if child.why else self.hint(child)
            self.warn(f"The {child.name} stopped (exit {code}){reason}; starting it again in {wait} s. The others go on.")
            return
        if now >= child.due:
            child.start()
            self.say(f"The {child.name} is starting again.")

    def judge(self, child: Child, now: float) -> None:
        if child.probe is None or now - child.probed < CHILD_PROBE_EVERY_S:
            return
        child.probed = now
        answer = child.probe()
        if answer is None:  # it cannot be told now (the worker while the broker is down): no verdict
            child.silent_since = None
            return
        if answer:
            child.answered, child.silent_since = True, None
            return
        if not child.answered and now - child.started < START_GRACE_S:
            return  # still starting
        child.silent_since = child.silent_since or now
        if now - child.silent_since >= CHILD_PATIENCE_S:
            child.why = f"it had not answered for {now - child.silent_since:.0f} s, so serve stopped it"
            _kill_tree(child.proc.pid)
            try:
                child.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass

    def stop_children(self, timeout: float = 30) -> None:
        for child in self.children:
            if child.running():
                # SIGTERM: Celery finishes the task in hand (warm shutdown), runserver exits.
                child.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for child in self.children:
            if child.proc is None:
                continue
            try:
                child.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                child.proc.kill()


def _wait_gone(pid: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and psutil.pid_exists(pid):
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return
        except psutil.NoSuchProcess:
            return
        time.sleep(0.05)
