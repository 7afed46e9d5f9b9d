"""The writer's pages as a user meets them, and another writer meeting none of them (404)."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse
from django.utils.html import escape

from chronicle.writing.models import ChronicleEntry, Edit
from chronicle.simulation.run.models import TurnOverride
from memory.models import Memory

pytestmark = pytest.mark.django_db
HX = {"HTTP_HX_REQUEST": "true"}


def test_inspector_shows_tools_memories_context_and_tokens(client_for, user, finished):
    client = client_for(user)
    page = client.get(reverse("turn_inspect", args=[finished.pk, 3])).content.decode()
    assert "Turn 4 · Alex" in page and "query_memory(query=what did Sam say?)" in page
    assert "matched:" in page and "Context: the exact messages sent" in page and "Tokens:" in page
    assert "Regenerate from turn 4" in page and "A new branch keeps turns 1–3 and the bank" in page
    # From the first turn nothing is kept: not "turns 1–0".
    first = client.get(reverse("turn_inspect", args=[finished.pk, 0])).content.decode()
    assert "A new branch starts from the beginning" in first and "turns 1–0" not in first
    assert "A new branch keeps turn 1 and" in client.get(reverse("turn_inspect", args=[finished.pk, 1])).content.decode()
    detail = client.get(finished.get_absolute_url()).content.decode()
    assert reverse("turn_inspect", args=[finished.pk, 3]) in detail  # reachable from the live chronicle


def test_edit_memory_from_the_inspector_lands_on_the_memory_open_with_a_way_back(client_for, user, finished):
    import re

    client = client_for(user)
    page = client.get(reverse("turn_inspect", args=[finished.pk, 3])).content.decode()
    link = re.search(r'class="small edit-memory" href="([^"]+)"', page).group(1).replace("&amp;", "&")
    memory_id = int(re.search(r"memory=(\d+)", link).group(1))
    bank = client.get(link).content.decode()
    card = bank[bank.index(f'id="memory-{memory_id}"') - 80:]
    assert "memory-card focused" in card[:200]  # highlighted
    assert '<details class="memory-edit" open>' in card[: card.index("</details>")]  # its editor open
    back = re.search(r'id="back-to-turn"><a class="button" href="([^"]+)">← Back to turn 4</a>', bank)
    assert back and back.group(1) == reverse("turn_inspect", args=[finished.pk, 3])
    # Opened from elsewhere (the map, analytics), the card is first but no turn is offered.
    plain = client.get(reverse("chronicle_memories", args=[finished.pk]), {"memory": memory_id}).content.decode()
    assert 'id="back-to-turn"' not in plain


def test_a_memorys_kind_reads_in_words_with_its_stored_name_on_hover(client_for, user, finished):
    page = client_for(user).get(reverse("turn_inspect", args=[finished.pk, 0])).content.decode()
    assert 'title="character_knowledge/knowledge">knows of another</span>' in page
    assert 'title="scene/context">scene · situation</span>' in page
    assert "character_knowledge/knowledge</" not in page and " character/identity" not in page


def test_exclude_button_answers_with_the_row(client_for, user, finished):
    client = client_for(user)
    turn = finished.turns.get(index=3)
    retrieval = turn.retrievals.get(tool="query_memory")
    memory_id = retrieval.results[0]["memory_id"]
    response = client.post(reverse("turn_override", args=[finished.pk, 3]),
                           {"kind": "exclude", "memory_id": memory_id, "on": "1", "retrieval": retrieval.pk}, **HX)
    html = response.content.decode()
    assert response.status_code == 200 and html.lstrip().startswith("<tr") and "excluded" in html
    assert "Include again" in html
    assert TurnOverride.objects.at(finished, 3).filter(kind="exclude", memory_id=memory_id).exists()


def test_a_memory_two_searches_returned_reads_pinned_under_both(client_for, user, finished):
    turn = finished.turns.get(index=3)
    first, second = list(turn.retrievals.order_by("order", "id"))[:2]
    memory_id = first.results[0]["memory_id"]
    if all(r.get("memory_id") != memory_id for r in second.results):
        second.results = [*second.results, first.results[0]]  # as when two calls of a turn find one memory
        second.save(update_fields=["results"])
    html = client_for(user).post(reverse("turn_override", args=[finished.pk, 3]),
                                 {"kind": "pin", "memory_id": memory_id, "on": "1", "retrieval": first.pk},
                                 **HX).content.decode()
    clicked, _, elsewhere = html.partition("<template>")
    assert f'id="row-{first.pk}-{memory_id}"' in clicked and "Unpin" in clicked
    assert f'id="row-{second.pk}-{memory_id}"' in elsewhere and 'hx-swap-oob="true"' in elsewhere
    assert "Unpin" in elsewhere and ">Pin<" not in elsewhere


def test_inline_line_edit_returns_the_row_and_escapes(client_for, user, finished):
    client = client_for(user)
    url = reverse("chronicle_line", args=[finished.pk, 0])
    html = client.post(url, {"text": "We eat <b>now</b>.", "annotation": "punchier"}, **HX).content.decode()
    assert html.lstrip().startswith("<li") and "We eat &lt;b&gt;now&lt;/b&gt;." in html and "punchier" in html
    html = client.post(url, {"star": ""}, **HX).content.decode()
    assert "★ Starred" in html
    html = client.post(url, {"strike": ""}, **HX).content.decode()
    assert "struck" in html
    entry = ChronicleEntry.objects.get(turn__simulation=finished, turn__index=0)
    assert entry.text == "We eat <b>now</b>." and entry.starred and entry.struck
    assert Edit.objects.for_simulation(finished).count() == 4


def test_memory_edit_and_history_undo_pages(client_for, user, finished, django_capture_on_commit_callbacks):
    client = client_for(user)
    memory = Memory.objects.in_bank(finished.bank).filter(agent="Sam").first()
    old = memory.content
    with django_capture_on_commit_callbacks() as callbacks:
        html = client.post(reverse("chronicle_memory", args=[finished.pk, memory.pk]),
                           {"content": "Sam owns a boat.", "importance": "7", "tags": "boat"}, **HX).content.decode()
    assert "Sam owns a boat." in html and len(callbacks) == 1
    history = client.get(reverse("chronicle_history", args=[finished.pk])).content.decode()
    assert escape(old) in history and "Sam owns a boat." in history
    edit = Edit.objects.for_simulation(finished).get(field="content")
    client.post(reverse("chronicle_undo", args=[finished.pk, edit.pk]))
    memory.refresh_from_db()
    assert memory.content == old


def test_regenerate_button_creates_a_branch_shown_in_the_tree(client_for, user, finished,
                                                              django_capture_on_commit_callbacks):
    client = client_for(user)
    with django_capture_on_commit_callbacks() as callbacks:
        response = client.post(reverse("turn_regenerate", args=[finished.pk, 3]))
    branch = finished.branches.get()
    assert response.url == branch.get_absolute_url() and branch.branch_turn == 3 and len(callbacks) == 1
    page = client.get(finished.get_absolute_url()).content.decode()
    assert f'data-sim="{branch.pk}"' in page and "from turn 4" in page
    compare = client.get(reverse("chronicle_compare", args=[branch.pk])).content.decode()
    assert 'id="compare"' in compare
    # The history says it in a writer's words, not the store's ("retrieval regenerate").
    history = client.get(reverse("chronicle_history", args=[finished.pk])).content.decode()
    assert "regenerated into a new branch" in history and "retrieval regenerate" not in history
    client.post(reverse("turn_override", args=[finished.pk, 2]), {"line": "Let us just go Thai."})
    history = client.get(reverse("chronicle_history", args=[finished.pk])).content.decode()
    assert "retrieval line" not in history and "line to say instead" in history


def test_exports_download_and_import_page(client_for, user, finished):
    client = client_for(user)
    fountain = client.get(reverse("chronicle_export", args=[finished.pk, "fountain"]))
    assert fountain["Content-Disposition"] == 'attachment; filename="dinner-plans.fountain"'
    assert b"INT. ALEX'S APARTMENT" in fountain.content
    data = b"".join(client.get(reverse("chronicle_export", args=[finished.pk, "json"])).streaming_content)  # streamed
    assert json.loads(data)["format"] == "wonda.simulation"
    from django.core.files.uploadedfile import SimpleUploadedFile

    response = client.post(reverse("chronicle_import"), {"file": SimpleUploadedFile("run.json", data)})
    assert response.status_code == 302
    bad = client.post(reverse("chronicle_import"), {"file": SimpleUploadedFile("x.json", b"{nope")})
    assert "not a JSON file" in bad.content.decode()


def test_another_writer_reaches_none_of_it(client_for, other_user, finished):
    client = client_for(other_user)
    memory = Memory.objects.in_bank(finished.bank).first()
    turn = finished.turns.get(index=0)
    edit = Edit.objects.create(simulation=finished, target_type="line", target_id=turn.pk, field="text",
                               before="a", after="b")
    pk = finished.pk
    gets = [reverse("turn_inspect", args=[pk, 0]), reverse("chronicle_review", args=[pk]),
            reverse("chronicle_memories", args=[pk]), reverse("chronicle_history", args=[pk]),
            reverse("chronicle_compare", args=[pk]), reverse("chronicle_export", args=[pk, "md"]),
            reverse("chronicle_export", args=[pk, "fountain"]), reverse("chronicle_export", args=[pk, "json"])]
    posts = [(reverse("turn_override", args=[pk, 0]), {"kind": "exclude", "memory_id": memory.pk, "on": "1"}),
             (reverse("turn_regenerate", args=[pk, 0]), {}),
             (reverse("chronicle_line", args=[pk, 0]), {"text": "hijacked"}),
             (reverse("chronicle_memory", args=[pk, memory.pk]), {"content": "hijacked", "importance": "1"}),
             (reverse("chronicle_memory_form", args=[pk]), {"content": "hijacked", "importance": "1", "kind": "semantic"}),
             (reverse("chronicle_undo", args=[pk, edit.pk]), {})]
    for url in gets:
        assert client.get(url).status_code == 404, url
    for url, data in posts:
        assert client.post(url, data).status_code == 404, url
    assert not finished.branches.exists() and not TurnOverride.objects.exists()
    assert not Memory.objects.filter(content="hijacked").exists()
    assert not ChronicleEntry.objects.filter(text="hijacked").exists()


def test_writing_posts_need_csrf(user, finished):
    from django.test import Client

    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    assert client.post(reverse("chronicle_line", args=[finished.pk, 0]), {"text": "x"}).status_code == 403
