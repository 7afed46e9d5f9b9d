"""Input no client should send, and every client one day does: each is a 4xx JSON answer naming the
field, and nothing is written (the API, the MCP tools, the forms and the imports share memory's
input rules; the forms' side is tests/chronicle/test_hostile_forms.py)."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from memory.mcp_server import tool_result
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


# Text no field may hold: PostgreSQL cannot store the first, UTF-8 cannot encode the second, the
# third is invisible noise, and the last two are names (or texts) with nothing to see.
HOSTILE_TEXT = {"nul": "Al\x00ex", "surrogate": "Al\ud800ex", "control": "Al\x07ex", "zero-width": "\u200b\u200b",
                "rlo": "\u202e"}
MEMORY = {"content": "Alex keeps a spare key under the mat.", "agent": "Alex", "category": "home", "about": "Jordan",
          "tags": ["keys"]}
RETAIN = {"speaker": "Jordan", "text": "The ferry leaves at noon.", "listeners": ["Alex"], "turn": 1}
# (method, path under the bank or "" for /api/banks, the valid body, the field set to the hostile text)
TEXT_FIELDS = [
    ("post", None, {"name": "Harbour"}, "name"),
    *(("post", "/memories", MEMORY, f) for f in ("content", "agent", "category", "about", "tags")),
    ("patch", "/memories/{memory}", {"content": "Alex keeps the key.", "tags": ["keys"]}, "content"),
    ("patch", "/memories/{memory}", {"content": "Alex keeps the key.", "tags": ["keys"]}, "tags"),
    *(("post", "/retain", RETAIN, f) for f in ("speaker", "text", "listeners")),
    ("post", "/recall", {"query": "the ferry", "agent": "Alex"}, "query"),
    ("post", "/recall", {"query": "the ferry", "agent": "Alex"}, "agent"),
    ("post", "/reflect", {"agent": "Alex", "turn": 8}, "agent"),
    ("post", "/consolidate", {"agent": "Alex", "before_turn": 9}, "agent"),
    ("post", "/tools/query_memory", {"agent": "Alex", "arguments": {"query": "the ferry"}}, "agent"),
]


def _with(body: dict, field: str, text: str) -> dict:
    value = [text] if isinstance(body[field], list) else text
    return {**body, field: value}


@pytest.mark.parametrize("method, path, body, field", TEXT_FIELDS,
                         ids=[f"{p or '/banks'}:{f}" for _m, p, _b, f in TEXT_FIELDS])
def test_every_api_text_field_refuses_hostile_text_naming_the_field_and_writes_nothing(
        own_bank, token, method, path, body, field):
    memory = Memory.objects.in_bank(own_bank).filter(agent="Alex").first()
    url = "/api/banks" if path is None else f"/api/banks/{own_bank.pk}{path.format(memory=memory.pk)}"
    before = (Memory.objects.count(), MemoryBank.objects.count(), memory.content, memory.tags)
    for label, text in HOSTILE_TEXT.items():
        response = send(method, url, token, _with(body, field, text))
        assert response.status_code == 400, (label, response.content[:300])
        detail = response.json()["detail"]
        assert detail.startswith(field), (label, detail)
        assert "\x00" not in detail and "\ud800" not in detail  # the answer never echoes the bad text
        memory.refresh_from_db()
        assert (Memory.objects.count(), MemoryBank.objects.count(), memory.content, memory.tags) == before, label
    assert send(method, url, token, body).status_code in (200, 201)  # the same call with clean text goes through


def test_a_tool_argument_over_mcp_refuses_hostile_text_and_forms_no_memory(own_bank):
    """The MCP servers (stdio and HTTP) answer each call with tool_result(call_tool(...))."""
    context = ToolContext(bank=own_bank, agent="Alex", current_turn=3)
    before = Memory.objects.count()
    for label, text in HOSTILE_TEXT.items():
        for name, arguments, field in (("query_memory", {"query": text}, "query"),
                                       ("form_memory", {"content": text, "importance": 7}, "content"),
                                       ("form_memory", {"content": "Jordan lied.", "importance": 7, "about": text},
                                        "about")):
            result = tool_result(call_tool(name, arguments, context=context))
            assert result.is_error, (label, name)
            assert f"'{field}'" in result.structured_content["error"], (label, result.structured_content)
            json.dumps(result.structured_content, ensure_ascii=False).encode()  # what goes on the wire encodes
    assert Memory.objects.count() == before


def test_a_list_parameter_has_a_maximum(own_bank, token):
    response = send("post", f"/api/banks/{own_bank.pk}/recall", token, {"query": "x", "kinds": ["episodic"] * 10_000})
    assert response.status_code == 400 and response.json()["detail"].startswith("kinds")
    tags = send("post", f"/api/banks/{own_bank.pk}/memories", token, {"content": "x", "tags": ["t"] * 51})
    assert tags.status_code == 400 and tags.json()["detail"].startswith("tags")
    result = call_tool("recall_episodes", {"query": "x", "time_range": list(range(10_000))},
                       context=ToolContext(bank=own_bank, agent="Alex"))
    assert "'time_range' has 10,000 items; the limit is 100" in result.error
    many = send("post", f"/api/banks/{own_bank.pk}/tools/query_memory", token,
                {"agent": "Alex", "arguments": {"query": "x", **{f"k{i}": 1 for i in range(10_000)}}})
    assert many.status_code == 400 and "and 9,990 more" in many.json()["detail"] and len(many.content) < 1000


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data",
                                          "application/xml"])
def test_a_body_that_is_not_json_is_a_415_and_writes_nothing(user, token, content_type):
    response = Client().post("/api/banks", data='{"name": "Harbour"}', content_type=content_type,
                             HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 415 and "application/json" in response.json()["detail"]
    assert not MemoryBank.objects.filter(owner=user).exists()
    response = Client().post("/api/banks", data='{"name": "Harbour"}', content_type="application/json; charset=utf-8",
                             HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 201


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


def test_recall_for_an_agent_the_bank_does_not_have_is_a_404_naming_its_agents(own_bank, token):
    response = send("post", f"/api/banks/{own_bank.pk}/recall", token, {"query": "the ferry", "agent": "Zed"})
    assert response.status_code == 404 and "No agent 'Zed'" in response.json()["detail"]
    assert "Alex" in response.json()["detail"]
    assert send("post", f"/api/banks/{own_bank.pk}/recall", token, {"query": "the ferry", "agent": "Alex"}).status_code == 200
