"""While the database or the broker is down, a page is a 503 that says which (and retries), the API
answers 503 JSON, and /healthz reports for every caller, a session cookie or not: never a traceback."""

from __future__ import annotations

import importlib

import pytest
from django.contrib.sessions.backends.db import SessionStore
from django.db import OperationalError

from api.models import ApiToken
from memory.models import MemoryBank

pytestmark = pytest.mark.django_db


def refuse(*args, **kwargs):
    raise OperationalError('connection to server on socket "/tmp/.s.PGSQL.5432" failed: No such file or directory')


@pytest.mark.parametrize("debug", [True, False])
def test_a_page_is_a_503_naming_the_database_not_a_traceback(user, client_for, monkeypatch, settings, debug):
    settings.DEBUG = debug
    monkeypatch.setattr(importlib.import_module("chronicle.views.home"), "home_summary", refuse)  # the home page's first query
    client = client_for(user)
    client.raise_request_exception = False
    response = client.get("/")
    page = response.content.decode()
    assert response.status_code == 503 and response["Retry-After"] == "15"
    assert "The database (PostgreSQL) is not answering" in page and "Nothing you saved is lost" in page
    assert "Traceback" not in page and "OperationalError" not in page and "PGSQL" not in page


@pytest.mark.parametrize("debug", [True, False])
def test_the_api_answers_503_json_and_any_other_failure_500_json(user, monkeypatch, settings, client, debug):
    settings.DEBUG = debug
    token = ApiToken.issue(user=user, name="t")[1]
    monkeypatch.setattr(MemoryBank.objects, "owned_by", refuse)
    response = client.get("/api/banks", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 503 and response.json()["down"] == ["database"]
    assert "unavailable" in response.json()["detail"] and "PGSQL" not in response.content.decode()

    def broken(*args, **kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr(MemoryBank.objects, "owned_by", broken)
    response = client.get("/api/banks", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 500 and response["Content-Type"].startswith("application/json")
    assert "a bug" not in response.content.decode() and "Traceback" not in response.content.decode()


def test_healthz_reports_for_a_caller_with_a_session_while_sessions_cannot_be_read(user, client_for, monkeypatch):
    client = client_for(user)  # logged in: a session cookie
    client.raise_request_exception = False
    monkeypatch.setattr(SessionStore, "load", refuse)
    report = client.get("/healthz")
    assert report.status_code in (200, 503) and "parts" in report.json()
    page = client.get("/")  # the session cannot be read: the page says the database is down
    assert page.status_code == 503 and 'data-part="database"' in page.content.decode()
