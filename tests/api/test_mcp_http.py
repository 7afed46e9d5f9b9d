"""MCP over streamable HTTP: a real uvicorn server, the SDK's own HTTP client as the outside agent.
A token opens one writer's banks as the agent the URL names; without one (or with a revoked or
someone else's) nothing reaches the tools."""

from __future__ import annotations

import json
import socket
import threading
import time

import anyio
import httpx2
import pytest
import uvicorn
from django.db import connection
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from api.mcp_http import application
from api.models import ApiToken
from memory.services import bank_create, memory_create

pytestmark = pytest.mark.django_db(transaction=True)  # the server thread has its own connection

SECRET = "Alex keeps the spare key to the flat under the blue flowerpot on the balcony."


def _backends() -> set[int]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pid FROM pg_stat_activity WHERE datname = current_database()")
        return {pid for (pid,) in cursor.fetchall()}


@pytest.fixture
def server():
    before = _backends()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    instance = uvicorn.Server(uvicorn.Config(application(), host="127.0.0.1", port=port, lifespan="on",
                                             log_level="warning"))
    thread = threading.Thread(target=instance.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not instance.started:
        assert time.monotonic() < deadline, "the MCP server did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    instance.should_exit = True
    thread.join(timeout=10)
    # The server's own connection (its sync thread, which outlives it) would keep the test database
    # from being dropped at the end of the session.
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid = ANY(%s) AND state = 'idle'",
                       [list(_backends() - before - {connection.connection.info.backend_pid})])


@pytest.fixture
def alex_bank(user):
    bank = bank_create(name="Alex's flat", owner=user)
    memory_create(bank=bank, content=SECRET, agent="Alex", kind="episodic", source="writer")
    memory_create(bank=bank, content="Jordan is allergic to cats.", agent="Alex", kind="episodic", source="writer")
    return bank


def _ask(url: str, token: str, tool: str, arguments: dict):
    async def steps():
        with anyio.fail_after(180):
            async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=120) as http:
                async with streamable_http_client(url, http_client=http) as (read, write):
                    async with ClientSession(read, write) as session:
                        await session.initialize()
                        names = [tool.name for tool in (await session.list_tools()).tools]
                        return names, await session.call_tool(tool, arguments)

    return anyio.run(steps)


def test_an_outside_agent_recalls_over_http_with_a_token(server, user, alex_bank):
    _token, raw = ApiToken.issue(user=user, name="my engine")
    names, result = _ask(f"{server}/mcp?bank={alex_bank.pk}&agent=Alex", raw, "query_memory",
                         {"query": "where is the spare key?"})
    assert "query_memory" in names and "query_self" in names
    answer = json.loads(result.content[0].text)
    assert not result.is_error and answer["memories"] and answer["memories"][0]["content"] == SECRET, answer


def test_the_bank_and_agent_can_come_as_headers(server, user, alex_bank):
    _token, raw = ApiToken.issue(user=user, name="my engine")

    async def steps():
        headers = {"Authorization": f"Bearer {raw}", "X-Wonda-Bank": str(alex_bank.pk), "X-Wonda-Agent": "Alex"}
        with anyio.fail_after(180):
            async with httpx2.AsyncClient(headers=headers, timeout=120) as http:
                async with streamable_http_client(f"{server}/mcp", http_client=http) as (read, write):
                    async with ClientSession(read, write) as session:
                        await session.initialize()
                        return await session.call_tool("query_memory", {"query": "who is allergic to cats?"})

    result = anyio.run(steps)
    assert json.loads(result.content[0].text)["memories"][0]["content"] == "Jordan is allergic to cats."


