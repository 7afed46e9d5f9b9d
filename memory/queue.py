"""Memory's background work, queued by task name, and the requests other apps make for it.

The services queue tasks and memory.tasks calls the services, so the services must not import
memory.tasks: they name the task, and core.queueing (the project's one way to queue by name) finds
it in the Celery app's registry (memory.tasks is loaded by MemoryConfig.ready in every process).
Other apps ask through the request services below (memory.api), never through a task.
"""

from __future__ import annotations

from core import queueing


def queue(name: str, *args, failure: str | None = None) -> None:
    """Queue the task now. failure: when given, a broker that is down is logged with this message
    instead of raising (the caller's work is kept; what the task adds is made later or never)."""
    queueing.send(f"memory.tasks.{name}", *args, failure=failure)


def queue_on_commit(name: str, *args, robust: bool = False) -> None:
    """Queue the task once the current transaction commits (nothing if it rolls back). robust: a
    broker that is down loses the request, never the commit's response."""
    queueing.send_on_commit(f"memory.tasks.{name}", *args, robust=robust)


# --- what the other apps ask memory's workers for -------------------------------------------------

def line_extract_request(*, bank_id: int, turn: int, speaker: str, text: str, facts: dict | None = None) -> None:
    """A kept line's feelings, lesson and learned facts, made by a worker after the turn's commit. No
    broker: the line is kept, what it leaves besides is not made."""
    queue("extract_task", bank_id, turn, speaker, text, facts,
          failure=f"could not queue what turn {turn} leaves besides its line")


def bank_consolidate_request(*, bank_id: int, agent: str, before_turn: int, budget: int | None = None) -> None:
    """The agent's old, unimportant, similar memories folded into offline summaries by a worker, if it
    holds more than `budget`. Raises when the broker is down (the caller says what it costs)."""
    queue("consolidate_bank_task", bank_id, agent, before_turn, budget)


def bank_map_request(bank_id: int) -> None:
    """A big bank's memory map, computed by a worker (memory.measuring.projection)."""
    queue("bank_map_task", bank_id)
