"""Work nobody waits on yields the cores to work somebody does.

A turn's reply keys, what a line leaves behind (feelings, facts), reflections and consolidation run
in a worker right after the turn that queued them, beside the next turn's searches and capture,
on the same two cores. Inside `background()` the texts to store are encoded on one thread of the
lowest priority (nice 19), however many (torch's own threads would run at the usual priority: five
listeners' reply keys, 5–10 texts, took 0.25–0.5 s on both cores beside each next turn), so the
kernel runs a turn's encode first: by the fp32 ONNX graph on a one-thread session, or by torch for
a batch of more than 32 texts (query_encoder.encode_background); the vectors are the same (fp32).
Queries keep their usual path, and so does all work outside `background()`: a writer waits for it.
"""

from __future__ import annotations

import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from contextvars import ContextVar

NICE = 19  # the lowest priority: background work runs in what the turns leave

_background: ContextVar[bool] = ContextVar("wonda_embedding_background", default=False)
_pools: dict[str, tuple[int, ThreadPoolExecutor]] = {}
_pools_lock = threading.Lock()


@contextmanager
def background():
    """Encodes made inside yield to every other thread of the machine (see the module)."""
    token = _background.set(True)
    try:
        yield
    finally:
        _background.reset(token)


def active() -> bool:
    return _background.get()


def _lower_priority() -> None:
    # On Linux a thread id given to setpriority names that thread alone; elsewhere it would name a
    # process (or none), so the thread keeps the usual priority there.
    if sys.platform.startswith("linux"):
        try:
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), NICE)
        except OSError:  # pragma: no cover - a sandbox that forbids it: the encode still runs
            pass


def process_thread(name: str, initializer=None) -> ThreadPoolExecutor:
    """This process's one worker thread of that name (embed-low here, embed-soon for the cache):
    a thread never crosses a fork, so a forked child makes its own."""
    with _pools_lock:
        pool = _pools.get(name)
        if pool is None or pool[0] != os.getpid():
            pool = _pools[name] = (os.getpid(), ThreadPoolExecutor(max_workers=1, thread_name_prefix=name,
                                                                    initializer=initializer))
        return pool[1]


def run(fn, *args):
    """fn(*args) on the low-priority thread; its result or its exception, here."""
    return process_thread("embed-low", _lower_priority).submit(fn, *args).result()
