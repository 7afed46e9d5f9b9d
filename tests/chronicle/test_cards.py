"""Import/export round trips (Wonda JSON, Card V2 JSON, Card V2 PNG) and malformed files."""

from __future__ import annotations

import base64
import io
import json
import re
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import override_settings
from django.urls import reverse
from PIL import Image
from PIL.PngImagePlugin import PngInfo

from chronicle.demo import load_demo
from chronicle.models import Character, Scenario
from chronicle.services.card_export import character_to_card
from chronicle.services.cards import CardImportError, card_import, import_match

pytestmark = pytest.mark.django_db

FIELDS = ["name", "role", "archetype", "description", "public_face", "background", "communication_style",
          "decision_style", "traits", "skills", "values", "goals", "secrets", "knowledge", "extra_memories",
          "card_extras"]

SILLY_CARD = {
    "spec": "chara_card_v2", "spec_version": "2.0",
    "data": {
        "name": "Seraphina", "description": "A guardian of the forest glade.",
        "personality": "kind, protective, curious",
        "scenario": "You wake up in her glade.", "first_mes": "*She smiles.* You're awake!",
        "mes_example": "<START>\n{{char}}: Rest now.", "creator_notes": "Keep her gentle.",
        "system_prompt": "", "post_history_instructions": "", "alternate_greetings": ["Hello, traveller."],
        "tags": ["fantasy", "guardian"], "creator": "someone", "character_version": "1.2",
        "extensions": {"talkativeness": "0.5", "depth_prompt": {"prompt": "", "depth": 4}},
        "character_book": {"name": "Glade lore", "scan_depth": 4, "extensions": {}, "entries": [
            {"keys": ["glade", "forest"], "content": "The glade is protected by ancient magic.",
             "extensions": {}, "enabled": True, "insertion_order": 0, "comment": "place"},
            {"keys": ["Eldoria"], "content": "Eldoria is the kingdom beyond the forest.",
             "extensions": {}, "enabled": True, "insertion_order": 1},
        ]},
    },
}


def _values(character: Character) -> dict:
    return {f: getattr(character, f) for f in FIELDS}


def _png(card: dict | None, *, chunk: str = "chara") -> bytes:
    info = PngInfo()
    if card is not None:
        info.add_text(chunk, base64.b64encode(json.dumps(card).encode()).decode())
    out = io.BytesIO()
    Image.new("RGB", (8, 8), "white").save(out, format="PNG", pnginfo=info)
    return out.getvalue()


@pytest.mark.parametrize("fmt", ["json", "card.json", "card.png"])
def test_character_export_then_import_gives_the_same_data(client_for, user, other_user, make_character, fmt):
    alex = make_character(user, extra_memories=[{"content": "Alex once ran a marathon.", "keys": ["marathon"], "card": {}}],
                          card_extras={"creator_notes": "demo", "first_mes": "Hi!", "extensions": {"x": 1}},
                          public_face="Alex is the one who books the table.",
                          secrets=["Alex booked the Thai place already.\nA second line."])
    response = client_for(user).get(reverse("character_export", args=[alex.pk, fmt]))
    assert response.status_code == 200 and "attachment" in response["Content-Disposition"]
    result = card_import(owner=other_user, raw=response.content)
    (copy,) = result.characters
    expected, got = _values(alex), _values(copy)
    assert got == expected
    assert copy.preview_bank.seed_status == "pending"


def test_silly_tavern_card_round_trip_keeps_unknown_fields(user):
    (seraphina,) = card_import(owner=user, raw=json.dumps(SILLY_CARD).encode()).characters
    assert seraphina.traits == ["kind", "protective", "curious"]
    assert [m["keys"] for m in seraphina.extra_memories] == [["glade", "forest"], ["Eldoria"]]
    sheet = seraphina.to_sheet()
    assert sheet.extra_memories[0].content == "The glade is protected by ancient magic."
    assert sheet.extra_memories[0].keys == ["glade", "forest"]
    back = character_to_card(seraphina)["data"]
    original = SILLY_CARD["data"]
    for key in ("name", "description", "personality", "scenario", "first_mes", "mes_example", "creator_notes",
                "alternate_greetings", "tags", "creator", "character_version"):
        assert back[key] == original[key], key
    assert {k: v for k, v in back["extensions"].items() if k != "wonda"} == original["extensions"]
    assert back["character_book"] == original["character_book"]


