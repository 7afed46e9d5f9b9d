"""The HTTP API's line heard takes seed 003's capture filters, the adaptive one among them: each
listener's own near-duplicate threshold from its recent memories. Who did not keep the line is
named, with the reason, in the Wonda-Not-Kept header; the body stays the memories made."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from memory.services import bank_create
from memory.models import Memory

pytestmark = pytest.mark.django_db

VARIED = ["I lost my blue umbrella at the market.", "The baker's dog chased a gull along the quay.",
          "Tax forms are due on the first of April.", "My sister plays the cello in an orchestra.",
          "The old lighthouse was painted red last summer.", "We ran out of coffee beans again."]
FERRY = "The ferry to the island leaves at six tomorrow morning."
AGAIN = "Tomorrow morning the island ferry is leaving at six."


def _hear(bank, token, text: str, turn: int, listeners: list[str], **filters):
    answer = Client().post(f"/api/banks/{bank.pk}/retain",
                           {"speaker": "Bo", "text": text, "listeners": listeners, "turn": turn, **filters},
                           content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert answer.status_code == 201, answer.content
    return answer


def test_a_line_heard_takes_each_listeners_own_duplicate_threshold(user, ada_token):
    bank = bank_create(name="Quay", owner=user)
    for turn, text in enumerate([*VARIED, FERRY], 1):
        assert "Wonda-Not-Kept" not in _hear(bank, ada_token, text, turn, ["Ava"])
    # Ava's memories are varied, so a line this close to one of them is a repeat for her; Cy has heard
    # too little for a threshold of his own, and keeps it under the usual one (0.97).
    answer = _hear(bank, ada_token, AGAIN, 8, ["Ava", "Cy"], adaptive_duplicates=True)
    assert [m["agent"] for m in answer.json()] == ["Cy"]
    [skipped] = json.loads(answer["Wonda-Not-Kept"])
    assert skipped["agent"] == "Ava" and skipped["reason"] == "duplicate" and skipped["threshold"] == 0.8
    assert 0.8 <= skipped["similarity"] < 0.97  # a fixed threshold at its usual value would have kept it
    assert not Memory.objects.filter(agent="Ava", turn=8).exists()

    # Without the adaptive filter, the same line at the usual threshold: Ava keeps it.
    answer = _hear(bank, ada_token, AGAIN, 9, ["Ava"], duplicate_threshold=0.97)
    assert [m["agent"] for m in answer.json()] == ["Ava"] and "Wonda-Not-Kept" not in answer


def test_the_capture_filters_are_refused_for_one_memory(user, ada_token):
    bank = bank_create(name="Quay", owner=user)
    answer = Client().post(f"/api/banks/{bank.pk}/retain", {"agent": "Ava", "content": "x", "adaptive_duplicates": True},
                           content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {ada_token}")
    assert answer.status_code == 400 and "apply to a line heard" in answer.json()["detail"]


def test_the_schema_shows_the_capture_filters(client):
    retain = client.get("/api/openapi.json").json()["components"]["schemas"]["RetainIn"]["properties"]
    assert {"duplicate_threshold", "adaptive_duplicates", "importance_floor", "only_concerning"} <= set(retain)
    assert retain["adaptive_duplicates"]["default"] is False