def test_no_valid_token_no_tools(server, user, other_user, alex_bank):
    url = f"{server}/mcp?bank={alex_bank.pk}&agent=Alex"
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                  "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                             "clientInfo": {"name": "curl", "version": "1"}}}
    accept = {"Accept": "application/json, text/event-stream"}
    anonymous = httpx2.post(url, json=initialize, headers=accept)
    assert anonymous.status_code == 401 and "API token" in anonymous.json()["detail"]
    token, raw = ApiToken.issue(user=user, name="soon revoked")
    token.revoke()
    assert httpx2.post(url, json=initialize, headers=accept | {"Authorization": f"Bearer {raw}"}).status_code == 401
    # Another writer's token: the bank is not theirs, and is not said to exist.
    _theirs, other = ApiToken.issue(user=other_user, name="theirs")
    refused = httpx2.post(url, json=initialize, headers=accept | {"Authorization": f"Bearer {other}"})
    assert refused.status_code == 404 and refused.json() == {"detail": "Not found."}
    # A token but no agent: told what to add.
    _mine, mine = ApiToken.issue(user=user, name="mine")
    unnamed = httpx2.post(f"{server}/mcp?bank={alex_bank.pk}", json=initialize,
                          headers=accept | {"Authorization": f"Bearer {mine}"})
    assert unnamed.status_code == 400 and "agent" in unnamed.json()["detail"]


def test_an_agent_name_that_breaks_the_text_rule_is_a_400_before_the_tools(server, user, alex_bank):
    _token, raw = ApiToken.issue(user=user, name="mine")
    headers = {"Accept": "application/json, text/event-stream", "Authorization": f"Bearer {raw}"}
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                  "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "curl", "version": "1"}}}
    for agent in ("Al%00ex", "Al%07ex", "%E2%80%8B", "%E2%80%AE"):  # NUL, BEL, zero-width space, RLO
        refused = httpx2.post(f"{server}/mcp?bank={alex_bank.pk}&agent={agent}", json=initialize, headers=headers)
        assert refused.status_code == 400 and refused.json()["detail"].startswith("agent: "), agent
    for turn in ("2147483648", "\u00b2"):  # past PostgreSQL's integer; a digit int() cannot read
        refused = httpx2.post(f"{server}/mcp?bank={alex_bank.pk}&agent=Alex&turn={turn}", json=initialize,
                              headers=headers)
        assert refused.status_code == 400 and "turn must be a whole number" in refused.json()["detail"], turn


def test_mcp_over_http_counts_against_the_same_per_token_budget_as_the_api(server, user, alex_bank, settings):
    from django.test import Client

    settings.API_RATE = "3/min"
    _token, raw = ApiToken.issue(user=user, name="busy engine")
    for _ in range(3):
        assert Client().get("/api/banks", HTTP_AUTHORIZATION=f"Bearer {raw}").status_code == 200
    refused = httpx2.post(f"{server}/mcp?bank={alex_bank.pk}&agent=Alex", headers={"Authorization": f"Bearer {raw}"},
                          json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, timeout=30)
    assert refused.status_code == 429 and "Too many requests" in refused.json()["detail"]


def test_an_outside_agent_filters_by_tags_and_is_held_to_the_per_agent_cap(server, user, settings):
    bank = bank_create(name="Ava's woods", owner=user)
    fought = memory_create(bank=bank, content="Ava fought a wolf at the ford.", agent="Ava", kind="episodic",
                           tags=["combat"], source="earned")
    memory_create(bank=bank, content="Ava watched a wolf cross the ford.", agent="Ava", kind="episodic", source="earned")
    _token, raw = ApiToken.issue(user=user, name="my engine")
    url = f"{server}/mcp?bank={bank.pk}&agent=Ava&turn=9"
    _names, strict = _ask(url, raw, "query_memory", {"query": "the wolf at the ford", "tags": ["combat"],
                                                     "tag_mode": "any_strict"})
    assert [m["content"] for m in json.loads(strict.content[0].text)["memories"]] == [fought.content]
    _names, plain = _ask(url, raw, "query_memory", {"query": "the wolf at the ford", "tags": ["combat"]})
    assert len(json.loads(plain.content[0].text)["memories"]) == 2  # "any" keeps the untagged in view
    _names, bad = _ask(url, raw, "query_memory", {"query": "wolf", "tags": ["combat"], "tag_mode": "most"})
    assert bad.is_error and "tag_mode" in json.loads(bad.content[0].text)["error"]
    fought.refresh_from_db()
    assert fought.access_count == 2 and fought.last_accessed_turn == 9  # counted as a run counts its recalls

    settings.MEMORY_MAX_PER_AGENT = 2
    _names, full = _ask(url, raw, "form_memory", {"content": "The ford is dangerous.", "importance": 6})
    assert full.is_error and "already holds the limit of 2" in json.loads(full.content[0].text)["error"]
    assert bank.memories.count() == 2


