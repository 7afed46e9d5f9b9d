"""What a test run may leave behind: nothing but the embedded PostgreSQL and Redis of its own var dir
(kept running on purpose; `make stop` ends them), and no write outside the repository and the temp
dir. tests/conftest.py checks both when the session ends and fails the run otherwise.

Processes: the test process becomes a "child subreaper" (Linux), so a server a test starts that
daemonises (pg_ctl, redis --daemonize) is re-parented to it rather than to init, and is still found
among its children at the end. Writes: a stray run of the app writes a var dir where the deployment
files point (compose's /data) or makes a new top-level directory; both are compared with the start.
"""

from __future__ import annotations

import ctypes
import os
import re
import signal
import time
from pathlib import Path

import psutil

PR_SET_CHILD_SUBREAPER = 36


def adopt_orphans(on: bool = True) -> None:
    """Daemonised descendants stay this process's children (a no-op where prctl is missing).
    on=False: they go to init again, which reaps them (a test that kills a server and waits for a
    supervisor to start it again: a killed server left a zombie here looks alive to its restart)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1 if on else 0, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _pidfile(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _reap() -> None:
    """Collect adopted children that have exited (a subreaper must wait for them, as init does)."""
    while True:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def leftover_processes(var_dir: Path, grace_s: float = 5.0) -> list[psutil.Process]:
    """This process's children still running after `grace_s` (a browser's helpers go a moment
    after the browser), but the embedded servers of `var_dir`."""
    _reap()
    kept = {_pidfile(var_dir / "pg" / "postmaster.pid"), _pidfile(var_dir / "redis" / "redis.pid")}
    left = []
    for child in psutil.Process().children():
        try:
            if child.pid not in kept and child.status() != psutil.STATUS_ZOMBIE:
                left.append(child)
        except psutil.NoSuchProcess:
            continue
    _gone, alive = psutil.wait_procs(left, timeout=grace_s) if left else ([], [])
    return alive


def describe(process: psutil.Process) -> str:
    try:
        return f"pid {process.pid}: {' '.join(process.cmdline())[:200]}"
    except psutil.Error:
        return f"pid {process.pid}"


def end(processes: list[psutil.Process]) -> None:
    """Stop what the run left (a server's own children go with it), so the next run starts clean."""
    for process in processes:
        try:
            process.send_signal(signal.SIGTERM)
        except psutil.Error:
            pass
    _gone, alive = psutil.wait_procs(processes, timeout=10)
    for process in alive:
        try:
            process.kill()
        except psutil.Error:
            pass
    time.sleep(0.1)
    _reap()


def watched_dirs(root: Path, var_dir: Path) -> list[Path]:
    """The var dirs the deployment files name (compose's WONDA_VAR_DIR), but the run's own."""
    found = set()
    for name in ("docker-compose.yml", "Dockerfile"):
        path = root / name
        if path.exists():
            found |= {Path(m) for m in re.findall(r"WONDA_VAR_DIR[:=]\s*[\"']?(/[\w./-]+)", path.read_text())}
    return sorted(p for p in found if p.resolve() != var_dir.resolve())


def _newest(path: Path) -> float | None:
    """The newest change in a directory tree (two levels down: what a var dir's set-up touches)."""
    if not path.exists():
        return None
    newest = path.stat().st_mtime
    for depth_one in path.iterdir():
        newest = max(newest, depth_one.lstat().st_mtime)
        if depth_one.is_dir() and not depth_one.is_symlink():
            try:
                newest = max([newest, *(p.lstat().st_mtime for p in depth_one.iterdir())])
            except OSError:
                pass
    return newest


def snapshot(root: Path, var_dir: Path) -> dict:
    return {"top": set(os.listdir("/")), "dirs": {p: _newest(p) for p in watched_dirs(root, var_dir)}}


def writes_outside(before: dict) -> list[str]:
    """What the run wrote outside the repository and the temp dir, as far as the snapshot sees."""
    written = [f"/{name} (a new top-level directory)" for name in sorted(set(os.listdir("/")) - before["top"])]
    for path, then in before["dirs"].items():
        now = _newest(path)
        if now is not None and (then is None or now > then):
            written.append(f"{path} (a var dir the deployment files name: {'made' if then is None else 'changed'})")
    return written
