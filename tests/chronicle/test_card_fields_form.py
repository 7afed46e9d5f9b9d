"""A card's own fields (creator notes, tags, creator, version) on the character page and its form,
and a portrait added, replaced and removed there."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tests.chronicle.test_views import _form_data

pytestmark = pytest.mark.django_db


def _png(colour: str) -> bytes:
    import io

    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (40, 60), colour).save(out, format="PNG")
    return out.getvalue()


def test_a_cards_own_fields_are_shown_and_edited_and_a_portrait_added_replaced_removed(client_for, user,
                                                                                        make_character):
    from django.core.files.uploadedfile import SimpleUploadedFile

    from chronicle.models import Portrait

    card = {"creator_notes": "Best with a slow pace.", "tags": ["noir", "harbour"], "creator": "ada",
            "character_version": "1.2"}
    mira = make_character(user, name="Mira", card_extras=card)
    client = client_for(user)
    detail = client.get(reverse("character_detail", args=[mira.pk])).content.decode()
    assert "Best with a slow pace." in detail and ">noir<" in detail and "version 1.2" in detail
    edit = client.get(reverse("character_edit", args=[mira.pk])).content.decode()
    assert 'enctype="multipart/form-data"' in edit and "Best with a slow pace." in edit and 'value="ada"' in edit
    assert 'name="portrait"' in edit and "Remove the portrait" not in edit  # nothing to remove yet

    data = _form_data(mira, creator_notes="Slow burn.", card_tags=["noir"], creator="ada", character_version="2")
    response = client.post(reverse("character_edit", args=[mira.pk]),
                           {**data, "portrait": SimpleUploadedFile("mira.png", _png("red"), "image/png")})
    assert response.status_code == 302
    mira.refresh_from_db()
    assert {k: mira.card_extras[k] for k in card} == {"creator_notes": "Slow burn.", "tags": ["noir"],
                                                      "creator": "ada", "character_version": "2"}
    exported = client.get(reverse("character_export", args=[mira.pk, "card.json"])).json()["data"]
    assert exported["creator_notes"] == "Slow burn." and exported["tags"] == ["noir"]
    first = bytes(Portrait.objects.get(character=mira).png)
    assert client.get(reverse("character_portrait", args=[mira.pk])).status_code == 200
    assert "Remove the portrait" in client.get(reverse("character_edit", args=[mira.pk])).content.decode()
    # Replaced by another picture; a file that is no picture is refused and changes nothing.
    client.post(reverse("character_edit", args=[mira.pk]),
                {**data, "portrait": SimpleUploadedFile("m.png", _png("blue"), "image/png")})
    second = bytes(Portrait.objects.get(character=mira).png)
    assert second != first
    refused = client.post(reverse("character_edit", args=[mira.pk]),
                          {**data, "portrait": SimpleUploadedFile("m.png", b"not a picture", "image/png")})
    assert refused.status_code == 400 and "The portrait was not changed" in refused.content.decode()
    assert bytes(Portrait.objects.get(character=mira).png) == second
    # Removed.
    client.post(reverse("character_edit", args=[mira.pk]), {**data, "remove_portrait": "on"})
    assert not Portrait.objects.filter(character=mira).exists()
