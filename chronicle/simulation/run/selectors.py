"""Reads for the simulation pages: turns with their retrievals, token totals and the real saving."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.conf import settings
from django.db.models import Count, Prefetch
from django.utils import timezone

from chronicle.models import Character
from chronicle.simulation.story.calendar import short_date
from chronicle.simulation.prompting.context import tokenizer_name
from chronicle.simulation.run.models import Retrieval, Simulation, Turn, TurnOverride
from memory.models import Memory
from core.pool import pool_status


def turns_for_page(simulation: Simulation, page=None):
    """The run page's lines (polled every 2 s while live), one page of them (line_pages.LinePage; None:
    all): each with `retrieval_count` counted in the database, without the messages sent, the context
    or any retrieval's JSON (the token totals are summed in SQL: line_pages.run_tokens)."""
    turns = (simulation.turns.order_by("index").defer("prompt_messages", "context")
             .annotate(retrieval_count=Count("retrievals")))
    return page.of(turns) if page is not None else turns


def attach_reflections(simulation: Simulation, turns: list[Turn]) -> list[Turn]:
    """Give each turn `reflections`: the active reflections made after it, each with its evidence
    (id, agent, content). Two queries however long the run, reading only the given turns' reflections."""
    by_turn: dict[int, list[Memory]] = {}
    if simulation.bank_id and turns:
        numbers = [turn.number for turn in turns]
        rows = (Memory.objects.in_bank(simulation.bank).active()
                .filter(kind=Memory.Kind.REFLECTION, source=Memory.Source.REFLECTION,
                        turn__gte=min(numbers), turn__lte=max(numbers))
                .only("id", "agent", "content", "turn")
                .prefetch_related(Prefetch("evidence", queryset=Memory.objects.only("id", "agent", "content", "turn")
                                           .order_by("turn", "id")))
                .order_by("turn", "agent", "id"))
        for memory in rows:
            by_turn.setdefault(memory.turn, []).append(memory)
    for turn in turns:
        turn.reflections = by_turn.get(turn.number, [])
    return turns


def attach_stage(simulation: Simulation, turns: list[Turn]) -> list[Turn]:
    """Give each turn `stage_before` (the writer's directions just before it: who came or went, what
    happened), `story_when` (its date in the story, when the run has one) and `heard_note` (who heard the line, when not everyone: a whisper, someone away)."""
    directions = simulation.directions
    cast = simulation.cast_names
    dates = simulation.story_times_at([turn.number for turn in turns])
    for turn in turns:
        turn.stage_before = [d for d in directions if d.turn == turn.number]
        # The story's date at the line (a run with a story calendar): "Tue 14 Jan 2025, 9:04 am".
        when = dates[turn.number]
        turn.story_when = short_date(when) if when else ""
        heard = list(turn.heard_by or [])
        turn.heard_note = ""
        if turn.whisper_to:
            turn.heard_note = f"whispered to {turn.whisper_to}: only {turn.whisper_to} heard the words"
        elif heard and set(heard) != set(cast):
            away = [name for name in cast if name not in heard]
            turn.heard_note = f"heard by {', '.join(heard)} · {', '.join(away)} {'was' if len(away) == 1 else 'were'} away"
    return turns


def upcoming_stage(simulation: Simulation, turns: list[Turn]) -> list:
    """The directions before the next turn to run (an exit the last line made, say): shown after the
    last line, where the writer can still take them back."""
    following = max((turn.number for turn in turns), default=0) + 1
    return [d for d in simulation.directions if d.turn == following]


def turn_with_retrievals(simulation: Simulation, index: int) -> Turn | None:
    """One turn with what it recalled, in the order the agent called its tools."""
    return (simulation.turns.filter(index=index)
            .prefetch_related(Prefetch("retrievals", queryset=Retrieval.objects.order_by("order", "id")))
            .first())


@dataclass
class BranchNode:
    simulation: Simulation
    children: list["BranchNode"] = field(default_factory=list)

    def runs(self) -> list[Simulation]:
        """Every run of the tree, this one first, depth first (the relatives a run compares with)."""
        return [self.simulation, *(run for child in self.children for run in child.runs())]


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


def side_tokens(turn) -> int:
    """The prompt tokens of a turn's calls besides the speaker's (recorded as they were asked)."""
    context = turn.context or {}
    return int(context.get("aux_tokens") or 0) + int(context.get("reflection_tokens") or 0)


