"""Hostile text on the writer's side: every field of the character form (made and edited), the
imports, the seat, the token page, and a form body too large to read. Each is refused with a 4xx
that names the field, and nothing is saved (a NUL in a list field used to be a 500)."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from api.models import ApiToken
from chronicle.forms import CharacterForm
from chronicle.models import Character
from chronicle.services.cards import CardImportError, card_import
from tests.chronicle.test_cards import SILLY_CARD

pytestmark = pytest.mark.django_db

# What a browser can send (a lone surrogate cannot be encoded in a form post: it is tried on the
# form itself below): a NUL byte, a control character, and names that show nothing.
HOSTILE = {"nul": "Al\x00ex", "control": "Al\x07ex", "zero-width": "\u200b\u200b", "rlo": "\u202e"}

VALID = {"name": "Mira", "role": "Lighthouse keeper", "traits": ["calm"], "secrets": ["She sank the boat."],
         "knowledge_name": ["Jordan"], "knowledge_text": ["Jordan fishes at dawn."],
         "extra_memories_index": [""], "extra_memories_keys": ["lamp"],
         "extra_memories_content": ["The lamp is lit at dusk."], "extra_memories_state": ["on"]}
# Each input the form takes text in: (its name, the form field it belongs to, the label the error names).
FIELDS = [
    *((f, f, f.replace("_", " ").capitalize()) for f in ("name", "role", "archetype", "description", "public_face",
                                                          "background", "communication_style", "decision_style",
                                                          "traits", "skills", "values", "goals", "secrets",
                                                          "alternate_greetings")),
    ("knowledge_name", "knowledge", "Knowledge"), ("knowledge_text", "knowledge", "Knowledge"),
    ("extra_memories_content", "extra_memories", "Lore entries"), ("extra_memories_keys", "extra_memories", "Lore entries"),
    ("first_mes", "first_mes", "First message"), ("card_scenario", "card_scenario", "Scenario (card)"),
    ("mes_example", "mes_example", "Example messages"),
]
LISTS = {"traits", "skills", "values", "goals", "secrets", "alternate_greetings", "knowledge_name", "knowledge_text",
         "extra_memories_keys", "extra_memories_content"}


def _post(data: dict, name: str, text: str) -> dict:
    return {**data, name: [text] if name in LISTS else text}


@pytest.mark.parametrize("editing", [False, True], ids=["create", "edit"])
@pytest.mark.parametrize("name, form_field, label", FIELDS, ids=[name for name, _f, _l in FIELDS])
def test_every_character_field_refuses_hostile_text_naming_it_and_saves_nothing(
        client_for, user, make_character, name, form_field, label, editing):
    client = client_for(user)
    mira = make_character(user, **{k: v for k, v in VALID.items() if k in ("name", "role", "traits", "secrets")}) \
        if editing else None
    url = reverse("character_edit", args=[mira.pk]) if editing else reverse("character_create")
    for what, text in HOSTILE.items():
        if name == "extra_memories_keys" and what in ("zero-width", "rlo"):
            text = f"lamp, {text}"  # keys are split on commas: the invisible one among them
        response = client.post(url, _post(VALID, name, text))
        assert response.status_code == 400, (what, response.status_code)
        errors = response.context["form"].errors
        assert form_field in errors, (what, dict(errors))
        assert errors[form_field][0].startswith(f"{label}: "), (what, errors[form_field])
        assert "Traceback" not in response.content.decode()
    if editing:
        before = {f: getattr(mira, f) for f in ("name", "role", "traits", "secrets", "knowledge", "extra_memories")}
        mira.refresh_from_db()
        assert {f: getattr(mira, f) for f in before} == before
    else:
        assert not Character.objects.filter(owner=user).exists()


@pytest.mark.parametrize("field", ["name", "description", "traits", "secrets", "alternate_greetings"])
def test_a_lone_surrogate_in_a_character_field_is_an_error_on_it(user, field):
    """A browser cannot post one, but a script filling the form in can."""
    value = ["Al\ud800ex"] if field in LISTS else "Al\ud800ex"
    form = CharacterForm({**VALID, field: value}, owner=user)
    assert not form.is_valid() and "lone surrogate" in form.errors[field][0]


def test_a_clean_character_is_saved(client_for, user):
    assert client_for(user).post(reverse("character_create"), VALID).status_code == 302
    mira = Character.objects.get(owner=user)
    assert mira.knowledge == {"Jordan": "Jordan fishes at dawn."} and mira.extra_memories[0]["keys"] == ["lamp"]


@pytest.mark.parametrize("what, text", [("nul", "\u0000"), ("surrogate", "\ud800"), ("control", "\u001b[31m")])
def test_an_imported_card_with_hostile_text_anywhere_is_refused_naming_where(user, what, text):
    card = json.loads(json.dumps(SILLY_CARD))
    card["data"]["extensions"]["depth_prompt"]["prompt"] = f"Be{text}kind"
    with pytest.raises(CardImportError) as refused:
        card_import(owner=user, raw=json.dumps(card).encode())
    assert refused.value.errors[0].startswith("data.extensions.depth_prompt.prompt: contains")
    card = json.loads(json.dumps(SILLY_CARD))
    card["data"]["name"] = "\u200b"
    with pytest.raises(CardImportError, match="data.name: has no visible character"):
        card_import(owner=user, raw=json.dumps(card).encode())
    assert not Character.objects.exists()


def test_the_import_page_names_the_field_of_a_card_with_a_nul_byte(client_for, user):
    card = json.loads(json.dumps(SILLY_CARD))
    card["data"]["first_mes"] = "Hello\u0000"
    upload = SimpleUploadedFile("card.json", json.dumps(card).encode(), "application/json")
    response = client_for(user).post(reverse("import"), {"file": upload})
    assert response.status_code == 400 and "data.first_mes: contains a NUL byte" in response.content.decode()
    assert not Character.objects.exists()


def test_a_token_name_that_shows_nothing_is_refused(client_for, user):
    for text in HOSTILE.values():
        response = client_for(user).post(reverse("api_tokens"), {"name": text})
        assert response.status_code == 400 and "Token name: " in response.content.decode()
    assert not ApiToken.objects.exists()


@pytest.mark.parametrize("debug", [True, False])
def test_a_form_body_over_the_limit_is_a_413_page_in_a_writers_words(client_for, user, settings, debug):
    settings.DEBUG = debug
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1024 * 1024
    response = client_for(user).post(reverse("character_create"), {**VALID, "description": "x" * (2 * 1024 * 1024)})
    page = " ".join(response.content.decode().split())
    assert response.status_code == 413
    assert "Too much at once" in page and "1 MB" in page and "nothing was saved" in page
    assert "Traceback" not in page and "RequestDataTooBig" not in page
    assert not Character.objects.exists()


def test_a_run_export_with_a_nul_byte_is_refused_naming_where_and_imports_nothing(client_for, user):
    from chronicle.simulation.run.models import Simulation

    export = {"format": "wonda.simulation", "simulation": {"title": "Dinner"}, "scenario": {}, "cast": [],
              "turns": [{"index": 1, "agent": "Alex", "utterance": "Pizza\u0000?"}]}
    upload = SimpleUploadedFile("run.json", json.dumps(export).encode(), "application/json")
    response = client_for(user).post(reverse("chronicle_import"), {"file": upload})
    assert response.status_code == 400 and "turns[0].utterance: contains a NUL byte" in response.content.decode()
    assert not Simulation.objects.exists()
