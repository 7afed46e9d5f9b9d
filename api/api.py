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

import json
import logging

from django.conf import settings
from django.core.exceptions import RequestDataTooBig, ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from ninja import NinjaAPI, Query
from ninja.errors import HttpError, ValidationError as SchemaError
from ninja.security import HttpBearer

from api.guards import json_only
from api.models import ApiToken
from api.schemas import (
    BankIn, BankOut, ConsolidateIn, MemoriesQuery, MemoryIn, MemoryOut, MemoryPatch, RecallIn, ReflectIn, ReflectOut,
    ResultOut, RetainIn, StatsOut, ToolIn,
)
from api.throttle import TokenRateThrottle
from chronicle.simulation.run.models import Simulation
from chronicle.simulation.providers import get_provider
from chronicle.simulation.providers.scripted import ScriptedProvider
from memory.api import (
    SCORING_PRESETS, SIMILARITY, ToolContext, banks as memory_banks, call_tool, line_capture, memory_edits,
    store_verbs, tools_offered, upkeep,
)
from memory.models import Memory, MemoryBank
from core.outage import part_of, unavailable

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


@api.exception_handler(store_verbs.MemoryLimitReached)
def _full(request, exc: store_verbs.MemoryLimitReached):
    """Seed 004's max_memories_per_entity: nothing written, and what to do about it."""
    return api.create_response(request, {"detail": str(exc)}, status=409)


@api.exception_handler(Http404)
def _missing(request, exc):
    return api.create_response(request, {"detail": "Not found."}, status=404)


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
    return 201, _bank_out(memory_banks.bank_create(name=data.name, owner=request.user))


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
    bank = _bank(request, bank_id)
    if data.agent:
        store_verbs.room_check(bank, [data.agent])
    memory = memory_edits.memory_create(bank=bank, source="writer", **data.dict())
    return 201, memory


@api.get("/banks/{bank_id}/memories/{memory_id}", response=MemoryOut, tags=["memories"])
def memory_detail(request, bank_id: int, memory_id: int):
    return _memory(request, bank_id, memory_id)


@api.patch("/banks/{bank_id}/memories/{memory_id}", response=MemoryOut, tags=["memories"])
def memory_edit(request, bank_id: int, memory_id: int, data: MemoryPatch):
    """A new content is stored at once; its vector is recomputed by a worker (about a second)."""
    return memory_edits.memory_update(memory=_memory(request, bank_id, memory_id), **data.dict())


@api.delete("/banks/{bank_id}/memories/{memory_id}", response=MemoryOut, tags=["memories"])
def memory_remove(request, bank_id: int, memory_id: int):
    """Archives: out of every search, never deleted (as on the bank page)."""
    return memory_edits.memory_archive(memory=_memory(request, bank_id, memory_id))


# --- seed 004's verbs ---------------------------------------------------------------------------

@api.post("/banks/{bank_id}/retain", response={201: list[MemoryOut]}, tags=["verbs"])
def retain(request, bank_id: int, data: RetainIn, response: HttpResponse):
    """Seed 004's retain: `agent` and `content` make one memory the agent lived (with its kind,
    importance, context, metadata, entities and tags). Or a line heard: `speaker`, `text`,
    `listeners` and `turn` make one scored episodic memory per listener, as a run's turn keeps it,
    through seed 003's capture filters when asked (a near-duplicate threshold, each listener's own
    with `adaptive_duplicates`, an importance floor, only the listeners it concerns); listeners that
    did not keep it are named, with the reason, in the `Wonda-Not-Kept` header (JSON).
    An agent at the limit of active memories (WONDA_MEMORY_MAX_PER_AGENT, 1,000) is a 409."""
    bank = _bank(request, bank_id)
    if data.agent is not None:
        return 201, [store_verbs.memory_retain(bank=bank, agent=data.agent, content=data.content, kind=data.kind,
                                               importance=data.importance, context=data.context, metadata=data.metadata,
                                               entities=[e.dict() for e in data.entities], tags=data.tags, turn=data.turn)]
    if data.scorer not in (None, "heuristic"):
        raise HttpError(400, "scorer: use heuristic, or null for a flat 5.0 (the model scorer needs a run's model).")
    store_verbs.room_check(bank, data.listeners)
    captured = line_capture.remember_utterance(bank=bank, speaker=data.speaker, text=data.text, turn=data.turn,
                                               listeners=data.listeners, scorer=data.scorer, filters=_filters(data))
    if captured.skipped:  # the body stays the memories made; who did not keep the line, and why, beside it
        response["Wonda-Not-Kept"] = json.dumps([{"agent": s.agent, "reason": s.reason, SIMILARITY: s.similarity,
                                                  "threshold": s.threshold} for s in captured.skipped])
    return 201, _with_details(list(captured), data)


