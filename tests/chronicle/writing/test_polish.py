"""What a writer tripped over, each as a request sees it: History in words, branches
compared as changes and only with relatives, a favicon."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from chronicle.writing import services
from tests.chronicle.writing.conftest import prepare_and_run
from tests.factories import run_all, start

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
    inspector = client.get(reverse("turn_inspect", args=[finished.pk, 3])).content.decode()
    assert f"memories kept out of the turn: none → #{excluded}" in inspector
    assert "Change what was said, and regenerate from here" in inspector


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
    assert "<ins" in row.left_html and "<del" not in row.left_html
    assert "<ins" not in row.right_html
    assert client.get(reverse("chronicle_compare", args=[branch.pk]), {"other": stranger.pk}).status_code == 404


def test_every_page_has_a_favicon(client):
    response = client.get("/favicon.ico")
    assert response.status_code == 301 and response["Location"].endswith("/img/favicon.svg")


def _admin_post_data(response) -> dict:
    """The admin change form as the browser would post it back (its fields and inline formsets)."""
    form = response.context["adminform"].form
    data = {name: form[name].value() for name in form.fields}
    for inline in response.context["inline_admin_formsets"]:
        formset = inline.formset
        data |= {f"{formset.prefix}-{k}": v for k, v in formset.management_form.initial.items()}
        for sub in formset.forms:
            data |= {sub.add_prefix(name): sub[name].value() for name in sub.fields}
    return {k: ("" if v is None else ",".join(v) if isinstance(v, list) else v) for k, v in data.items()}


def test_an_admin_edit_goes_through_the_service_and_into_the_runs_history(client_for, user, staff_user, finished,
                                                                         django_capture_on_commit_callbacks):
    from django.test import Client

    from memory.models import Memory

    memory = Memory.objects.in_bank(finished.bank).filter(kind="episodic").first()
    old = memory.content
    admin = Client()  # client_for shares one client: the staff member and the writer need their own
    admin.force_login(staff_user)
    url = f"/admin/memory/memory/{memory.pk}/change/"
    data = _admin_post_data(admin.get(url)) | {"content": "Sam owns a small red boat.", "importance": "8"}
    with django_capture_on_commit_callbacks() as callbacks:
        response = admin.post(url, data)
    assert response.status_code == 302, response.content.decode()[:2000]
    memory.refresh_from_db()
    # The same service as the writer's edit: out of search until a worker re-embeds it.
    assert memory.content == "Sam owns a small red boat." and memory.importance == 8 and memory.embedding_stale
    assert len(callbacks) == 1  # the re-embedding, queued when the save commits
    page = client_for(user).get(reverse("chronicle_history", args=[finished.pk])).content.decode()
    assert "(in the admin)" in page and "Sam owns a small red boat." in page
    edit = next(e for e in finished.edits.all() if e.field == "content")
    assert edit.actor == staff_user and edit.before == old
    client_for(user).post(reverse("chronicle_undo", args=[finished.pk, edit.pk]))
    memory.refresh_from_db()
    assert memory.content == old
    # Other fields are shown, not edited there; and a memory is not made in the admin (it needs a vector).
    assert admin.get("/admin/memory/memory/add/").status_code == 403


def test_the_admin_memory_list_keeps_its_content_readable(client_for, staff_user, finished):
    page = client_for(staff_user).get("/admin/memory/memory/").content.decode()
    # No 300 px navigation column, and the content column's own minimum width (rows 1-3 lines tall).
    assert 'id="nav-sidebar"' not in page and "admin_extra/memory.css" in page
    assert 'class="field-short_content"' in page


def test_the_bank_page_groups_a_lines_copies_pages_and_filters(client_for, user, finished, monkeypatch):
    from chronicle.writing import selectors
    from memory.models import Memory

    client = client_for(user)
    url = reverse("chronicle_memories", args=[finished.pk])
    bank = Memory.objects.in_bank(finished.bank).active()
    page = client.get(url)
    cards = page.context["cards"]  # the page's cards (grouped and paged by the database)
    line = next(c for c in cards if len(c.copies) > 1)
    # One card per line everyone heard: the same words, a memory for each listener.
    assert {m.content for m in line.copies} == {line.memory.content} and len(set(line.agents)) == len(line.copies)
    assert page.context["page"].paginator.count == len(cards) < bank.count()
    # Paged: at most BANK_PAGE_SIZE cards a page, and the filters ride along the page links.
    monkeypatch.setattr(selectors, "BANK_PAGE_SIZE", 10)
    kinds = client.get(url, {"kind": "episodic", "turn_from": "2", "turn_to": "4"})
    shown = kinds.context["cards"]
    assert 0 < len(shown) <= 10 and all(c.memory.kind == "episodic" and 2 <= c.memory.turn <= 4 for c in shown)
    second = client.get(url, {"agent": "Sam", "page": "2"})
    assert second.context["page"].number == 2 and all(c.memory.agent == "Sam" for c in second.context["cards"])
    assert 'href="?agent=Sam&amp;page=1"' in second.content.decode()  # the filter rides along
    one_agent = client.get(url, {"agent": "Sam", "kind": "episodic"}).context["cards"]
    assert all(c.copies == [c.memory] and c.memory.agent == "Sam" for c in one_agent)
    archived = client.get(url, {"status": "archived"}).context["cards"]
    assert archived == []


def test_editing_a_line_edits_every_listeners_copy_and_says_saved(client_for, user, finished,
                                                                   django_capture_on_commit_callbacks):
    from chronicle.writing.selectors import line_copies
    from memory.models import Memory

    client = client_for(user)
    memory = Memory.objects.in_bank(finished.bank).filter(kind="episodic", turn=2).first()
    copies = line_copies(memory)
    assert len(copies) > 1
    with django_capture_on_commit_callbacks():
        html = client.post(reverse("chronicle_memory", args=[finished.pk, memory.pk]),
                           {"content": "Jordan said: Pasta, and that is final.", "importance": "6", "tags": "",
                            "all_copies": "1", "save": ""}, HTTP_HX_REQUEST="true").content.decode()
    assert f"Saved for {len(copies)} copies" in html
    assert {m.content for m in Memory.objects.filter(pk__in=[c.pk for c in copies])} == {
        "Jordan said: Pasta, and that is final."}
    # Read-only until opened: the text is shown, the form sits in a closed "Edit".
    page = client.get(reverse("chronicle_memories", args=[finished.pk])).content.decode()
    card = page.split(f'id="memory-{copies[0].pk}"', 1)[1].split('class="card memory-card"', 1)[0]
    assert '<details class="memory-edit">' in card and "heard by" in card


def test_a_link_to_one_memory_opens_its_card_whatever_page_it_is_on(client_for, user, finished, monkeypatch):
    from chronicle.templatetags.chronicle_tags import memory_link
    from chronicle.writing import selectors
    from memory.models import Memory

    monkeypatch.setattr(selectors, "BANK_PAGE_SIZE", 5)
    last = Memory.objects.in_bank(finished.bank).filter(agent="Sam").order_by("-turn", "-id").first()
    url = memory_link(finished.pk, last.pk, "Sam")
    assert url.endswith(f"?agent=Sam&memory={last.pk}#memory-{last.pk}")
    page = client_for(user).get(url)
    assert page.context["cards"][0].memory.pk == last.pk and page.context["page"].paginator.num_pages > 1


def test_polishing_a_line_leaves_memory_alone_unless_asked(client_for, user, finished,
                                                           django_capture_on_commit_callbacks):
    from memory.models import Memory

    client = client_for(user)
    turn = finished.turns.get(index=2)
    copies = Memory.objects.in_bank(finished.bank).filter(kind="episodic", turn=turn.number, speaker=turn.agent)
    before = {m.pk: m.content for m in copies}
    assert before
    url = reverse("chronicle_line", args=[finished.pk, 2])
    client.post(url, {"text": "Fine, the trattoria it is.", "annotation": ""})
    assert {m.pk: m.content for m in copies.all()} == before  # the export's wording only
    with django_capture_on_commit_callbacks() as queued:
        client.post(url, {"text": "Fine, the trattoria it is, at eight.", "annotation": "", "remembered": "on"})
    after = {m.pk: m for m in copies.all()}
    assert {m.content for m in after.values()} == {f"{turn.agent} said: Fine, the trattoria it is, at eight."}
    # Out of search until a worker re-embeds each copy (queued when the edit committed).
    assert all(m.embedding_stale for m in after.values()) and len(queued) >= len(after)
    edits = finished.edits.filter(target_type="memory", field="content", target_id__in=list(before))
    assert edits.count() == len(before)  # each copy in History, undoable
    page = client.get(reverse("chronicle_review", args=[finished.pk])).content.decode()
    assert "Polish the wording" in page and "Also change what the listeners remember" in page


def test_turn_addresses_count_from_one_as_the_pages_do(client_for, user, finished):
    client = client_for(user)
    third = client.get(f"/chronicle/{finished.pk}/turns/3/")
    assert third.status_code == 200 and third.context["turn"].number == 3 and "Turn 3 · " in third.content.decode()
    assert client.get(f"/chronicle/{finished.pk}/turns/6/").status_code == 200  # the last of six
    assert client.get(f"/chronicle/{finished.pk}/turns/0/").status_code == 404
    assert client.get(f"/chronicle/{finished.pk}/turns/7/").status_code == 404
    # Every link to a turn says its number: the run page's line 3 links to /turns/3/.
    page = client.get(finished.get_absolute_url()).content.decode()
    line = page.split('id="turn-2"', 1)[1].split("</li>", 1)[0]
    assert f'href="/chronicle/{finished.pk}/turns/3/"' in line and "turn 3" in line
    assert client.get(f"/simulations/{finished.pk}/turns/3/").url == f"/chronicle/{finished.pk}/turns/3/"


def test_a_line_mostly_replaced_reads_as_a_line_replaced_and_a_small_edit_word_by_word():
    from django.utils.html import escape

    from chronicle.writing.selectors import _marked

    old, new = "Shall we decide on dinner tonight, then?", "Enough talk. I booked Bella's for eight, then."
    removed, added = _marked(old, new)
    # Whole lines: no word of the old line left unstruck, none of the new one unmarked.
    assert removed == f'<del class="replaced">{escape(old)}</del>' and added == f'<ins class="replaced">{escape(new)}</ins>'
    removed, added = _marked("I booked Bella's for eight.", "I booked Bella's for nine.")
    assert removed == "I booked Bella&#x27;s for <del>eight.</del>" and added == "I booked Bella&#x27;s for <ins>nine.</ins>"
