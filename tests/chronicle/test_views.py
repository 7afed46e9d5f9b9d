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
    from memory.forming.seeding import seed_bank

    alex = make_character(user)
    seed_bank(bank=alex.preview_bank, characters=[alex.to_sheet()], scenario=None)
    response = client_for(user).get(reverse("character_preview", args=[alex.pk]), **HX)
    html = response.content.decode()
    assert response.status_code == 286
    assert "Identity" in html and "Background" in html and "Knowledge of Jordan" in html
    assert "who am I?" in html  # a canonical key
    assert "Alex is a pragmatic project manager" in html


def test_ask_as_the_character_ranks_identity_first_with_bars(client_for, user, make_character):
    from memory.forming.seeding import seed_bank

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
    from tests.factories import run_all, start

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


# --- public face, secrets, card fields, lore entries, Name for {{user}} ---------------

def _form_data(character, **changes) -> dict:
    """What the edit page posts for `character` unchanged (lore rows included), plus `changes`."""
    data = {"name": character.name, "role": character.role, "description": character.description,
            "traits": list(character.traits), "secrets": list(character.secrets),
            "extra_memories_index": [], "extra_memories_keys": [], "extra_memories_content": [],
            "extra_memories_state": []}
    for row in character.lore_entries():
        data["extra_memories_index"].append(str(row["index"]))
        data["extra_memories_keys"].append(", ".join(row["keys"]))
        data["extra_memories_content"].append(row["content"])
        data["extra_memories_state"].append("on" if row["enabled"] else "off")
    return {**data, **changes}


def test_public_face_and_long_secrets_are_edited_and_shown_escaped(client_for, user):
    client = client_for(user)
    secret = "Mira <b>sank</b> the boat.\nNobody saw her do it, not even the harbourmaster's dog." * 3
    response = client.post(reverse("character_create"), {
        "name": "Mira", "public_face": "Known for her lantern.", "secrets": [secret, "", "She can't swim."]})
    mira = Character.objects.get(owner=user, name="Mira")
    assert response.status_code == 302
    assert mira.public_face == "Known for her lantern." and mira.secrets == [secret.strip(), "She can't swim."]
    edit = client.get(reverse("character_edit", args=[mira.pk])).content.decode()
    assert '<textarea name="secrets"' in edit and "&lt;b&gt;sank&lt;/b&gt;" in edit
    detail = client.get(reverse("character_detail", args=[mira.pk])).content.decode()
    assert "Known for her lantern." in detail and "private" in detail
    assert "&lt;b&gt;sank&lt;/b&gt;" in detail and "<b>sank</b>" not in detail
    too_long = client.post(reverse("character_edit", args=[mira.pk]), _form_data(mira, secrets=["x" * 10_001]))
    assert too_long.status_code == 400 and "longer than 10,000 characters" in too_long.content.decode()


def test_card_fields_are_edited_in_the_form_and_kept_for_export(client_for, user, make_character):
    alex = make_character(user, card_extras={"first_mes": "Hi {{user}}!", "creator_notes": "keep me"})
    client = client_for(user)
    edit = client.get(reverse("character_edit", args=[alex.pk])).content.decode()
    assert "Hi {{user}}!" in edit and 'name="card_scenario"' in edit and 'name="mes_example"' in edit
    response = client.post(reverse("character_edit", args=[alex.pk]), _form_data(
        alex, first_mes="Evening, {{user}}.", alternate_greetings=["Oh, it's you.", ""],
        card_scenario="{{char}} hosts dinner.", mes_example="<START>\n{{char}}: Booked."))
    assert response.status_code == 302
    alex.refresh_from_db()
    assert alex.card_extras == {"first_mes": "Evening, {{user}}.", "alternate_greetings": ["Oh, it's you."],
                                "scenario": "{{char}} hosts dinner.", "mes_example": "<START>\n{{char}}: Booked.",
                                "creator_notes": "keep me"}
    card = client.get(reverse("character_export", args=[alex.pk, "card.json"])).json()["data"]
    assert card["first_mes"] == "Evening, {{user}}." and card["scenario"] == "{{char}} hosts dinner."
    assert card["creator_notes"] == "keep me"
    detail = client.get(reverse("character_detail", args=[alex.pk])).content.decode()
    assert "Evening, {{user}}." in detail and "Oh, it&#x27;s you." in detail
    # Clearing a field removes it from the card.
    client.post(reverse("character_edit", args=[alex.pk]), _form_data(alex, first_mes=""))
    alex.refresh_from_db()
    assert "first_mes" not in alex.card_extras and alex.card_extras["creator_notes"] == "keep me"