def _filters(data: RetainIn) -> line_capture.CaptureFilters:
    """Seed 003's filters as a run applies them: adaptive with no threshold of the writer's is each
    listener's own, at most the usual near-duplicate threshold."""
    threshold = data.duplicate_threshold if data.duplicate_threshold and data.duplicate_threshold < 1 else None
    if data.adaptive_duplicates and threshold is None:
        threshold = line_capture.ADAPTIVE_CEILING
    return line_capture.CaptureFilters(importance_floor=data.importance_floor, duplicate_threshold=threshold,
                                       only_concerning=data.only_concerning, adaptive_duplicates=data.adaptive_duplicates)


def _with_details(kept: list[Memory], data: RetainIn) -> list[Memory]:
    """A line heard keeps the context, metadata, entities and tags sent with it, on every copy."""
    if not (data.context or data.metadata or data.entities or data.tags):
        return kept
    return store_verbs.memories_describe(memories=kept, context=data.context, metadata=data.metadata,
                                         entities=[e.dict() for e in data.entities], tags=data.tags)


@api.post("/banks/{bank_id}/recall", response=list[ResultOut], tags=["verbs"])
def recall_memories(request, bank_id: int, data: RecallIn):
    """Seed 004's recall: the tools' ranking and score components, filtered by kinds, tags (in a tag
    mode) and importance; only memories at least `similarity_threshold` similar to the query, at most
    `max_results`. What it returns counts as recalled (access counts), as in a run. With `fallback`
    "recent" (seed 002), a search that finds nothing answers with the agent's latest memories."""
    if data.scoring not in SCORING_PRESETS:
        raise HttpError(400, f"scoring: use one of {', '.join(SCORING_PRESETS)}.")
    bank = _bank(request, bank_id)
    _agent_known(bank, data.agent)
    results = store_verbs.recall_filtered(bank, data.query, agent=data.agent, kinds=data.kinds, tags=data.tags,
                                          mode=data.tag_mode, min_importance=data.min_importance,
                                          similarity_threshold=data.similarity_threshold, max_results=data.k or data.max_results,
                                          shared=data.shared, scoring=data.scoring, current_turn=data.current_turn,
                                          associations=data.associations, fallback=data.fallback)
    return [_result(r) for r in results]


def _result(r) -> dict:
    return {"rank": r.rank, "score": r.score, "components": r.components, "matched_key": r.matched_key,
            "found_by": r.found_by, "memory": r.memory}


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


def model_ask(bank: MemoryBank):
    """What writes reflect's answer and consolidation's summaries for a bank: its run's model
    (prompt → text), or None for their offline answers (MCP's reflect and consolidate as well)."""
    model = _model_of(bank)
    return model.complete if model.name == "openai" else None


@api.post("/banks/{bank_id}/reflect", response={200: ReflectOut, 201: ReflectOut}, tags=["verbs"])
def reflect(request, bank_id: int, data: ReflectIn):
    """With a `query` (seed 004): the agent's memories that answer it (tags in a tag mode, the
    similarity floor) and an answer in its voice by the model of the run the bank belongs to, or,
    with no model, those memories listed; nothing stored (200). Without one: the agent reflects now
    on what it lived and stores insights with their evidence at `turn` (201; offline, the scripted
    provider's questions and insights)."""
    bank = _bank(request, bank_id)
    _agent_known(bank, data.agent)
    model = _model_of(bank)
    if data.query is not None:
        answer, used = store_verbs.reflect_on(bank, data.agent, data.query, context=data.context, tags=data.tags,
                                              mode=data.tag_mode, similarity_threshold=data.similarity_threshold,
                                              max_results=data.max_results, current_turn=data.turn,
                                              ask=model.complete if model.name == "openai" else None)
        return 200, {"answer": answer, "memories": [_result(r) for r in used], "insights": []}
    made = upkeep.reflect(bank, data.agent, turn=data.turn, ask=model.complete)
    return 201, {"answer": "\n".join(m.content for m in made), "memories": [], "insights": made}