def test_png_card_round_trip_through_the_pages(client_for, user):
    client = client_for(user)
    response = client.post(reverse("import"), {"file": SimpleUploadedFile("s.png", _png(SILLY_CARD), "image/png")})
    seraphina = Character.objects.get(owner=user, name="Seraphina")
    assert response.status_code == 302 and response["Location"] == reverse("import")
    # The import page lists what came in, linked.
    listed = client.get(response["Location"]).content.decode().split('id="imported"', 1)[1].split("</div>", 1)[0]
    assert f'<a href="{reverse("character_detail", args=[seraphina.pk])}">Seraphina</a>' in listed
    assert 'id="imported"' not in client.get(reverse("import")).content.decode()  # said once
    png = client.get(reverse("character_export", args=[seraphina.pk, "card.png"])).content
    image = Image.open(io.BytesIO(png))
    card = json.loads(base64.b64decode(image.text["chara"]))
    assert card["spec"] == "chara_card_v2" and card["data"]["name"] == "Seraphina"
    assert card["data"]["creator_notes"] == "Keep her gentle."
    assert card["data"]["extensions"]["talkativeness"] == "0.5"


def test_scenario_export_then_import_gives_the_same_scenario_and_cast(client_for, user, other_user, make_character, make_scenario):
    alex = make_character(user)
    jordan = make_character(user, name="Jordan", knowledge={"Alex": "Old flatmate."})
    scenario = make_scenario(user, cast=[alex, jordan], pair_notes={"Alex": {"Jordan": "wants Italian"}})
    raw = client_for(user).get(reverse("scenario_export", args=[scenario.pk])).content
    result = card_import(owner=other_user, raw=raw)
    copy = result.scenario
    assert {c.name: _values(c) for c in copy.cast.all()} == {c.name: _values(c) for c in (alex, jordan)}
    for field in ("title", "location", "atmosphere", "time_of_day", "description", "pair_notes"):
        assert getattr(copy, field) == getattr(scenario, field)
    assert copy.owner == other_user and copy.preview_bank.seed_status == "pending"


MALFORMED = [
    (b"{not json", "not valid JSON"),
    (json.dumps({"spec": "chara_card_v3", "data": {"name": "X"}}).encode(), "spec must be chara_card_v2"),
    (json.dumps({"spec": "chara_card_v2", "data": {"description": "nameless"}}).encode(), "data.name is missing"),
    (json.dumps({"name": "Old", "description": "v1 card"}).encode(), "spec must be chara_card_v2"),
    (json.dumps({"spec": "chara_card_v2", "data": {"name": "Big", "description": "x" * 10_001}}).encode(),
     "description is longer than 10,000 characters"),
    (json.dumps({"spec": "chara_card_v2", "data": {"name": "Book", "character_book": {"entries": [{"keys": ["k"]}]}}}).encode(),
     "data.character_book.entries[0].content is missing"),
    (json.dumps({"format": "wonda", "version": 1, "character": {"name": "A", "traits": "not a list"}}).encode(),
     "character.traits must be a list of text"),
    (_png(None), "this PNG has no chara chunk"),
    (b"\x89PNG\r\n\x1a\nbroken", "not a readable PNG"),
    (b"", "the file is empty"),
]


@pytest.mark.parametrize("raw,message", MALFORMED)
def test_malformed_files_are_refused_and_nothing_is_saved(client_for, user, raw, message):
    from memory.models import MemoryBank

    response = client_for(user).post(reverse("import"), {"file": SimpleUploadedFile("card.json", raw)})
    html = response.content.decode()
    assert response.status_code == 400
    assert "Nothing was imported" in html or "The submitted file is empty" in html
    if raw:
        assert message in html.replace("&#x27;", "'")
    assert not Character.objects.exists() and not Scenario.objects.exists() and not MemoryBank.objects.exists()