@dataclass
class TokenSummary:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    full_definition_tokens: int = 0
    estimated: bool = False
    turns: int = 0
    calls: int = 0
    by_kind: dict = field(default_factory=dict)  # section kind → prompt tokens over the run (context.KIND_LABELS)
    tools_tokens: int = 0  # the tool schemas, once (re-sent with every call that offers tools)
    tool_count: int = 0
    side_tokens: int = 0  # the calls besides the speakers': each line's judgement, retellings, day summaries, reflections
    side_calls: int = 0
    bookkeeping_model: str = ""  # the model those side calls went to, when not the speakers' (Simulation.bookkeeping_model)
    cost: object = None  # costs.RunCost, where the caller priced them (the run page)

    @property
    def every_call_tokens(self) -> int:
        return self.prompt_tokens + self.side_tokens

    @property
    def saving_percent(self) -> float | None:
        """1 − sent / full-definition cost, every call counted; negative when the tool round trips and
        the bookkeeping after each line cost more than they save."""
        if not self.full_definition_tokens:
            return None
        return round(100 * (1 - self.every_call_tokens / self.full_definition_tokens), 1)

    @property
    def tokenizer(self) -> str:
        return tokenizer_name()

    def share(self, *kinds: str) -> tuple[int, int]:
        tokens = sum(self.by_kind.get(k, 0) for k in kinds)
        return tokens, round(100 * tokens / self.prompt_tokens) if self.prompt_tokens else 0

    @property
    def reasons(self) -> list[str]:
        """Why the figure is what it is, in words, from what the calls actually sent."""
        if not self.turns or not self.calls:
            return []
        words = []
        if self.calls > self.turns:
            words.append(f"{self.calls} model calls for {self.turns} turns ({self.calls / self.turns:.1f} a turn): "
                         "every tool round is one more call, and each call re-sends the whole prompt so far.")
        tokens, pct = self.share("tools")
        if tokens:
            words.append(f"Each call with tools re-sends the {self.tool_count} tool schemas ({self.tools_tokens:,} tokens): "
                         f"{tokens:,} tokens, {pct}% of what was sent.")
        tokens, pct = self.share("tool_call", "tool_result")
        if tokens:
            words.append(f"Tool calls and their results, re-sent by the rounds after them: {tokens:,} tokens ({pct}%).")
        tokens, pct = self.share("prepopulated")
        if tokens:
            calls = "one call a turn" if self.calls == self.turns else "re-sent by every tool round"
            words.append(f"Pre-populated memories: {tokens:,} tokens ({pct}%), {calls}; they are capped "
                         "(a dozen memories of the sheet, a few of the rest), so unlike the full definition they do not "
                         "grow with a long character sheet.")
        tokens, pct = self.share("instructions", "tool_instructions", "prompt_options", "format")
        if tokens:
            words.append(f"Instructions and chat format: {tokens:,} tokens ({pct}%); the transcript window: "
                         f"{self.by_kind.get('transcript', 0):,}.")
        if self.side_tokens:
            words.append(f"Besides the speakers, {self.side_calls} call{'s' if self.side_calls != 1 else ''} kept the "
                         f"memory up to date (judging each line for those who heard it, reflections, day summaries): "
                         f"{self.side_tokens:,} tokens, {round(100 * self.side_tokens / self.every_call_tokens)}% of all "
                         "sent. They are counted in the saving."
                         + (f" They went to the bookkeeping model, {self.bookkeeping_model}, not the speakers' model."
                            if self.bookkeeping_model else ""))
        if self.full_definition_tokens:
            per_turn = self.full_definition_tokens // self.turns
            words.append(f"The baseline, one call a turn with the speaker's whole definition, the scene and the others, "
                         f"is ~{per_turn:,} tokens a turn here{' (short sheets)' if per_turn < 1500 else ''}.")
        return words


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
        summary.calls += int((turn.usage or {}).get("calls") or 0)
        if "context" not in turn.get_deferred_fields():
            summary.side_tokens += side_tokens(turn)
            summary.side_calls += int((turn.context or {}).get("aux_calls") or 0)
        totals = getattr(turn, "context_totals", None)
        if totals is None and "context" not in turn.get_deferred_fields():
            totals = (turn.context or {}).get("totals")
        for kind, tokens in (totals or {}).items():
            summary.by_kind[kind] = summary.by_kind.get(kind, 0) + int(tokens or 0)
        summary.tools_tokens = max(summary.tools_tokens, int(getattr(turn, "tools_tokens", None) or 0))
        summary.tool_count = max(summary.tool_count, int(getattr(turn, "tool_count", None) or 0))
    return summary


def progress(simulation: Simulation, figures) -> dict:
    """The run page's progress from line_pages.run_figures (counted in SQL, not from the page's lines)."""
    done = figures.done
    bank = simulation.bank
    return {
        "turns_done": done,
        "turn_percent": int(100 * done / simulation.max_turns) if simulation.max_turns else 0,
        "seed_percent": bank.seed_percent if bank else 0,
        "seed_done": bank.seed_done if bank else 0,
        "seed_total": bank.seed_total if bank else 0,
        "running_turn": figures.running,
        "waiting": worker_wait(simulation, figures),
    }


def worker_wait(simulation: Simulation, figures, *, now=None) -> dict | None:
    """A running run that nobody is working on: the turn due has had no live worker for longer than
    the stale window (its worker died and none has taken it over yet, or no worker is running).
    None when all is well."""
    if simulation.status != Simulation.Status.RUNNING or figures.seat_waiting:
        return None  # not running, or waiting for the writer's line, not for a worker
    now = now or timezone.now()
    window = settings.TURN_STALE_SECONDS
    running = figures.running
    if running is not None:
        since = running.heartbeat or running.started
        number = running.number
    else:
        # Between turns: the next one should have been claimed moments after the last one finished.
        since = simulation.updated
        number = figures.done + 1
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
    if settings.RECOVERY_EVERY_SECONDS <= 0:
        return "A worker is up; it takes this turn over when it next starts (its recovery timer is off)."
    within = int(2 * settings.TURN_STALE_SECONDS + settings.RECOVERY_EVERY_SECONDS)
    return f"A worker is up; its recovery timer takes a run that stopped moving up again within about {within} seconds."


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


def cast_portraits(simulation: Simulation) -> dict[str, int]:
    """{cast member's name: its character's id} for those of the writer's characters with a portrait."""
    return dict(Character.objects.owned_by(simulation.owner).filter(name__in=simulation.cast_names, portrait__isnull=False)
                .values_list("name", "pk"))
