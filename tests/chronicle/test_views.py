"""Pages as full pages and as htmx partials."""

from __future__ import annotations

import pytest
from django.urls import reverse

from chronicle.models import Character, Scenario
from tests.chronicle.simulation.conftest import dinner  # noqa: F401  (fixture)

pytestmark = pytest.mark.django_db
HX = {"HTTP_HX_REQUEST": "true"}


def test_home_lists_the_writers_characters_and_scenarios(client_for, user, make_character, make_scenario):
    alex = make_character(user)
    make_scenario(user, cast=[alex], title="Dinner plans")
    html = client_for(user).get(reverse("home")).content.decode()
    assert "Alex" in html and "Dinner plans" in html
    assert "seeding" in html  # each item shows its seeding status
    assert 'href="/characters/"' in html and 'href="/import/"' in html  # nav links


def test_home_empty_state_invites_to_write(client_for, user):
    html = client_for(user).get(reverse("home")).content.decode()
    assert "No characters yet" in html and "No scenarios yet" in html


def test_character_list_full_page_and_empty_state(client_for, user, make_character):
    client = client_for(user)
    assert "No characters yet" in client.get(reverse("character_list")).content.decode()
    make_character(user)
    html = client.get(reverse("character_list")).content.decode()
    assert "<html" in html and "Alex" in html and "Project manager" in html


def test_create_character_with_lists_and_knowledge(client_for, user):
    response = client_for(user).post(reverse("character_create"), {
        "name": "Jordan", "role": "Sous-chef", "traits": ["warm", "impulsive", ""], "skills": ["cooking"],
        "values": [], "goals": ["eat Italian"],
        "knowledge_name": ["Alex", ""], "knowledge_text": ["Alex is organised.", ""],
    })
    jordan = Character.objects.get(owner=user, name="Jordan")
    assert response.status_code == 302 and response["Location"] == reverse("character_detail", args=[jordan.pk])
    assert jordan.traits == ["warm", "impulsive"]
    assert jordan.knowledge == {"Alex": "Alex is organised."}
    assert jordan.preview_bank is not None and jordan.preview_bank.seed_status == "pending"


def test_character_form_renders_one_input_per_list_item(client_for, user, make_character):
    alex = make_character(user)
    html = client_for(user).get(reverse("character_edit", args=[alex.pk])).content.decode()
    assert 'name="traits" value="pragmatic"' in html and 'name="traits" value="organised"' in html
    assert 'name="knowledge_name" value="Jordan"' in html
    assert "data-warn-unsaved" in html and "csrfmiddlewaretoken" in html


def test_edit_character_saves_and_reseeds(client_for, user, make_character):
    alex = make_character(user)
    bank = alex.preview_bank
    bank.seed_status = "done"
    bank.save()
    response = client_for(user).post(reverse("character_edit", args=[alex.pk]), {
        "name": "Alex", "role": "Team lead", "traits": ["calm"]})
    assert response.status_code == 302
    alex.refresh_from_db()
    assert alex.role == "Team lead" and alex.traits == ["calm"] and alex.knowledge == {}
    assert alex.preview_bank_id == bank.pk and alex.preview_bank.seed_status == "pending"


def test_invalid_save_shows_errors_inline_and_keeps_input(client_for, user):
    response = client_for(user).post(reverse("character_create"), {"name": "", "role": "x" * 201,
                                                                    "traits": ["kept trait"]})
    html = response.content.decode()
    assert response.status_code == 400
    assert "This field is required." in html and "at most 200 characters" in html
    assert 'value="kept trait"' in html
    assert not Character.objects.exists()


def test_inline_validation_returns_only_that_fields_errors(client_for, user, make_character):
    make_character(user)
    client = client_for(user)
    response = client.post(reverse("character_validate_new"), {"_field": "name", "name": "alex"}, **HX)
    html = response.content.decode()
    assert "<html" not in html and 'id="errors-name"' in html
    assert "You already have a character named alex." in html
    ok = client.post(reverse("character_validate_new"), {"_field": "name", "name": "Sam"}, **HX).content.decode()
    assert 'id="errors-name"' in ok and "errorlist" not in ok
    traits = client.post(reverse("character_validate_new"), {"_field": "traits", "name": "Sam", "traits": ["y" * 201]}, **HX)
    assert "longer than 200 characters" in traits.content.decode()