def test_lore_entries_are_edited_disabled_deleted_and_added_then_reseeded(client_for, user, make_character):
    from memory.forming.seeding import seed_bank

    lore = [{"content": "The glade is protected by ancient magic.", "keys": ["glade"],
             "card": {"comment": "place", "insertion_order": 3}},
            {"content": "Eldoria is the kingdom beyond the forest.", "keys": ["Eldoria"], "card": {}},
            {"content": "The river runs west.", "keys": ["river"], "card": {}}]
    alex = make_character(user, extra_memories=lore)
    alex.preview_bank.seed_status = "done"
    alex.preview_bank.save()
    client = client_for(user)
    edit = client.get(reverse("character_edit", args=[alex.pk])).content.decode()
    assert "The glade is protected by ancient magic." in edit and 'value="glade"' in edit
    data = _form_data(alex)
    data["extra_memories_content"][0] = "The glade is protected by old moonwort magic."
    data["extra_memories_state"][1] = "off"
    data["extra_memories_state"][2] = "delete"
    data["extra_memories_index"].append("")
    data["extra_memories_keys"].append("bridge, troll")
    data["extra_memories_content"].append("A troll guards the bridge.")
    data["extra_memories_state"].append("on")
    response = client.post(reverse("character_edit", args=[alex.pk]), data)
    assert response.status_code == 302
    alex.refresh_from_db()
    assert alex.extra_memories == [
        {"content": "The glade is protected by old moonwort magic.", "keys": ["glade"],
         "card": {"comment": "place", "insertion_order": 3}},
        {"content": "Eldoria is the kingdom beyond the forest.", "keys": ["Eldoria"], "card": {"enabled": False}},
        {"content": "A troll guards the bridge.", "keys": ["bridge", "troll"], "card": {}},
    ]
    assert alex.preview_bank.seed_status == "pending"  # saving re-seeds, like any other edit
    seed_bank(bank=alex.preview_bank, characters=[alex.to_sheet()], scenario=None)
    lore_now = set(alex.preview_bank.memories.filter(status="active", kind="semantic").values_list("content", flat=True))
    assert lore_now == {"The glade is protected by old moonwort magic.", "A troll guards the bridge."}
    detail = client.get(reverse("character_detail", args=[alex.pk])).content.decode()
    assert "disabled" in detail and "Eldoria is the kingdom" in detail
    bad = dict(data, extra_memories_content=["", *data["extra_memories_content"][1:]])
    response = client.post(reverse("character_edit", args=[alex.pk]), bad)
    assert response.status_code == 400 and "Lore entry 1 has keys but no text" in response.content.decode()


def test_scenario_form_sets_the_name_for_user(client_for, user, make_character):
    alex = make_character(user)
    client = client_for(user)
    assert "Name for {{user}}" in client.get(reverse("scenario_create")).content.decode()
    response = client.post(reverse("scenario_create"), {"title": "Glade", "cast": [alex.pk], "user_name": "the wanderer"})
    scenario = Scenario.objects.get(owner=user, title="Glade")
    assert response.status_code == 302 and scenario.user_name == "the wanderer"
    assert "the wanderer" in client.get(reverse("scenario_detail", args=[scenario.pk])).content.decode()