def test_scenario_file_with_one_bad_character_saves_nothing(user):
    data = {"format": "wonda", "version": 1,
            "scenario": {"title": "Dinner", "cast": ["Alex", "Jordan"]},
            "characters": [{"name": "Alex"}, {"name": "Jordan", "background": "y" * 10_001}]}
    with pytest.raises(CardImportError) as info:
        card_import(owner=user, raw=json.dumps(data).encode())
    assert "characters[1].background is longer than 10,000 characters" in info.value.errors
    assert not Character.objects.exists() and not Scenario.objects.exists()


def test_secrets_and_public_face_travel_in_both_formats(user, make_character):
    from chronicle.services.card_export import character_export

    alex = make_character(user, public_face="Books tables.", secrets=["Hid the receipt.", "Hates pizza."])
    card = character_to_card(alex)["data"]
    assert card["extensions"]["wonda"]["secrets"] == ["Hid the receipt.", "Hates pizza."]
    assert card["extensions"]["wonda"]["public_face"] == "Books tables."
    wonda = character_export(alex)["character"]
    assert wonda["secrets"] == ["Hid the receipt.", "Hates pizza."] and wonda["public_face"] == "Books tables."


def test_a_scenario_keeps_its_name_for_user_through_export(client_for, user, other_user, make_character, make_scenario):
    scenario = make_scenario(user, cast=[make_character(user)], user_name="the traveller")
    raw = client_for(user).get(reverse("scenario_export", args=[scenario.pk])).content
    assert card_import(owner=other_user, raw=raw).scenario.user_name == "the traveller"


def test_import_refuses_a_name_the_writer_already_uses(user, make_character):
    make_character(user)
    card = {"spec": "chara_card_v2", "data": {"name": "Alex", "description": "another Alex"}}
    with pytest.raises(CardImportError) as info:
        card_import(owner=user, raw=json.dumps(card).encode())
    assert any("already have a character" in e for e in info.value.errors)
    assert Character.objects.get(owner=user).description.startswith("Alex is a pragmatic")


def test_import_page_renders(client_for, user):
    html = client_for(user).get(reverse("import")).content.decode()
    assert 'enctype="multipart/form-data"' in html and "Character Card V2" in html


@override_settings(WONDA_UPLOAD_LIMIT_MB=1)
def test_a_card_over_the_upload_limit_is_refused_with_the_sizes(client_for, user):
    raw = json.dumps({**SILLY_CARD, "padding": "x" * int(1.25 * 1024 * 1024)}).encode()
    response = client_for(user).post(reverse("import"), {"file": SimpleUploadedFile("big.card.json", raw)})
    assert response.status_code == 400
    assert "The file is 1.3 MB; imports are limited to 1 MB (WONDA_UPLOAD_LIMIT_MB)." in response.content.decode()
    assert not Character.objects.filter(owner=user).exists()



def test_a_name_clash_can_be_imported_as_a_copy(user, make_character):
    make_character(user)
    card = {"spec": "chara_card_v2", "data": {"name": "Alex", "description": "another Alex"}}
    with pytest.raises(CardImportError) as info:
        card_import(owner=user, raw=json.dumps(card).encode())
    assert info.value.clashes == ["Alex"]
    (copy,) = card_import(owner=user, raw=json.dumps(card).encode(), as_copy=True).characters
    assert copy.name == "Alex (2)" and copy.description == "another Alex"
    (third,) = card_import(owner=user, raw=json.dumps({**card, "data": {"name": "alex"}}).encode(), as_copy=True).characters
    assert third.name == "alex (3)"  # names differing only in case clash too, as in the form
    assert Character.objects.get(owner=user, name="Alex").description.startswith("Alex is a pragmatic")


def test_a_scenario_imported_as_a_copy_renames_its_cast_everywhere(user, make_character):
    make_character(user)  # the writer's own Alex
    data = {"format": "wonda", "version": 1,
            "scenario": {"title": "Dinner", "cast": ["Alex", "Jordan"], "pair_notes": {"Jordan": {"Alex": "owes me"}}},
            "characters": [{"name": "Alex"}, {"name": "Jordan", "knowledge": {"Alex": "flatmate"}}]}
    result = card_import(owner=user, raw=json.dumps(data).encode(), as_copy=True)
    assert sorted(c.name for c in result.scenario.cast.all()) == ["Alex (2)", "Jordan"]
    assert result.scenario.pair_notes == {"Jordan": {"Alex (2)": "owes me"}}
    assert Character.objects.get(owner=user, name="Jordan").knowledge == {"Alex (2)": "flatmate"}