def test_character_detail_full_page_and_polling_partial(client_for, user, make_character):
    alex = make_character(user)
    client = client_for(user)
    page = client.get(reverse("character_detail", args=[alex.pk])).content.decode()
    assert "<html" in page and "Ask as Alex" in page and "<progress" in page
    assert 'hx-trigger="every 1s"' in page
    partial = client.get(reverse("character_preview", args=[alex.pk]), **HX)
    html = partial.content.decode()
    assert partial.status_code == 200 and "<html" not in html and "<progress" in html and 'id="preview"' in html


def test_preview_stops_polling_and_shows_failure_with_retry(client_for, user, make_character):
    alex = make_character(user)
    bank = alex.preview_bank
    bank.seed_status, bank.seed_error = "failed", "Seeding failed: the embedder is unavailable"
    bank.save()
    client = client_for(user)
    response = client.get(reverse("character_preview", args=[alex.pk]), **HX)
    html = response.content.decode()
    assert response.status_code == 286  # HttpResponseStopPolling
    assert "the embedder is unavailable" in html and "Retry seeding" in html and "every 1s" not in html
    retry = client.post(reverse("character_preview", args=[alex.pk]), {"retry": "1"}, **HX)
    assert retry.status_code == 200 and "<progress" in retry.content.decode()
    bank.refresh_from_db()
    assert bank.seed_status == "pending" and bank.seed_error == ""


def test_done_preview_groups_memories_by_category_with_keys(client_for, user, make_character):
    from memory.services import seed_bank

    alex = make_character(user)
    seed_bank(bank=alex.preview_bank, characters=[alex.to_sheet()], scenario=None)
    response = client_for(user).get(reverse("character_preview", args=[alex.pk]), **HX)
    html = response.content.decode()
    assert response.status_code == 286
    assert "Identity" in html and "Background" in html and "Knowledge of Jordan" in html
    assert "who am I?" in html  # a canonical key
    assert "Alex is a pragmatic project manager" in html


def test_ask_as_the_character_ranks_identity_first_with_bars(client_for, user, make_character):
    from memory.services import seed_bank

    alex = make_character(user)
    seed_bank(bank=alex.preview_bank, characters=[alex.to_sheet()], scenario=None)
    client = client_for(user)
    partial = client.get(reverse("character_ask", args=[alex.pk]), {"q": "who am I?"}, **HX).content.decode()
    assert "<html" not in partial and 'id="ask-results"' in partial
    first = partial.index('class="result"')
    assert "Alex is a pragmatic project manager" in partial[first:partial.index("</li>", first)]
    assert 'class="bar similarity"' in partial
    page = client.get(reverse("character_ask", args=[alex.pk]), {"q": "who am I?"}).content.decode()
    assert "<html" in page and "Alex is a pragmatic project manager" in page


def test_delete_character_asks_first(client_for, user, make_character):
    alex = make_character(user)
    client = client_for(user)
    confirm = client.get(reverse("character_delete", args=[alex.pk])).content.decode()
    assert "Delete Alex?" in confirm and Character.objects.filter(pk=alex.pk).exists()
    response = client.post(reverse("character_delete", args=[alex.pk]))
    assert response.status_code == 302 and not Character.objects.filter(pk=alex.pk).exists()


def test_scenario_create_with_cast_and_pair_notes(client_for, user, make_character):
    alex = make_character(user)
    jordan = make_character(user, name="Jordan", knowledge={})
    response = client_for(user).post(reverse("scenario_create"), {
        "title": "Dinner", "location": "Living room", "atmosphere": "relaxed", "time_of_day": "evening",
        "description": "Where to eat?", "cast": [alex.pk, jordan.pk],
        f"pair-{alex.pk}-{jordan.pk}": "Jordan wants Italian.", f"pair-{jordan.pk}-{alex.pk}": "",
    })
    scenario = Scenario.objects.get(owner=user)
    assert response.status_code == 302
    assert set(scenario.cast.all()) == {alex, jordan}
    assert scenario.pair_notes == {"Alex": {"Jordan": "Jordan wants Italian."}}
    assert scenario.preview_bank.seed_status == "pending"
    sheets = {s.name: s for s in scenario.cast_sheets()}
    assert "Jordan wants Italian." in sheets["Alex"].knowledge["Jordan"]
    assert "Jordan loves Italian food." in sheets["Alex"].knowledge["Jordan"]


