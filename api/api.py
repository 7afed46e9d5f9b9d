"""Wonda's HTTP API (django-ninja): memory banks and memories for other programs, with seed 004's
verbs — retain, recall, reflect, consolidate — and the agents' memory tools.

django-ninja over Django REST framework: the endpoints are plain typed functions, their pydantic
schemas validate the input and produce the OpenAPI document (served at /api/openapi.json, browsable
at /api/docs), with no serializer classes to keep in step; throttling is built in.

Every call carries a per-user token (`Authorization: Bearer wonda_…`, made and revoked on the API
tokens page) and sees only its user's banks, exactly as the pages do: someone else's bank is a 404.
Errors are JSON: {"detail": "..."}.
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError
from django.http import Http404, HttpRequest
from django.shortcuts import get_object_or_404
from ninja import NinjaAPI, Schema
from ninja.errors import HttpError
from ninja.security import HttpBearer
from ninja.throttling import AuthRateThrottle

from api.models import ApiToken
from memory.consolidation import consolidate as consolidate_memories, summarizer
from memory.models import Memory, MemoryBank
from memory.reflection import reflect as reflect_memories
from memory.retrieval import SCORING_PRESETS, MemoryFilter, recall
from memory.services import bank_create, memory_archive, memory_create, memory_update, remember_utterance
from memory.tools import REGISTRY, ToolContext, call_tool


class TokenAuth(HttpBearer):
    def authenticate(self, request: HttpRequest, token: str):
        found = ApiToken.authenticate(token)
        if found is None:
            return None
        request.user = found.user  # owner scoping below reads request.user, as the pages do
        return found


class TokenRateThrottle(AuthRateThrottle):
    """Requests per token and period (WONDA_API_RATE, "120/min"), counted in Django's cache; the
    setting is read at each call, so a changed one applies at once."""

    def __init__(self):
        super().__init__(settings.API_RATE)

    def allow_request(self, request: HttpRequest) -> bool:
        self.num_requests, self.duration = self.parse_rate(settings.API_RATE)
        return super().allow_request(request)


api = NinjaAPI(title="Wonda API", version="1", auth=TokenAuth(), urls_namespace="api",
               openapi_url="/openapi.json", docs_url="/docs", throttle=[TokenRateThrottle()])


@api.exception_handler(ValidationError)
def _invalid(request, exc: ValidationError):
    return api.create_response(request, {"detail": "; ".join(exc.messages)}, status=400)


@api.exception_handler(Http404)
def _missing(request, exc):
    return api.create_response(request, {"detail": "Not found."}, status=404)


# --- schemas ------------------------------------------------------------------------------------

class BankIn(Schema):
    name: str


class BankOut(Schema):
    id: int
    name: str
    seed_status: str
    memories: int


class MemoryIn(Schema):
    content: str
    agent: str = ""
    kind: str = "semantic"
    category: str = ""
    importance: float = 5.0
    turn: int | None = None
    about: str = ""
    emotional_valence: float = 0.0
    tags: list[str] = []


class MemoryPatch(Schema):
    content: str | None = None
    importance: float | None = None
    tags: list[str] | None = None


class MemoryOut(Schema):
    id: int
    agent: str
    kind: str
    category: str
    content: str
    importance: float
    turn: int | None
    speaker: str
    about: str
    emotional_valence: float
    source: str
    status: str
    tags: list[str]
    metadata: dict


class RetainIn(Schema):
    speaker: str
    text: str
    listeners: list[str]
    turn: int
    scorer: str | None = "heuristic"


class RecallIn(Schema):
    query: str
    agent: str | None = None
    kinds: list[str] | None = None
    k: int = 5
    scoring: str = "similarity"
    current_turn: int | None = None
    shared: bool = False
    associations: float = 0.0


class ResultOut(Schema):
    rank: int
    score: float
    components: dict[str, float]
    matched_key: str | None
    memory: MemoryOut


class ReflectIn(Schema):
    agent: str
    turn: int


class ConsolidateIn(Schema):
    agent: str
    before_turn: int


class ToolIn(Schema):
    agent: str
    arguments: dict = {}
    current_turn: int | None = None


def _bank(request, bank_id: int) -> MemoryBank:
    return get_object_or_404(MemoryBank.objects.owned_by(request.user), pk=bank_id)


def _memory(request, bank_id: int, memory_id: int) -> Memory:
    return get_object_or_404(Memory.objects.in_bank(_bank(request, bank_id)), pk=memory_id)


def _bank_out(bank: MemoryBank) -> dict:
    return {"id": bank.pk, "name": bank.name, "seed_status": bank.seed_status, "memories": bank.memories.count()}


# --- banks and memories -------------------------------------------------------------------------

@api.get("/banks", response=list[BankOut], tags=["banks"])
def banks(request):
    return [_bank_out(b) for b in MemoryBank.objects.owned_by(request.user)]


@api.post("/banks", response={201: BankOut}, tags=["banks"])
def bank_new(request, data: BankIn):
    return 201, _bank_out(bank_create(name=data.name[:200], owner=request.user))


@api.get("/banks/{bank_id}", response=BankOut, tags=["banks"])
def bank_detail(request, bank_id: int):
    return _bank_out(_bank(request, bank_id))


@api.get("/banks/{bank_id}/memories", response=list[MemoryOut], tags=["memories"])
def memories(request, bank_id: int, agent: str | None = None, kind: str | None = None, status: str = "active",
             limit: int = 100, offset: int = 0):
    rows = Memory.objects.in_bank(_bank(request, bank_id)).filter(status=status)
    if agent is not None:
        rows = rows.filter(agent=agent)
    if kind:
        rows = rows.filter(kind=kind)
    limit = max(1, min(limit, 1000))
    return list(rows.order_by("agent", "turn", "id")[offset:offset + limit])


@api.post("/banks/{bank_id}/memories", response={201: MemoryOut}, tags=["memories"])
def memory_new(request, bank_id: int, data: MemoryIn):
    memory = memory_create(bank=_bank(request, bank_id), source="writer", **data.dict())
    return 201, memory


@api.get("/banks/{bank_id}/memories/{memory_id}", response=MemoryOut, tags=["memories"])
def memory_detail(request, bank_id: int, memory_id: int):
    return _memory(request, bank_id, memory_id)


@api.patch("/banks/{bank_id}/memories/{memory_id}", response=MemoryOut, tags=["memories"])
def memory_edit(request, bank_id: int, memory_id: int, data: MemoryPatch):
    """A new content is stored at once; its vector is recomputed by a worker (about a second)."""
    return memory_update(memory=_memory(request, bank_id, memory_id), **data.dict())


@api.delete("/banks/{bank_id}/memories/{memory_id}", response=MemoryOut, tags=["memories"])
def memory_remove(request, bank_id: int, memory_id: int):
    """Archives: out of every search, never deleted (as on the bank page)."""
    return memory_archive(memory=_memory(request, bank_id, memory_id))


# --- seed 004's verbs ---------------------------------------------------------------------------

@api.post("/banks/{bank_id}/retain", response={201: list[MemoryOut]}, tags=["verbs"])
def retain(request, bank_id: int, data: RetainIn):
    """A line heard: one episodic memory per listener (embedded, scored), as a simulation's turn keeps it."""
    if data.scorer not in (None, "heuristic"):
        raise HttpError(400, "scorer: use heuristic, or null for a flat 5.0 (the model scorer needs a run's model).")
    kept = remember_utterance(bank=_bank(request, bank_id), speaker=data.speaker, text=data.text, turn=data.turn,
                              listeners=data.listeners, scorer=data.scorer)
    return 201, list(kept)


