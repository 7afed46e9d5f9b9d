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

import logging
from datetime import datetime
from typing import Annotated

from django.conf import settings
from django.core.exceptions import RequestDataTooBig, ValidationError
from django.http import Http404, HttpRequest
from django.shortcuts import get_object_or_404
from ninja import NinjaAPI, Query, Schema
from ninja.errors import HttpError, ValidationError as SchemaError
from pydantic import AfterValidator, Field
from ninja.security import HttpBearer

from api.guards import json_only
from api.models import ApiToken
from api.throttle import TokenRateThrottle
from chronicle.simulation.models import Simulation
from chronicle.simulation.providers import get_provider
from chronicle.simulation.providers.scripted import ScriptedProvider
from memory.api import (
    INT_MAX, NAME_LIMIT, OFFSET_MAX, RECALL_K_MAX, REGISTRY, RETAIN_LISTENERS_MAX, SCORING_PRESETS, TEXT_LIMIT,
    MemoryFilter, ToolContext, bank_create, call_tool, clean_kinds, clean_text, memory_archive, memory_create,
    memory_update, recall, remember_utterance, summarizer,
)
from memory.api import consolidate as consolidate_memories
from memory.api import reflect as reflect_memories
from memory.models import Memory, MemoryBank
from wonda_site.outage import part_of, unavailable

log = logging.getLogger(__name__)


class TokenAuth(HttpBearer):
    def authenticate(self, request: HttpRequest, token: str):
        found = ApiToken.authenticate(token)
        if found is None:
            return None
        request.user = found.user  # owner scoping below reads request.user, as the pages do
        return found


api = NinjaAPI(title="Wonda API", version="1", auth=TokenAuth(), urls_namespace="api",
               openapi_url="/openapi.json", docs_url="/docs", throttle=[TokenRateThrottle()])


api.add_decorator(json_only, mode="view")  # a body in any other format is a 415


@api.exception_handler(ValidationError)
def _invalid(request, exc: ValidationError):
    fields = exc.message_dict if hasattr(exc, "error_dict") else {}
    detail = "; ".join(f"{k}: {' '.join(v)}" for k, v in fields.items()) or "; ".join(exc.messages)
    return api.create_response(request, {"detail": detail, "fields": sorted(fields)}, status=400)


@api.exception_handler(SchemaError)
def _unreadable(request, exc: SchemaError):
    """Input the schemas refuse: 400 (as every refusal of input), each problem with the field it is in."""
    problems = []
    for error in exc.errors:
        where = ".".join(str(p) for p in error.get("loc", ())[1:] if p not in ("data",)) or "body"
        problems.append(f"{where}: {error.get('msg', 'invalid').removeprefix('Value error, ')}")
    return api.create_response(request, {"detail": "; ".join(problems), "errors": exc.errors}, status=400)


@api.exception_handler(RequestDataTooBig)
def _too_big(request, exc):
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    return api.create_response(request, {"detail": f"The request body is over the limit of {limit // (1024 * 1024)} MB."},
                               status=413)


@api.exception_handler(Exception)
def _failed(request, exc: Exception):
    """A dependency down: 503 naming it; any other error: a 500 in JSON, the traceback in the log only."""
    part = part_of(exc)
    if part is not None:
        return unavailable(request, part)
    log.exception("API call failed: %s %s", request.method, request.path)
    return api.create_response(request, {"detail": "Something went wrong on Wonda's side; the server's log says why."},
                               status=500)


@api.exception_handler(Http404)
def _missing(request, exc):
    return api.create_response(request, {"detail": "Not found."}, status=404)


# --- schemas ------------------------------------------------------------------------------------
# Each field is checked by memory's own input rules (memory.services.validation), the ones the MCP
# tools, the forms and the imports use: a NUL byte, a lone surrogate, a control character, a name
# with nothing visible, a number PostgreSQL cannot hold or an unknown kind is a 400 naming the
# field, before anything is written.

def _text(limit: int, required: bool = True, name: bool = False):
    def check(value: str) -> str:
        try:
            return clean_text(value, "value", limit=limit, required=required, name=name)
        except ValidationError as exc:
            raise ValueError(" ".join(exc.message_dict["value"])) from None
    return AfterValidator(check)


def _kinds(value: list[str] | None) -> list[str] | None:
    try:
        return clean_kinds(value) if value is not None else None
    except ValidationError as exc:
        raise ValueError(" ".join(exc.message_dict["kinds"])) from None


Name = Annotated[str, _text(NAME_LIMIT, name=True)]
OptionalName = Annotated[str, _text(NAME_LIMIT, required=False, name=True)]
Text = Annotated[str, _text(TEXT_LIMIT)]
Content = Annotated[str, _text(10**6)]  # memory.models.MAX_CONTENT_CHARS has the last word
Turn = Annotated[int, Field(ge=-INT_MAX - 1, le=INT_MAX)]
Importance = Annotated[float, Field(ge=0, le=10)]
Valence = Annotated[float, Field(ge=-1, le=1)]
Tags = Annotated[list[Annotated[str, _text(100, name=True)]], Field(max_length=50)]
Kinds = Annotated[list[str] | None, AfterValidator(_kinds)]