def test_scenario_pages_full_and_partial(client_for, user, make_character, make_scenario):
    alex = make_character(user)
    jordan = make_character(user, name="Jordan", knowledge={})
    scenario = make_scenario(user, cast=[alex, jordan], pair_notes={"Alex": {"Jordan": "old friend"}})
    client = client_for(user)
    assert "Dinner" in client.get(reverse("scenario_list")).content.decode()
    edit = client.get(reverse("scenario_edit", args=[scenario.pk])).content.decode()
    assert "What Alex knows about" in edit and "old friend" in edit
    pairs = client.get(reverse("scenario_pairs"), {"cast": [alex.pk, jordan.pk], f"pair-{jordan.pk}-{alex.pk}": "typed"}, **HX)
    html = pairs.content.decode()
    assert "<html" not in html and 'id="pair-notes"' in html and "typed" in html and "What Jordan knows about" in html
    detail = client.get(reverse("scenario_detail", args=[scenario.pk])).content.decode()
    assert "<progress" in detail and "Alex" in detail
    preview = client.get(reverse("scenario_preview", args=[scenario.pk]), **HX)
    assert preview.status_code == 200 and "<html" not in preview.content.decode()


def test_scenario_validation_errors(client_for, user):
    response = client_for(user).post(reverse("scenario_create"), {"title": "", "location": "x" * 10_001})
    html = response.content.decode()
    assert response.status_code == 400 and "This field is required." in html and "at most 10000 characters" in html
    assert not Scenario.objects.exists()


def test_scenario_cast_only_offers_own_characters(client_for, user, other_user, make_character):
    theirs = make_character(other_user, name="Brutus")
    response = client_for(user).post(reverse("scenario_create"), {"title": "Heist", "cast": [theirs.pk]})
    assert response.status_code == 400 and not Scenario.objects.filter(owner=user).exists()


def test_delete_scenario_keeps_characters(client_for, user, make_character, make_scenario):
    alex = make_character(user)
    scenario = make_scenario(user, cast=[alex])
    client = client_for(user)
    assert "Delete Dinner?" in client.get(reverse("scenario_delete", args=[scenario.pk])).content.decode()
    client.post(reverse("scenario_delete", args=[scenario.pk]))
    assert not Scenario.objects.exists() and Character.objects.filter(pk=alex.pk).exists()


def test_user_text_is_escaped(client_for, user, make_character):
    alex = make_character(user, name="<script>alert(1)</script>", description="<b>bold</b>")
    html = client_for(user).get(reverse("character_detail", args=[alex.pk])).content.decode()
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;" in html and "<b>bold</b>" not in html


def test_pages_with_an_htmx_partial_vary_on_hx_request(client_for, user, make_character, make_scenario, dinner):
    """A cache (browser, proxy) must never hand a partial back for a full page or the reverse: every
    URL that answers both sends `Vary: HX-Request`, whichever of the two it answered this time."""
    from memory.models import Memory
    from tests.chronicle.writing.conftest import run_all, start

    client = client_for(user)
    alex = make_character(user, name="Riley")
    scenario = make_scenario(user, cast=[alex])
    finished = run_all(start(user, dinner))
    memory = Memory.objects.in_bank(finished.bank).first()
    pk = finished.pk
    gets = [reverse("character_preview", args=[alex.pk]), reverse("character_ask", args=[alex.pk]) + "?q=who",
            reverse("scenario_preview", args=[scenario.pk]), reverse("turn_inspect", args=[pk, 3]) + "?q=pasta",
            reverse("simulation_detail", args=[pk])]
    posts = [(reverse("character_preview", args=[alex.pk]), {"retry": "1"}),
             (reverse("scenario_preview", args=[scenario.pk]), {"retry": "1"}),
             (reverse("turn_override", args=[pk, 3]), {"kind": "pin", "memory_id": memory.pk, "on": "1"}),
             (reverse("chronicle_line", args=[pk, 0]), {"star": ""}),
             (reverse("chronicle_memory", args=[pk, memory.pk]), {"content": memory.content, "importance": "5"}),
             (reverse("turn_regenerate", args=[pk, 3]), {})]
    for headers in ({}, HX):
        for url in gets:
            response = client.get(url, **headers)
            assert response.status_code in (200, 286), url
            assert "HX-Request" in response.get("Vary", ""), url
        for url, data in posts:
            response = client.post(url, data, **headers)
            assert response.status_code in (200, 286, 302), url
            assert "HX-Request" in response.get("Vary", ""), url
        # The old turn address: the panel for htmx, a redirect to the inspector for a browser.
        response = client.get(reverse("simulation_turn", args=[pk, 3]), **headers)
        assert response.status_code in (200, 302) and "HX-Request" in response.get("Vary", "")
