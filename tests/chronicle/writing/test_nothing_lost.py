"""Nothing the writer types is lost silently: a refused form shows why and keeps the text; a success
message is only given for something that will exist; a refused import answers 400 and creates nothing."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import override_settings
from django.urls import reverse
from django.utils.html import escape

from chronicle.simulation.run.models import Simulation, TurnOverride
from chronicle.writing import exports
from chronicle.writing.models import ChronicleEntry
from memory.models import Memory

pytestmark = pytest.mark.django_db
HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def eager(monkeypatch):
    """Celery tasks dispatched on commit run here and now, as a worker would run them."""
    from wonda_site.celery import app

    monkeypatch.setitem(app.conf, "task_always_eager", True)


def _form_memory(client, simulation, index: int, **fields):
    data = {"content": "Sam hides a lottery ticket in his coat.", "agent": "Sam", "kind": "semantic",
            "importance": "6", "tags": "secret", "next": reverse("turn_inspect", args=[simulation.pk, index]),
            **fields}
    return client.post(reverse("chronicle_memory_form", args=[simulation.pk]), data)


@pytest.mark.parametrize("turn", ["99999999999", "-5", "0", "7", "three"])
def test_form_a_memory_with_a_bad_turn_is_refused_on_the_page_with_the_text_kept(
        client_for, user, finished, django_capture_on_commit_callbacks, turn):
    client = client_for(user)
    before = Memory.objects.in_bank(finished.bank).count()
    with django_capture_on_commit_callbacks() as callbacks:
        response = _form_memory(client, finished, 3, turn=turn)
    html = response.content.decode()
    assert response.status_code == 400
    assert "Turn 4 · Alex" in html  # still the inspector the writer was on
    assert "Sam hides a lottery ticket in his coat." in html and 'value="secret"' in html
    assert ("The turn must be between 1 and 6" in html) or ("Enter a whole number" in html)
    assert "Memory written" not in html and not callbacks
    assert Memory.objects.in_bank(finished.bank).count() == before


@pytest.mark.parametrize("fields, message", [
    ({"content": "x" * 10_001}, "at most 10000 characters (it has 10001)"),
    ({"content": "   "}, "This field is required."),
    ({"importance": "11"}, "less than or equal to 10"),
    ({"importance": "nan"}, "Enter a number."),
    ({"tags": ", ".join(f"t{i}" for i in range(21))}, "At most 20 tags; you gave 21."),
    ({"tags": "ok, " + "y" * 51}, "is 51 characters long; each tag is at most 50"),
    ({"agent": "Nobody"}, "Select a valid choice."),
])
def test_form_a_memory_shows_each_field_error_before_any_success(
        client_for, user, finished, django_capture_on_commit_callbacks, fields, message):
    client = client_for(user)
    with django_capture_on_commit_callbacks() as callbacks:
        response = _form_memory(client, finished, 3, turn="3", **fields)
    html = response.content.decode()
    assert response.status_code == 400 and message in html and "Memory written" not in html and not callbacks
    assert "<details class=\"card\" id=\"form-memory\" open>" in html  # the form is open, not folded away


def test_form_a_memory_from_the_bank_page_keeps_the_text_there(client_for, user, finished):
    response = client_for(user).post(reverse("chronicle_memory_form", args=[finished.pk]),
                                     {"content": "A shared rumour about the trattoria.", "kind": "semantic",
                                      "importance": "12", "tags": "rumour",
                                      "next": reverse("chronicle_memories", args=[finished.pk])})
    html = response.content.decode()
    assert response.status_code == 400 and "Memory bank of" in html
    assert "A shared rumour about the trattoria." in html and "less than or equal to 10" in html


def test_form_a_memory_success_means_the_memory_exists(client_for, user, finished, eager,
                                                       django_capture_on_commit_callbacks):
    client = client_for(user)
    assert 'name="turn" value="3"' in client.get(reverse("turn_inspect", args=[finished.pk, 3])).content.decode()
    with django_capture_on_commit_callbacks(execute=True):
        response = _form_memory(client, finished, 3, turn="3", tags="secret, money")
    assert response.status_code == 302 and response.url == reverse("turn_inspect", args=[finished.pk, 3])
    page = client.get(response.url).content.decode()
    assert "Memory written" in page
    memory = Memory.objects.in_bank(finished.bank).get(content="Sam hides a lottery ticket in his coat.")
    assert (memory.agent, memory.turn, memory.tags, memory.source) == ("Sam", 3, ["secret", "money"], "writer")
    # On turn 1 the inspector sends no turn: the memory exists from the start.
    with django_capture_on_commit_callbacks(execute=True):
        client.post(reverse("chronicle_memory_form", args=[finished.pk]),
                    {"content": "Everyone knows Bella's closes at ten.", "kind": "semantic", "importance": "5",
                     "next": reverse("turn_inspect", args=[finished.pk, 0])})
    assert Memory.objects.in_bank(finished.bank).get(content="Everyone knows Bella's closes at ten.").turn is None


def test_form_a_memory_never_sends_the_writer_off_site(client_for, user, finished):
    response = client_for(user).post(reverse("chronicle_memory_form", args=[finished.pk]),
                                     {"content": "x", "kind": "semantic", "importance": "5",
                                      "next": "https://evil.example/"})
    assert response.status_code == 302 and response.url == reverse("chronicle_memories", args=[finished.pk])


@pytest.mark.parametrize("htmx", [True, False])
def test_a_too_long_line_edit_shows_the_error_and_keeps_the_typed_text(client_for, user, finished, htmx):
    client = client_for(user)
    typed = "Let's go to Bella's. " + "z" * 3980  # 4,001 characters
    assert len(typed) == 4001
    response = client.post(reverse("chronicle_line", args=[finished.pk, 0]),
                           {"text": typed, "annotation": "my note"}, **(HX if htmx else {}))
    html = response.content.decode()
    assert response.status_code == (200 if htmx else 400)  # htmx swaps only 2xx answers
    assert "at most 4000 characters (it has 4001)" in html and escape(typed) in html and "my note" in html
    assert "<details class=\"edit\" open>" in html
    if htmx:
        assert html.lstrip().startswith("<li")
    assert not ChronicleEntry.objects.filter(turn__simulation=finished, text=typed).exists()
    review = client.get(reverse("chronicle_review", args=[finished.pk])).content.decode()
    assert escape(typed) not in review


def test_an_empty_hand_written_line_is_not_said_to_be_saved(client_for, user, finished):
    client = client_for(user)
    url = reverse("turn_override", args=[finished.pk, 3])
    page = client.post(url, {"line": "  "}, follow=True).content.decode()
    assert "Hand-written line saved" not in page and "Nothing to save: write the line you want" in page
    assert not TurnOverride.objects.at(finished, 3).filter(kind="line").exists()
    client.post(url, {"line": "Enough talk. I booked Bella's."})
    page = client.post(url, {"line": ""}, follow=True).content.decode()
    assert "Hand-written line removed" in page
    assert not TurnOverride.objects.at(finished, 3).filter(kind="line").exists()


@pytest.mark.parametrize("htmx", [True, False])
def test_an_emptied_line_is_refused_with_the_row_kept_open(client_for, user, finished, htmx):
    response = client_for(user).post(reverse("chronicle_line", args=[finished.pk, 0]), {"text": "  "},
                                     **(HX if htmx else {}))
    html = response.content.decode()
    assert response.status_code == (200 if htmx else 400)
    assert "A line cannot be empty; strike it instead." in html and "<details class=\"edit\" open>" in html


def test_a_too_long_hand_written_line_is_refused_not_cut(client_for, user, finished):
    typed = "I say: " + "w" * 3994
    response = client_for(user).post(reverse("turn_override", args=[finished.pk, 3]), {"line": typed})
    html = response.content.decode()
    assert response.status_code == 400 and "at most 4000 characters (it has 4001)" in html and typed in html
    assert "Hand-written line saved" not in html
    assert not TurnOverride.objects.at(finished, 3).filter(kind="line").exists()


@pytest.mark.parametrize("htmx", [True, False])
def test_a_refused_memory_edit_keeps_what_was_typed(client_for, user, finished, htmx):
    client = client_for(user)
    memory = Memory.objects.in_bank(finished.bank).filter(agent="Sam").first()
    old = (memory.content, list(memory.tags))
    tags = ", ".join(f"tag{i}" for i in range(25))
    response = client.post(reverse("chronicle_memory", args=[finished.pk, memory.pk]),
                           {"content": "Sam owns a boat.", "importance": "7", "tags": tags}, **(HX if htmx else {}))
    html = response.content.decode()
    assert response.status_code == (200 if htmx else 400)
    assert "At most 20 tags; you gave 25." in html and "Sam owns a boat." in html and tags in html
    memory.refresh_from_db()
    assert (memory.content, list(memory.tags)) == old


def _upload(data) -> SimpleUploadedFile:
    raw = data if isinstance(data, bytes) else json.dumps(data).encode()
    return SimpleUploadedFile("run.json", raw, "application/json")


@pytest.mark.parametrize("mangle, message", [
    (lambda d: d.update(turns="nope"), "'turns' is missing or malformed"),
    (lambda d: d["turns"][2].pop("index"), "turns[2]"),
    (lambda d: d["turns"][1].update(retrievals=[{"agent": "Alex", "tool": "x" * 65}]), "turns[1]"),
    (lambda d: d.update(overrides=[{"kind": "pin"}]), "overrides[0]: 'turn_index' is missing"),
    (lambda d: d.update(edits=["not an object"]), "'edits' should be a list of objects"),
    (lambda d: d["memories"][0].update(tags=[f"t{i}" for i in range(21)]), "A memory has at most 20 tags"),
    (lambda d: d["memories"][1].update(importance=42), "memories[1]"),
    (lambda d: d["memories"][0].update(content=""), "Memory content cannot be empty"),
    (lambda d: d.update(simulation={"max_turns": 10_001}), "settings are not valid"),
    (lambda d: d.update(relationships=[{"agent": "Alex", "other": "Sam", "turn": 2, "trust": 3, "affinity": 0}]),
     "relationships[0]: trust"),
    (lambda d: d.update(accesses=[{"memory_id": "12", "turn": 1, "count": 1}]), "accesses[0]: malformed"),
])
def test_a_malformed_export_answers_400_with_the_reason_and_creates_nothing(
        client_for, user, finished, django_capture_on_commit_callbacks, mangle, message):
    data = exports.to_json(finished)
    mangle(data)
    count = Simulation.objects.count()
    with django_capture_on_commit_callbacks() as callbacks:
        response = client_for(user).post(reverse("chronicle_import"), {"file": _upload(data)})
    assert response.status_code == 400 and escape(message) in response.content.decode()
    assert Simulation.objects.count() == count and not callbacks


def test_not_json_answers_400(client_for, user):
    response = client_for(user).post(reverse("chronicle_import"), {"file": _upload(b"{nope")})
    assert response.status_code == 400 and "not a JSON file" in response.content.decode()


@override_settings(WONDA_UPLOAD_LIMIT_MB=1)
def test_an_export_over_the_upload_limit_is_refused_before_it_is_read(client_for, user):
    count = Simulation.objects.count()
    raw = b'{"format": "wonda.simulation", "pad": "' + b"x" * int(1.3 * 1024 * 1024) + b'"}'
    response = client_for(user).post(reverse("chronicle_import"), {"file": _upload(raw)})
    assert response.status_code == 400
    assert "The file is 1.3 MB; imports are limited to 1 MB (WONDA_UPLOAD_LIMIT_MB)." in response.content.decode()
    assert Simulation.objects.count() == count
