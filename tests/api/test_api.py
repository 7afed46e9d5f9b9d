"""The HTTP API: the OpenAPI schema lists seed 004's verbs; every call is owner-scoped
(another user's token gets 404s); tokens are made and revoked on a page; errors are JSON; a token
has a rate limit."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from django.test import Client
from django.urls import reverse

from api.models import ApiToken
from memory.models import Memory

pytestmark = pytest.mark.django_db


def bearer(raw: str) -> dict:
    return {"HTTP_AUTHORIZATION": f"Bearer {raw}"}


def test_the_schema_lists_the_verbs_and_anonymous_calls_are_refused():
    schema = Client().get("/api/openapi.json").json()
    paths = set(schema["paths"])
    for verb in ("retain", "recall", "reflect", "consolidate"):
        assert f"/api/banks/{{bank_id}}/{verb}" in paths
    assert {"/api/banks", "/api/banks/{bank_id}/memories", "/api/banks/{bank_id}/tools/{name}"} <= paths
    docs = Client().get("/api/docs").content.decode()
    assert "/static/ninja/swagger-ui-bundle.js" in docs and "cdn." not in docs  # works offline
    refused = Client().get("/api/banks")
    assert refused.status_code == 401 and refused.json() == {"detail": "Unauthorized"}


def test_a_program_retains_recalls_reflects_and_consolidates_in_its_own_bank(own_bank, ada_token):
    c = Client()
    base = f"/api/banks/{own_bank.pk}"
    assert [b["id"] for b in c.get("/api/banks", **bearer(ada_token)).json()] == [own_bank.pk]
    kept = c.post(f"{base}/retain", {"speaker": "Jordan", "text": "The ferry to the island leaves at noon.",
                                     "listeners": ["Alex", "Jordan"], "turn": 3},
                  content_type="application/json", **bearer(ada_token))
    assert kept.status_code == 201 and {m["agent"] for m in kept.json()} == {"Alex", "Jordan"}
    assert kept.json()[0]["metadata"]["importance"]["scorer"] == "heuristic"
    found = c.post(f"{base}/recall", {"query": "when does the ferry leave?", "agent": "Alex", "k": 3,
                                          "similarity_threshold": 0.3},
                   content_type="application/json", **bearer(ada_token)).json()
    assert found[0]["memory"]["content"] == "Jordan said: The ferry to the island leaves at noon."
    assert set(found[0]["components"]) >= {"similarity", "recency", "importance"} and found[0]["rank"] == 1
    for turn in range(4, 8):
        c.post(f"{base}/retain", {"speaker": "Jordan", "text": f"Lovely weather for the ferry, day {turn}!",
                                  "listeners": ["Alex"], "turn": turn}, content_type="application/json",
               **bearer(ada_token))
    insights = c.post(f"{base}/reflect", {"agent": "Alex", "turn": 8}, content_type="application/json",
                      **bearer(ada_token))
    assert insights.status_code == 201 and all(m["kind"] == "reflection" for m in insights.json()["insights"])
    summaries = c.post(f"{base}/consolidate", {"agent": "Alex", "before_turn": 9}, content_type="application/json",
                       **bearer(ada_token))
    assert summaries.status_code == 200 and isinstance(summaries.json(), list)
    tool = c.post(f"{base}/tools/query_character", {"agent": "Alex", "arguments": {"name": "Jordan"}},
                  content_type="application/json", **bearer(ada_token)).json()
    assert tool["response"]["memories"] and tool["query"] == "who is Jordan?"
    bad = c.post(f"{base}/tools/query_character", {"agent": "Alex", "arguments": {"name": "Zed"}},
                 content_type="application/json", **bearer(ada_token))
    assert bad.status_code == 400 and "Unknown character 'Zed'" in bad.json()["detail"]


def test_memories_crud_and_every_call_scoped_to_the_tokens_owner(own_bank, ada_token, other_user):
    c = Client()
    base = f"/api/banks/{own_bank.pk}/memories"
    made = c.post(base, {"content": "Alex keeps a spare key under the mat.", "agent": "Alex", "kind": "semantic"},
                  content_type="application/json", **bearer(ada_token)).json()
    memory_url = f"{base}/{made['id']}"
    assert c.get(memory_url, **bearer(ada_token)).json()["content"] == "Alex keeps a spare key under the mat."
    # A memory of a run with a story calendar says when in the story it was formed.
    Memory.objects.filter(pk=made["id"]).update(story_time=datetime(2025, 1, 13, 18, 30, tzinfo=timezone.utc))
    assert c.get(memory_url, **bearer(ada_token)).json()["story_time"].startswith("2025-01-13T18:30:00")
    edited = c.patch(memory_url, {"importance": 8}, content_type="application/json", **bearer(ada_token)).json()
    assert edited["importance"] == 8
    empty = c.patch(memory_url, {"content": ""}, content_type="application/json", **bearer(ada_token))
    assert empty.status_code == 400 and "detail" in empty.json()
    listed = c.get(base + "?agent=Alex&kind=semantic", **bearer(ada_token)).json()
    assert made["id"] in [m["id"] for m in listed] and {(m["agent"], m["kind"]) for m in listed} == {("Alex", "semantic")}

    other = ApiToken.issue(user=other_user, name="theirs")[1]
    assert c.get("/api/banks", **bearer(other)).json() == []
    for response in (c.get(f"/api/banks/{own_bank.pk}", **bearer(other)), c.get(memory_url, **bearer(other)),
                     c.delete(memory_url, **bearer(other)),
                     c.post(f"/api/banks/{own_bank.pk}/recall", {"query": "key"}, content_type="application/json",
                            **bearer(other))):
        assert response.status_code == 404 and response.json() == {"detail": "Not found."}
    assert c.delete(memory_url, **bearer(ada_token)).json()["status"] == "archived"
    assert Memory.objects.get(pk=made["id"]).status == "archived"


def test_tokens_are_made_on_a_page_shown_once_and_revocable(user, client_for):
    page = client_for(user)
    made = page.post(reverse("api_tokens"), {"name": "my engine"}).content.decode()
    token = ApiToken.objects.get(user=user)
    secret = made.split("<code>")[1].split("</code>")[0]
    assert secret.startswith("wonda_") and token.hint.endswith(secret[-4:]) and token.digest != secret
    assert secret not in page.get(reverse("api_tokens")).content.decode()  # shown once
    assert Client().get("/api/banks", **bearer(secret)).status_code == 200
    page.post(reverse("api_token_revoke", args=[token.pk]))
    assert Client().get("/api/banks", **bearer(secret)).status_code == 401


def test_a_token_is_rate_limited(user, settings):
    settings.API_RATE = "3/min"
    secret = ApiToken.issue(user=user, name="busy")[1]
    responses = [Client().get("/api/banks", **bearer(secret)) for _ in range(4)]
    assert [r.status_code for r in responses] == [200, 200, 200, 429]
    assert "detail" in responses[-1].json()
