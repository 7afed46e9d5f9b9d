"""What a writer tripped over (issue 18), each as a request sees it: History in words, branches
compared as changes and only with relatives, a favicon."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from chronicle.writing import services
from tests.chronicle.writing.conftest import prepare_and_run, run_all, start

pytestmark = pytest.mark.django_db


def test_history_says_it_in_words(client_for, user, finished):
    client = client_for(user)
    client.post(reverse("chronicle_line", args=[finished.pk, 0]), {"strike": ""})
    turn = finished.turns.get(index=3)
    excluded = turn.retrievals.get(tool="query_memory").results[0]["memory_id"]
    services.override_toggle(turn=turn, kind="exclude", memory_id=excluded, actor=user, on=True)
    page = client.get(reverse("chronicle_history", args=[finished.pk])).content.decode()
    strike = next(row for row in page.split("<tr data-edit=")[1:] if "struck out" in row)
    assert re.search(r'class="before">not struck out</td><td class="after">struck out<', strike)
    kept_out = next(row for row in page.split("<tr data-edit=")[1:] if "memories kept out of the turn" in row)
    assert re.search(rf'class="before">none</td><td class="after">#{excluded}<', kept_out)
    assert "True" not in page and "False" not in page and f"[{excluded}]" not in page


def test_compare_shows_this_branchs_words_as_additions_and_offers_only_relatives(client_for, user, finished, dinner):
    client = client_for(user)
    services.line_override_set(turn=finished.turns.get(index=3), text="Enough talk. I booked Bella's for eight.",
                               actor=user)
    client.post(reverse("turn_regenerate", args=[finished.pk, 3]))
    branch = prepare_and_run(finished.branches.get())
    stranger = run_all(start(user, dinner, max_turns=2))
    page = client.get(reverse("chronicle_compare", args=[branch.pk]))
    assert page.context["other"] == finished
    assert [run.pk for run in page.context["choices"]] == [finished.pk]  # not the unrelated run
    row = next(r for r in page.context["rows"] if not r.same)
    # This run's own words are additions (green), never struck out; the parent's are the removals.
    assert "<ins>" in row.left_html and "<del>" not in row.left_html
    assert "<ins>" not in row.right_html
    assert client.get(reverse("chronicle_compare", args=[branch.pk]), {"other": stranger.pk}).status_code == 404


def test_every_page_has_a_favicon(client):
    response = client.get("/favicon.ico")
    assert response.status_code == 301 and response["Location"].endswith("/img/favicon.svg")