def test_a_scenario_that_names_no_cast_is_played_by_every_character_in_the_file(user):
    data = {"format": "wonda", "version": 1, "scenario": {"title": "Market"},
            "characters": [{"name": "Nell"}, {"name": "Ivo"}]}
    result = card_import(owner=user, raw=json.dumps(data).encode())
    assert sorted(c.name for c in result.scenario.cast.all()) == ["Ivo", "Nell"]
    empty = {**data, "scenario": {"title": "Empty stage", "cast": []}}  # an explicit empty cast stays empty
    assert list(card_import(owner=user, raw=json.dumps(empty).encode(), as_copy=True).scenario.cast.all()) == []


def test_the_copy_name_promised_is_the_one_imported(user, make_character):
    make_character(user)  # Alex; the file brings another Alex and an "Alex (2)"
    data = {"format": "wonda", "version": 1, "scenario": {"title": "Twins", "cast": ["Alex", "Alex (2)"]},
            "characters": [{"name": "Alex"}, {"name": "Alex (2)"}]}
    with pytest.raises(CardImportError) as info:
        card_import(owner=user, raw=json.dumps(data).encode())
    assert info.value.copies == {"Alex": "Alex (3)"}
    result = card_import(owner=user, raw=json.dumps(data).encode(), as_copy=True)
    assert sorted(c.name for c in result.scenario.cast.all()) == ["Alex (2)", "Alex (3)"]


def test_the_import_page_offers_a_copy_on_a_name_clash(client_for, user):
    client = client_for(user)
    raw = json.dumps(SILLY_CARD).encode()
    client.post(reverse("import"), {"file": SimpleUploadedFile("s.json", raw)})
    response = client.post(reverse("import"), {"file": SimpleUploadedFile("s.json", raw)})
    html = response.content.decode()
    assert response.status_code == 409
    assert "you already have" in html and "Seraphina (2)" in html and 'name="import_copy"' in html
    assert Character.objects.filter(owner=user).count() == 1
    pending = re.search(r'name="pending" value="([^"]+)"', html)[1]
    # The token is this writer's: another writer cannot import the held file.
    from django.contrib.auth import get_user_model
    stranger = get_user_model().objects.create_user("mallory", password="pw-mallory-1")
    refused = client_for(stranger).post(reverse("import"), {"pending": pending, "import_copy": "1"})
    assert refused.status_code == 400 and "no longer kept" in refused.content.decode()
    response = client_for(user).post(reverse("import"), {"pending": pending, "import_copy": "1"})
    copy = Character.objects.get(owner=user, name="Seraphina (2)")
    assert response.status_code == 302 and response["Location"] == reverse("import")
    listed = client_for(user).get(reverse("import")).content.decode()
    assert f'<a href="{reverse("character_detail", args=[copy.pk])}">Seraphina (2)</a>' in listed
    assert copy.extra_memories == Character.objects.get(owner=user, name="Seraphina").extra_memories
    assert not Character.objects.filter(owner=stranger).exists()


def test_the_import_page_says_when_a_file_holds_a_scene_and_cast_the_writer_has_unchanged(client_for, user):
    raw = (Path(__file__).resolve().parents[2] / "examples" / "demo.json").read_bytes()
    client = client_for(user)
    assert client.post(reverse("import"), {"file": SimpleUploadedFile("demo.json", raw)}).status_code == 302
    scenario = Scenario.objects.get(owner=user)
    again = client.post(reverse("import"), {"file": SimpleUploadedFile("demo.json", raw)}).content.decode()
    assert "you have already, unchanged" in again
    assert f'<a href="{reverse("scenario_detail", args=[scenario.pk])}">{scenario.title}</a>' in again
    # Once the writer has changed one of its characters, it is a name clash like any other.
    Character.objects.filter(owner=user, name="Sam").update(description="Sam, as the writer rewrote them.")
    changed = client.post(reverse("import"), {"file": SimpleUploadedFile("demo.json", raw)}).content.decode()
    assert "you already have" in changed and "unchanged" not in changed and "Sam (2)" in changed
    assert Character.objects.filter(owner=user).count() == 3