@api.post("/banks/{bank_id}/recall", response=list[ResultOut], tags=["verbs"])
def recall_memories(request, bank_id: int, data: RecallIn):
    """The tools' search: the same ranking and score components."""
    if data.scoring not in SCORING_PRESETS:
        raise HttpError(400, f"scoring: use one of {', '.join(SCORING_PRESETS)}.")
    flt = MemoryFilter(agent=data.agent, kinds=data.kinds, shared=data.shared)
    results = recall(_bank(request, bank_id), data.query, filter=flt, k=max(1, min(data.k, 100)),
                     scoring=data.scoring, current_turn=data.current_turn, associations=data.associations)
    return [{"rank": r.rank, "score": r.score, "components": r.components, "matched_key": r.matched_key,
             "memory": r.memory} for r in results]


def _model_of(bank: MemoryBank):
    """The model a bank's agents think with: its run's provider (a simulation's bank), else the
    offline scripted one (a bank made over the API has no model)."""
    from chronicle.simulation.models import Simulation
    from chronicle.simulation.providers import get_provider
    from chronicle.simulation.providers.scripted import ScriptedProvider

    run = Simulation.objects.filter(bank=bank).first()
    return get_provider(run) if run is not None else ScriptedProvider()


@api.post("/banks/{bank_id}/reflect", response={201: list[MemoryOut]}, tags=["verbs"])
def reflect(request, bank_id: int, data: ReflectIn):
    """The agent reflects now, with the model of the run the bank belongs to (offline for a bank
    made over the API, or a run without a model: the scripted provider's questions and insights)."""
    bank = _bank(request, bank_id)
    made = reflect_memories(bank, data.agent, turn=data.turn, ask=_model_of(bank).complete)
    return 201, made


@api.post("/banks/{bank_id}/consolidate", response=list[MemoryOut], tags=["verbs"])
def consolidate(request, bank_id: int, data: ConsolidateIn):
    """The agent's similar old unimportant memories before `before_turn` become summaries: written by
    the model of the run the bank belongs to, when it has one (offline otherwise)."""
    bank = _bank(request, bank_id)
    model = _model_of(bank)
    summarize = summarizer(model.complete) if model.name == "openai" else None
    results = consolidate_memories(bank, data.agent, before_turn=data.before_turn, summarize=summarize)
    return [r.summary for r in results]


@api.post("/banks/{bank_id}/tools/{name}", tags=["tools"])
def tool(request, bank_id: int, name: str, data: ToolIn):
    """One of the agents' memory tools (query_self, query_memory, …), as an agent calls it."""
    if name not in REGISTRY:
        raise HttpError(404, f"No tool {name!r}: use one of {', '.join(REGISTRY)}.")
    context = ToolContext(bank=_bank(request, bank_id), agent=data.agent, current_turn=data.current_turn)
    result = call_tool(name, data.arguments, context=context)
    if result.error:
        raise HttpError(400, result.error)
    return {"response": result.response, "query": result.query, "filter": result.filter,
            "latency_ms": result.latency_ms}


def urls():
    """The API's URL patterns, each open to the site's login middleware: a token, not a session,
    authenticates a call (401 without one)."""
    patterns, app_name, namespace = api.urls
    for pattern in patterns:
        pattern.callback.login_required = False  # what django.contrib.auth's @login_not_required sets
    return patterns, app_name, namespace
