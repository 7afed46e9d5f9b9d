"""Every URL of another writer's character or scenario answers 404, for reads and writes alike."""

from __future__ import annotations

import pytest
from django.urls import reverse

from chronicle.models import Character, Scenario

pytestmark = pytest.mark.django_db

CHARACTER_URLS = [
    ("get", "character_detail", ()), ("get", "character_edit", ()), ("post", "character_edit", ()),
    ("post", "character_validate", ()), ("get", "character_delete", ()), ("post", "character_delete", ()),
    ("get", "character_preview", ()), ("post", "character_preview", ()), ("get", "character_ask", ()),
    ("get", "character_export", ("json",)), ("get", "character_export", ("card.json",)),
    ("get", "character_export", ("card.png",)),
]
SCENARIO_URLS = [
    ("get", "scenario_detail", ()), ("get", "scenario_edit", ()), ("post", "scenario_edit", ()),
    ("post", "scenario_validate", ()), ("get", "scenario_delete", ()), ("post", "scenario_delete", ()),
    ("get", "scenario_preview", ()), ("post", "scenario_preview", ()), ("get", "scenario_export", ()),
]


@pytest.mark.parametrize("method,name,extra", CHARACTER_URLS)
def test_other_writers_character_is_404(client_for, user, other_user, make_character, method, name, extra):
    theirs = make_character(other_user, name="Brutus")
    response = getattr(client_for(user), method)(reverse(name, args=[theirs.pk, *extra]), {"q": "who am I?", "name": "X"})
    assert response.status_code == 404
    theirs.refresh_from_db()
    assert theirs.name == "Brutus"


@pytest.mark.parametrize("method,name,extra", SCENARIO_URLS)
def test_other_writers_scenario_is_404(client_for, user, other_user, make_scenario, method, name, extra):
    theirs = make_scenario(other_user, title="Their plot")
    response = getattr(client_for(user), method)(reverse(name, args=[theirs.pk, *extra]), {"title": "Mine now"})
    assert response.status_code == 404
    assert Scenario.objects.get(pk=theirs.pk).title == "Their plot"


def test_lists_and_home_show_only_own_objects(client_for, user, other_user, make_character, make_scenario):
    make_character(other_user, name="Brutus")
    make_scenario(other_user, title="Their plot")
    client = client_for(user)
    for name in ("home", "character_list", "scenario_list"):
        html = client.get(reverse(name)).content.decode()
        assert "Brutus" not in html and "Their plot" not in html


def test_pairs_partial_ignores_other_writers_characters(client_for, user, other_user, make_character):
    theirs = make_character(other_user, name="Brutus")
    mine = make_character(user, name="Ada", knowledge={})
    html = client_for(user).get(reverse("scenario_pairs"), {"cast": [theirs.pk, mine.pk]}, HTTP_HX_REQUEST="true").content.decode()
    assert "Brutus" not in html


def test_anonymous_visitor_is_sent_to_login(client, user, make_character):
    alex = make_character(user)
    for url in (reverse("home"), reverse("character_detail", args=[alex.pk]), reverse("import")):
        response = client.get(url)
        assert response.status_code == 302 and reverse("login") in response["Location"]
    assert Character.objects.count() == 1