@api.post("/banks/{bank_id}/consolidate", response=list[MemoryOut], tags=["verbs"])
def consolidate(request, bank_id: int, data: ConsolidateIn):
    """Seed 004's consolidate: the agent's episodic and observation memories (with the tags; the
    ones most similar to `query` when given; before `before_turn` when given) grouped at cosine ≥
    `threshold`; each group of two or more becomes one summary (10 % more important than its best
    original, the tags merged, decaying 20 % slower), the originals kept as "consolidated". The
    summary is written by the model of the run the bank belongs to at temperature 0.3 in at most 300
    tokens, else offline (the group's most central line). With `by` "session" (seed 003): the
    agent's conversation sessions by story time (`session_minutes`), each of `min_lines` or more
    lines made one summary."""
    bank = _bank(request, bank_id)
    _agent_known(bank, data.agent)
    ask = model_ask(bank)
    if data.by == "session":
        summarize = store_verbs.session_summarizer(ask, context=data.context) if ask is not None else None
        return [r.summary for r in store_verbs.consolidate_sessions(bank, data.agent, minutes=data.session_minutes,
                                                                    min_lines=data.min_lines, before=data.before, tags=data.tags,
                                                                    summarize=summarize)]
    summarize = upkeep.summarizer(ask, context=data.context) if ask is not None else None
    results = store_verbs.consolidate_matching(bank, data.agent, query=data.query, tags=data.tags, mode=data.tag_mode,
                                               threshold=data.threshold, before_turn=data.before_turn, summarize=summarize)
    return [r.summary for r in results]


@api.get("/banks/{bank_id}/stats/{agent}", response=StatsOut, tags=["verbs"])
def stats(request, bank_id: int, agent: str):
    """Seed 002's memory statistics of one agent: kinds, importance by band and its balance, semantic
    diversity, themes (by the run's model when the bank has one, else offline keywords), and its
    latest and most important memories."""
    bank = _bank(request, bank_id)
    _agent_known(bank, agent)
    model = _model_of(bank)
    return memory_banks.memory_stats(bank, agent, ask=model.complete if model.name == "openai" else None)


@api.post("/banks/{bank_id}/tools/{name}", tags=["tools"])
def tool(request, bank_id: int, name: str, data: ToolIn):
    """One of the agents' memory tools (query_self, query_memory, …), as an agent calls it."""
    if name not in tools_offered.REGISTRY:
        raise HttpError(404, f"No tool {name!r}: use one of {', '.join(tools_offered.REGISTRY)}.")
    context = ToolContext(bank=_bank(request, bank_id), agent=data.agent, current_turn=data.current_turn)
    if name == "form_memory":  # a memory written for the agent: held to the per-agent cap
        store_verbs.room_check(context.bank, [data.agent])
    result = call_tool(name, data.arguments, context=context)
    if result.error:
        raise HttpError(400, result.error)
    # What a program's agent recalls counts as a run's agent's does (decay and access boosts read it).
    line_capture.accesses_record(memory_ids=[r.memory.pk for r in result.results], turn=data.current_turn)
    return {"response": result.response, "query": result.query, "filter": result.filter,
            "latency_ms": result.latency_ms}


def urls():
    """The API's URL patterns, each open to the site's login middleware: a token, not a session,
    authenticates a call (401 without one)."""
    patterns, app_name, namespace = api.urls
    for pattern in patterns:
        pattern.callback.login_required = False  # what django.contrib.auth's @login_not_required sets
    return patterns, app_name, namespace