def test_a_file_held_twice_is_matched_to_the_one_under_its_own_names(user):
    """A writer who imported the demo, then a copy of it ("Alex (2)"), runs the file as the one whose
    characters go by the file's names: the copy's would introduce themselves as "Alex (2)"."""
    raw = (Path(__file__).resolve().parents[2] / "examples" / "demo.json").read_bytes()
    original = card_import(owner=user, raw=raw).scenario
    card_import(owner=user, raw=raw, as_copy=True)
    result, renamed = import_match(owner=user, raw=raw)
    assert result.scenario == original and renamed == {}
    assert sorted(c.name for c in result.characters) == ["Alex", "Jordan", "Sam"]


def test_the_demo_bootstrap_gave_is_not_the_demo_file_on_the_import_page(client_for, user):
    """The file brings run settings (stage directions, planted beliefs) that the demo `bootstrap`
    made has not: importing it is not a no-op, so the page does not say it is."""
    load_demo(owner=user)
    raw = (Path(__file__).resolve().parents[2] / "examples" / "demo.json").read_bytes()
    html = client_for(user).post(reverse("import"), {"file": SimpleUploadedFile("demo.json", raw)}).content.decode()
    assert "you already have" in html and "unchanged" not in html


def test_the_copy_checkbox_imports_a_clash_in_one_step(client_for, user, make_character):
    make_character(user)
    card = json.dumps({"spec": "chara_card_v2", "data": {"name": "Alex"}}).encode()
    response = client_for(user).post(reverse("import"), {"file": SimpleUploadedFile("a.json", card), "as_copy": "on"})
    assert response.status_code == 302 and Character.objects.filter(owner=user, name="Alex (2)").exists()


def test_a_png_cards_picture_is_its_portrait_shown_kept_and_exported_back(client_for, user, other_user):
    """The card's image is kept (made small), shown on the character's pages and the run page, and is
    the picture of the exported card; another writer cannot fetch it."""
    out = io.BytesIO()
    art = Image.new("RGB", (800, 1200), (200, 40, 90))
    art.putpixel((0, 0), (1, 2, 3))
    info = PngInfo()
    info.add_text("chara", base64.b64encode(json.dumps(SILLY_CARD).encode()).decode())
    art.save(out, format="PNG", pnginfo=info)
    client = client_for(user)
    client.post(reverse("import"), {"file": SimpleUploadedFile("s.png", out.getvalue(), "image/png")})
    seraphina = Character.objects.get(owner=user, name="Seraphina")
    url = reverse("character_portrait", args=[seraphina.pk])
    assert f'src="{url}"' in client.get(reverse("character_detail", args=[seraphina.pk])).content.decode()
    assert f'src="{url}"' in client.get(reverse("character_list")).content.decode()
    portrait = Image.open(io.BytesIO(client.get(url).content))
    assert portrait.size == (341, 512) and "chara" not in portrait.info  # small, and the card is not in it twice

    exported = Image.open(io.BytesIO(client.get(reverse("character_export", args=[seraphina.pk, "card.png"])).content))
    assert exported.size == (341, 512) and exported.convert("RGB").getpixel((100, 100)) == (200, 40, 90)
    (again,) = card_import(owner=other_user, raw=client.get(reverse("character_export", args=[seraphina.pk, "card.png"])).content).characters
    assert again.name == "Seraphina" and again.portrait.png  # and the copy keeps it
    assert client_for(other_user).get(url).status_code == 404  # another writer's character's picture


def test_a_character_without_a_picture_has_no_portrait(client_for, user, make_character):
    alex = make_character(user)
    client = client_for(user)
    assert client.get(reverse("character_portrait", args=[alex.pk])).status_code == 404
    assert "character_portrait" not in client.get(reverse("character_detail", args=[alex.pk])).content.decode()
    assert Image.open(io.BytesIO(client.get(reverse("character_export", args=[alex.pk, "card.png"])).content)).size == (400, 600)
