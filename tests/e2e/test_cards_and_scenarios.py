"""Import a Card V2 PNG in the browser and export it back; the demo scenario's edit page; unsaved-changes warning."""

from __future__ import annotations

import base64
import io
import json
import re

import pytest
from PIL import Image
from PIL.PngImagePlugin import PngInfo
from playwright.sync_api import expect

from chronicle.models import Scenario

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

CARD = {"spec": "chara_card_v2", "spec_version": "2.0", "data": {
    "name": "Seraphina", "description": "A guardian of the forest glade.", "personality": "kind, protective",
    "creator_notes": "Keep her gentle.", "extensions": {"talkativeness": "0.5"},
    "character_book": {"entries": [{"keys": ["glade"], "content": "The glade is protected by old magic.",
                                    "extensions": {}, "enabled": True, "insertion_order": 0}]}}}


def _card_png(tmp_path, card) -> str:
    info = PngInfo()
    if card is not None:
        info.add_text("chara", base64.b64encode(json.dumps(card).encode()).decode())
    path = tmp_path / ("card.png" if card else "plain.png")
    Image.new("RGB", (64, 96), (200, 180, 240)).save(path, pnginfo=info)
    return str(path)


def test_import_card_png_and_export_it_back(logged_in_page, tmp_path, shot):
    page = logged_in_page
    page.get_by_role("navigation").get_by_role("link", name="Import").click()
    page.set_input_files("input[type=file]", _card_png(tmp_path, None))
    page.get_by_role("button", name="Import", exact=True).click()
    expect(page.get_by_role("alert")).to_contain_text("this PNG has no chara chunk")
    shot(page, "10-import-refused")

    page.set_input_files("input[type=file]", _card_png(tmp_path, CARD))
    page.get_by_role("button", name="Import", exact=True).click()
    imported = page.locator("#imported")
    expect(imported).to_contain_text("Character Seraphina")  # the import page lists what came in, linked
    imported.get_by_role("link", name="Seraphina").click()
    page.wait_for_url(re.compile(r"/characters/\d+/$"))
    expect(page.get_by_role("heading", level=1)).to_contain_text("Seraphina")
    expect(page.locator(".sheet .lore")).to_contain_text("The glade is protected by old magic.")
    shot(page, "11-imported-card")

    with page.expect_download() as info:
        page.get_by_role("link", name="Card V2 PNG").click()
    image = Image.open(io.BytesIO(open(info.value.path(), "rb").read()))
    card = json.loads(base64.b64decode(image.text["chara"]))
    assert card["data"]["name"] == "Seraphina" and card["data"]["creator_notes"] == "Keep her gentle."
    assert card["data"]["character_book"]["entries"][0]["keys"] == ["glade"]


def test_demo_scenario_pages_and_unsaved_changes_warning(logged_in_page, user, shot):
    from chronicle.demo import load_demo

    load_demo(owner=user)
    page = logged_in_page
    page.reload()
    expect(page.locator("body")).to_contain_text("Friends deciding where to eat tonight")
    shot(page, "20-home-with-demo")
    page.get_by_role("link", name="Friends deciding where to eat tonight").first.click()
    expect(page.locator(".sheet")).to_contain_text("Alex's apartment")
    shot(page, "21-scenario-detail")
    page.get_by_role("link", name="Edit", exact=True).click()
    expect(page.locator("#pair-notes")).to_contain_text("What Alex knows about")
    # Unticking Sam refreshes the pair notes (htmx) without losing what is typed for the others.
    page.locator("textarea[name^=pair-]").first.fill("Jordan has been talking about Bella's all week.")
    page.get_by_role("checkbox", name="Sam").uncheck()
    expect(page.locator("#pair-notes")).not_to_contain_text("What Sam knows about")
    expect(page.locator("#pair-notes textarea").first).to_have_value("Jordan has been talking about Bella's all week.")
    shot(page, "22-scenario-edit")

    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.type), d.dismiss()))
    page.get_by_role("link", name="Cancel").click()
    page.wait_for_timeout(500)
    assert dialogs == ["beforeunload"]
    assert "/edit/" in page.url  # dismissing the warning keeps the writer on the page

    # How they stand at the start: typed beside the notes, kept when the cast changes, saved.
    page.locator("input[name^=trust-]").first.fill("0.6")
    page.get_by_role("checkbox", name="Sam").check()
    expect(page.locator("#pair-notes")).to_contain_text("What Sam knows about")
    expect(page.locator("input[name^=trust-]").first).to_have_value("0.6")
    page.locator("input[name^=affinity-]").first.fill("-0.3")
    with page.expect_navigation():
        page.get_by_role("button", name="Save and re-seed").click()
    standing = Scenario.objects.get(owner=user).pair_standing
    assert [pair for row in standing.values() for pair in row.values()] == [{"trust": 0.6, "affinity": -0.3}]
    page.get_by_role("link", name="Edit", exact=True).click()
    expect(page.locator("input[name^=affinity-]").first).to_have_value("-0.3")


def test_a_name_clash_imports_as_a_copy_and_its_lore_is_edited_in_the_page(logged_in_page, tmp_path, shot):
    page = logged_in_page
    for _ in range(2):
        page.goto("/import/")
        page.set_input_files("input[type=file]", _card_png(tmp_path, CARD))
        page.get_by_role("button", name="Import", exact=True).click()
    clash = page.locator("#import-clash")
    expect(clash).to_contain_text("you already have Seraphina")
    expect(clash).to_contain_text("Seraphina (2)")
    shot(page, "12-import-clash")
    page.get_by_role("button", name="Import as a copy").click()
    page.locator("#imported").get_by_role("link", name="Seraphina (2)").click()
    page.wait_for_url(re.compile(r"/characters/\d+/$"))
    expect(page.get_by_role("heading", level=1)).to_contain_text("Seraphina (2)")

    page.get_by_role("link", name="Edit", exact=True).click()
    page.get_by_label("Lore entry 1 is").select_option("off")
    page.locator("[data-list-add][data-field=extra_memories]").click()
    page.locator("input[name=extra_memories_keys]").last.fill("shadows, moss")
    page.locator("textarea[name=extra_memories_content]").last.fill("{{char}} fears the shadowmoss.")
    page.locator("#id_public_face").fill("A gentle healer of travellers.")
    page.locator("[data-list-add][data-field=secrets]").click()
    page.locator("textarea[name=secrets]").last.fill("She was once a shadow herself.")
    shot(page, "13-lore-editor")
    page.get_by_role("button", name="Save and re-seed").click()
    page.wait_for_url(re.compile(r"/characters/\d+/$"))
    lore = page.locator(".sheet .lore")
    expect(lore.locator("li").first).to_contain_text("disabled")
    expect(lore).to_contain_text("{{char}} fears the shadowmoss.")  # the page shows what the writer wrote
    expect(page.locator(".sheet")).to_contain_text("A gentle healer of travellers.")
    expect(page.locator(".sheet .secrets")).to_contain_text("She was once a shadow herself.")
    shot(page, "14-lore-edited")