class BankIn(Schema):
    name: Name


class BankOut(Schema):
    id: int
    name: str
    seed_status: str
    memories: int


class MemoryIn(Schema):
    content: Content
    agent: OptionalName = ""
    kind: Annotated[str, AfterValidator(lambda v: _kinds([v])[0])] = "semantic"
    category: Annotated[str, _text(50, required=False, name=True)] = ""
    importance: Importance = 5.0
    turn: Turn | None = None
    about: OptionalName = ""
    emotional_valence: Valence = 0.0
    tags: Tags = []


class MemoryPatch(Schema):
    content: Content | None = None
    importance: Importance | None = None
    tags: Tags | None = None


class MemoryOut(Schema):
    id: int
    agent: str
    kind: str
    category: str
    content: str
    importance: float
    turn: int | None
    story_time: datetime | None  # the story's date and time (a run with a story calendar)
    speaker: str
    about: str
    emotional_valence: float
    source: str
    status: str
    tags: list[str]
    metadata: dict


class RetainIn(Schema):
    speaker: Name
    text: Text
    listeners: Annotated[list[Name], Field(min_length=1, max_length=RETAIN_LISTENERS_MAX)]
    turn: Turn
    scorer: str | None = "heuristic"


class RecallIn(Schema):
    query: Text
    agent: Name | None = None
    kinds: Kinds = None
    k: Annotated[int, Field(ge=1, le=RECALL_K_MAX)] = 5
    scoring: str = "similarity"
    current_turn: Turn | None = None
    shared: bool = False
    associations: Annotated[float, Field(ge=0, le=1)] = 0.0


class ResultOut(Schema):
    rank: int
    score: float
    components: dict[str, float]
    matched_key: str | None
    memory: MemoryOut


class ReflectIn(Schema):
    agent: Name
    turn: Turn


class ConsolidateIn(Schema):
    agent: Name
    before_turn: Turn


class ToolIn(Schema):
    agent: Name
    arguments: dict = {}
    current_turn: Turn | None = None


class MemoriesQuery(Schema):
    agent: OptionalName | None = None
    kind: Annotated[str | None, AfterValidator(lambda v: _kinds([v])[0] if v else v)] = None
    status: Annotated[str, AfterValidator(lambda v: _status(v))] = "active"
    limit: Annotated[int, Field(ge=1, le=1000)] = 100
    offset: Annotated[int, Field(ge=0, le=OFFSET_MAX)] = 0


def _status(value: str) -> str:
    if value not in Memory.Status.values:
        raise ValueError(f"use one of {', '.join(Memory.Status.values)}.")
    return value


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
    return 201, _bank_out(bank_create(name=data.name, owner=request.user))


@api.get("/banks/{bank_id}", response=BankOut, tags=["banks"])
def bank_detail(request, bank_id: int):
    return _bank_out(_bank(request, bank_id))


@api.get("/banks/{bank_id}/memories", response=list[MemoryOut], tags=["memories"])
def memories(request, bank_id: int, filters: Query[MemoriesQuery]):
    rows = Memory.objects.in_bank(_bank(request, bank_id)).filter(status=filters.status)
    if filters.agent is not None:
        rows = rows.filter(agent=filters.agent)
    if filters.kind:
        rows = rows.filter(kind=filters.kind)
    return list(rows.order_by("agent", "turn", "id")[filters.offset:filters.offset + filters.limit])


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
    bank = _bank(request, bank_id)
    _agent_known(bank, data.agent)
    flt = MemoryFilter(agent=data.agent, kinds=data.kinds, shared=data.shared)
    results = recall(bank, data.query, filter=flt, k=data.k,
                     scoring=data.scoring, current_turn=data.current_turn, associations=data.associations)
    return [{"rank": r.rank, "score": r.score, "components": r.components, "matched_key": r.matched_key,
             "memory": r.memory} for r in results]


def _agent_known(bank: MemoryBank, agent: str | None) -> None:
    """An agent the bank holds no memory of is a 404 naming the ones it has (not an empty answer
    that looks like "nothing remembered")."""
    if not agent:
        return
    agents = set(Memory.objects.in_bank(bank).exclude(agent="").values_list("agent", flat=True).distinct())
    if agents and agent not in agents:
        raise HttpError(404, f"No agent {agent!r} in this bank; its agents: {', '.join(sorted(agents))}.")


def _model_of(bank: MemoryBank):
    """The model a bank's agents think with: its run's provider (a simulation's bank), else the
    offline scripted one (a bank made over the API has no model)."""

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