def test_reflect_and_consolidate_over_mcp_offline(server, user, woods):
    """Seed 004's reflect and consolidate as MCP tools: the same services and rules as the HTTP API's."""
    bank = woods
    _token, raw = ApiToken.issue(user=user, name="my engine")
    url = f"{server}/mcp?bank={bank.pk}&agent=Ava&turn=5"
    names, reflected = _ask(url, raw, "reflect", {"query": "the wolves in the forest", "tags": ["wolves", "night"],
                                                  "similarity_threshold": 0.3})
    assert {"reflect", "consolidate"} <= set(names)
    answer = json.loads(reflected.content[0].text)
    assert not reflected.is_error and "wolves" in answer["answer"] and "baker" not in answer["answer"]
    assert {m["content"] for m in answer["memories"]} == {"Ava saw wolves howling at the edge of the forest.",
                                                         "Ava heard wolves howling by the forest edge."}
    assert not bank.memories.filter(kind="reflection").exists()  # reflect stores nothing

    _names, merged = _ask(url, raw, "consolidate", {"threshold": 0.7})
    summaries = json.loads(merged.content[0].text)["summaries"]
    assert len(summaries) == 1 and summaries[0]["importance"] == pytest.approx(6.6)
    assert summaries[0]["tags"] == ["wolves", "night"] and len(summaries[0]["originals"]) == 2
    assert set(bank.memories.filter(pk__in=summaries[0]["originals"]).values_list("status", flat=True)) == {"consolidated"}

    _names, bad = _ask(url, raw, "consolidate", {"threshold": 3})
    assert bad.is_error and json.loads(bad.content[0].text)["error"] == "threshold: must be a number from 0 to 1."
    _names, blank = _ask(url, raw, "reflect", {"query": "  "})
    assert blank.is_error and json.loads(blank.content[0].text)["error"] == "query: cannot be empty."


def test_reflect_over_mcp_answers_in_the_runs_model_voice(server, user, model_run):
    from devtools.fake_llm import ok

    bank, fake = model_run
    memory_create(bank=bank, content="Ava fought the dragon at the cave.", agent="Ava", kind="episodic",
                  source="earned", turn=1)
    _token, raw = ApiToken.issue(user=user, name="my engine")
    fake.script(ok("I faced the dragon in its cave, and I still dream of the heat."))
    _names, result = _ask(f"{server}/mcp?bank={bank.pk}&agent=Ava", raw, "reflect",
                          {"query": "the dragon at the cave", "context": "A bard asks.", "similarity_threshold": 0.3})
    answer = json.loads(result.content[0].text)
    assert answer["answer"] == "I faced the dragon in its cave, and I still dream of the heat."
    asked = [r for r in fake.requests if "responding based on the following memories" in str(r["messages"])]
    assert len(asked) == 1 and "A bard asks." in asked[0]["messages"][-1]["content"]


def test_consolidate_over_mcp_by_session(server, user):
    from datetime import datetime, timezone

    bank = bank_create(name="Inn", owner=user)
    for turn, minute in enumerate((0, 15, 30, 59), 1):
        memory_create(bank=bank, content=f"Bo said: Line {turn}.", agent="Ava", kind="episodic", category="dialogue",
                      turn=turn, source="earned", story_time=datetime(1890, 5, 1, 18, minute, tzinfo=timezone.utc))
    memory_create(bank=bank, content="Bo said: Much later.", agent="Ava", kind="episodic", category="dialogue", turn=5,
                  source="earned", story_time=datetime(1890, 5, 1, 21, 0, tzinfo=timezone.utc))
    _token, raw = ApiToken.issue(user=user, name="my engine")
    _names, made = _ask(f"{server}/mcp?bank={bank.pk}&agent=Ava", raw, "consolidate", {"by": "session"})
    summaries = json.loads(made.content[0].text)["summaries"]
    assert len(summaries) == 1 and summaries[0]["content"].startswith("A conversation of 4 lines")
    assert len(summaries[0]["originals"]) == 4
    _names, bad = _ask(f"{server}/mcp?bank={bank.pk}&agent=Ava", raw, "consolidate", {"by": "week"})
    assert bad.is_error and "by" in json.loads(bad.content[0].text)["error"]
