"""Input no client should send, and every client one day does: each is a 4xx JSON answer naming the
field, and nothing is written (the API, the MCP tools and the forms share memory's input rules)."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from memory.models import Memory, MemoryBank
from memory.recalling.tools import ToolContext, call_tool

pytestmark = pytest.mark.django_db

BIG = 2**63


@pytest.fixture
def token(ada_token):
    return ada_token


def send(method: str, url: str, token: str, body=None):
    kwargs = {"HTTP_AUTHORIZATION": f"Bearer {token}"}
    if body is not None:
        kwargs |= {"data": json.dumps(body), "content_type": "application/json"}
    return getattr(Client(), method)(url, **kwargs)


HOSTILE = [
    ("post", "/memories", {"content": "a\x00b", "agent": "Alex"}, "content"),
    ("post", "/memories", {"content": "fine", "agent": "Al\x00ex"}, "agent"),
    ("post", "/memories", {"content": "fine", "turn": 2**31}, "turn"),
    ("post", "/memories", {"content": "fine", "kind": "bogus"}, "kind"),
    ("post", "/memories", {"content": "fine", "importance": 11}, "importance"),
    ("post", "/retain", {"speaker": "Jor\x00dan", "text": "hi", "listeners": ["Alex"], "turn": 1}, "speaker"),
    ("post", "/retain", {"speaker": "Jordan", "text": "hi", "listeners": ["Al\x00ex"], "turn": 1}, "listeners"),
    ("post", "/retain", {"speaker": "Jordan", "text": "hi\x00", "listeners": ["Alex"], "turn": 1}, "text"),
    ("post", "/retain", {"speaker": "Jordan", "text": "hi", "listeners": ["Alex"], "turn": BIG}, "turn"),
    ("post", "/retain", {"speaker": "Jordan", "text": "hi", "listeners": [f"L{i}" for i in range(5000)], "turn": 1},
     "listeners"),
    ("post", "/recall", {"query": "x", "k": -1}, "k"),
    ("post", "/recall", {"query": "x", "k": 10_000}, "k"),
    ("post", "/recall", {"query": "x", "kinds": ["bogus"]}, "kinds"),
    ("post", "/recall", {"query": "x\x00"}, "query"),
    ("post", "/recall", {"query": "x", "current_turn": 2**31}, "current_turn"),
    ("post", "/reflect", {"agent": "Alex", "turn": BIG}, "turn"),
    ("post", "/consolidate", {"agent": "Alex", "before_turn": -BIG}, "before_turn"),
    ("post", "/tools/query_memory", {"agent": "Alex", "arguments": {"query": "a\x00b"}}, "query"),
    ("post", "/tools/recall_episodes", {"agent": "Alex", "arguments": {"query": "x", "time_range": [1, BIG]}},
     "time_range"),
    ("get", "/memories?offset=-5", None, "offset"),
    ("get", f"/memories?offset={2**70}", None, "offset"),
    ("get", "/memories?status=bogus", None, "status"),
]


@pytest.mark.parametrize("method, path, body, field", HOSTILE, ids=[f"{p}:{f}:{i}" for i, (_m, p, _b, f) in enumerate(HOSTILE)])
def test_hostile_input_is_a_4xx_naming_the_field_and_writes_nothing(own_bank, token, method, path, body, field):
    before = Memory.objects.count()
    response = send(method, f"/api/banks/{own_bank.pk}{path}", token, body)
    assert 400 <= response.status_code < 500, response.content[:300]
    assert response["Content-Type"].startswith("application/json")
    assert field in response.json()["detail"]
    assert Memory.objects.count() == before


def test_a_bank_name_too_long_or_with_a_nul_byte_is_refused(user, token):
    for name in ("x" * 10_000, "bank\x00", ""):
        response = send("post", "/api/banks", token, {"name": name})
        assert response.status_code == 400 and "name" in response.json()["detail"]
    assert not MemoryBank.objects.filter(owner=user).exists()


def test_an_oversized_body_is_a_413_saying_the_limit(own_bank, token, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1024 * 1024
    response = send("post", f"/api/banks/{own_bank.pk}/recall", token, {"query": "x" * (2 * 1024 * 1024)})
    assert response.status_code == 413 and "limit of 1 MB" in response.json()["detail"]


def test_the_mcp_tools_refuse_the_same_input_with_a_message(own_bank):
    context = ToolContext(bank=own_bank, agent="Alex", current_turn=3)
    result = call_tool("query_memory", {"query": "a\x00b"}, context=context)
    assert "NUL byte" in result.error and result.results == []
    result = call_tool("recall_episodes", {"query": "x", "time_range": [1, BIG]}, context=context)
    assert "must be between" in result.error


def test_the_forms_refuse_the_same_input_with_a_field_message(user, client_for):
    from django.urls import reverse

    from tests.chronicle.simulation.conftest import make_dinner

    dinner = make_dinner(user)
    from chronicle.models import Character
    from chronicle.simulation.models import Simulation

    client = client_for(user)
    page = client.post(reverse("character_create"), {"name": "Al\x00ex", "role": "Manager"}).content.decode()
    assert "Null characters are not allowed" in page and not Character.objects.filter(owner=user, role="Manager").exists()
    data = {"scenario": dinner.pk, "max_turns": 2**31, "speaking_order": "round_robin", "retrieval_mode": "tools",
            "scoring": "similarity", "provider": "scripted", "temperature": "0.7", "max_tokens": 300,
            "max_tool_calls": 4, "timeout_s": 30, "pace_s": 0}
    page = client.post(reverse("simulation_create"), data).content.decode()
    assert "A run has at most 10,000 turns" in page and not Simulation.objects.exists()


def test_recall_for_an_agent_the_bank_does_not_have_is_a_404_naming_its_agents(own_bank, token):
    response = send("post", f"/api/banks/{own_bank.pk}/recall", token, {"query": "the ferry", "agent": "Zed"})
    assert response.status_code == 404 and "No agent 'Zed'" in response.json()["detail"]
    assert "Alex" in response.json()["detail"]
    assert send("post", f"/api/banks/{own_bank.pk}/recall", token, {"query": "the ferry", "agent": "Alex"}).status_code == 200
