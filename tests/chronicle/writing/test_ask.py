"""Ask as the character: a first-person answer from the memories the question retrieved, citing them
(clickable), beside the ranked list; offline (scripted) and through an OpenAI-compatible server."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse
from django.utils.html import escape

from chronicle.simulation.run.models import Simulation
from memory.models import Memory
from memory.forming.seeding import seed_bank
from devtools.fake_llm import error, ok

pytestmark = pytest.mark.django_db
HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def alex(user, make_character):
    character = make_character(user)
    seed_bank(bank=character.preview_bank, characters=[character.to_sheet()], scenario=None)
    return character


def answer_of(html: str) -> str:
    start = html.index('id="ask-answer"')
    return html[start:html.index("</div>\n", html.index("</div>", start) + 6)]


def ranked_ids(html: str, prefix: str) -> list[int]:
    return [int(i) for i in re.findall(rf'id="{prefix}(\d+)"', html)]


def test_the_character_answers_in_its_own_voice_offline(client_for, user, alex):
    client = client_for(user)
    html = client.get(reverse("character_ask", args=[alex.pk]), {"q": "who am I?"}, **HX).content.decode()
    answer = answer_of(html)
    assert "dry run" in answer
    assert "I am Alex, Project manager." in answer and "You are Alex" not in answer
    top = ranked_ids(html, "ask-memory-")[0]
    identity = Memory.objects.in_bank(alex.preview_bank).get(category="identity")
    assert top == identity.pk
    assert f'href="#ask-memory-{top}"' in answer  # the citation leads to the memory in the ranked list
    cited = [int(i) for i in re.findall(r'href="#ask-memory-(\d+)"', answer)]
    assert set(cited) <= set(ranked_ids(html, "ask-memory-")) and len(cited) == 3
    # Deterministic: the same question, the same answer.
    again = client.get(reverse("character_ask", args=[alex.pk]), {"q": "who am I?"}, **HX).content.decode()
    assert answer_of(again) == answer
    page = client.get(reverse("character_ask", args=[alex.pk]), {"q": "what do I value?"}).content.decode()
    assert "<html" in page and re.search(r"I value:? fairness", answer_of(page))


def test_a_sheet_written_about_her_is_answered_as_i(client_for, user, make_character):
    nell = make_character(user, name="Nell", role="Lighthouse keeper",
                          background="Her father kept the light before her. She lost her brother to the sea and "
                                     "never speaks of it. She often walks the dog, and feeds him herself.")
    seed_bank(bank=nell.preview_bank, characters=[nell.to_sheet()], scenario=None)
    html = client_for(user).get(reverse("character_ask", args=[nell.pk]), {"q": "where did I grow up? my family?"},
                                **HX).content.decode()
    answer = answer_of(html)
    assert "My father kept the light before me." in answer
    assert "I lost my brother to the sea and never speak of it." in answer
    assert "I often walk the dog, and feed him myself." in answer
    assert "Her father" not in answer and " She " not in answer


def test_the_default_provider_answers_from_the_memories_and_cites_them(client_for, user, alex, server, settings):
    settings.LLM_PROVIDER, settings.LLM_BASE_URL, settings.LLM_MODEL = "openai", server.base_url, "fake-model"
    identity = Memory.objects.in_bank(alex.preview_bank).get(category="identity")
    server.script(ok(f"I am Alex <b>and</b> I like plans that work [#{identity.pk}]. I own a castle [#999999]."))
    html = client_for(user).get(reverse("character_ask", args=[alex.pk]), {"q": "who am I?"}, **HX).content.decode()
    answer = answer_of(html)
    assert "fake-model" in answer and escape("I am Alex <b>and</b> I like plans that work") in answer
    assert f'[<a href="#ask-memory-{identity.pk}"' in answer
    assert "[#999999]" in answer and 'href="#ask-memory-999999"' not in answer  # not a retrieved memory: no link
    sent = server.requests[0]
    assert sent["model"] == "fake-model" and sent["messages"][-1] == {"role": "user", "content": "who am I?"}
    system = sent["messages"][0]["content"]
    assert f"[#{identity.pk}]" in system and identity.content in system and "first person" in system


def test_a_failing_provider_says_why_and_the_ranked_memories_stay(client_for, user, alex, server, settings):
    settings.LLM_PROVIDER, settings.LLM_BASE_URL = "openai", server.base_url
    server.script(error(500, "the model fell over"))
    html = client_for(user).get(reverse("character_ask", args=[alex.pk]), {"q": "who am I?"}, **HX).content.decode()
    answer = answer_of(html)
    assert "The model could not answer" in answer and "the model fell over" in answer
    assert 'class="result"' in html and "Alex is a pragmatic project manager" in html


def test_the_inspector_asks_the_turns_agent_with_the_runs_provider(client_for, user, finished, server):
    client = client_for(user)
    url = reverse("turn_inspect", args=[finished.pk, 3])
    html = client.get(url, {"q": "what did Sam say?", "ask": "1"}, **HX).content.decode()
    answer = answer_of(html)
    assert "Alex answers, at turn 4" in answer and "dry run" in answer
    assert "On turn 3, Sam said: “" in answer
    rows = ranked_ids(html, "row-x-")
    cited = [int(i) for i in re.findall(r'href="#row-x-(\d+)"', answer)]
    assert cited and set(cited) <= set(rows)
    assert 'id="ask-answer"' not in client.get(url, {"q": "what did Sam say?"}, **HX).content.decode()

    Simulation.objects.filter(pk=finished.pk).update(provider="openai", base_url=server.base_url, model="run-model")
    server.script(ok(f"Sam told me he is saving money [#{rows[0]}]."))
    answer = answer_of(client.get(url, {"q": "what did Sam say?", "ask": "1"}, **HX).content.decode())
    assert "run-model" in answer and f'href="#row-x-{rows[0]}"' in answer
    assert server.requests[-1]["model"] == "run-model"
    server.script(error(503, "overloaded"))
    html = client.get(url, {"q": "what did Sam say?", "ask": "1"}, **HX).content.decode()
    assert "The model could not answer" in answer_of(html) and ranked_ids(html, "row-x-") == rows


def test_who_are_you_keeps_the_secrets_a_question_about_them_tells_one(client_for, user, make_character):
    tess = make_character(user, name="Tess", role="Harbour clerk",
                          description="Tess notices everything and says little.",
                          secrets=["She saw the harbour master take money from the hotel men.",
                                   "She is saving to leave the town."])
    seed_bank(bank=tess.preview_bank, characters=[tess.to_sheet()], scenario=None)
    client = client_for(user)
    who = answer_of(client.get(reverse("character_ask", args=[tess.pk]), {"q": "Who are you?"}, **HX).content.decode())
    assert "harbour master" not in who and "saving to leave" not in who and "secret" not in who.lower()
    assert "says little" not in who  # "I notice everything and say little", when it is said
    hiding = answer_of(client.get(reverse("character_ask", args=[tess.pk]), {"q": "What secrets are you keeping?"},
                                  **HX).content.decode())
    assert "Between us: I saw the harbour master" in hiding or "Between us: I am saving" in hiding
    assert "My secret:" not in hiding and " She " not in hiding


def test_the_character_page_asks_the_model_of_the_writers_latest_run(client_for, user, make_character, finished,
                                                                    server, settings):
    settings.LLM_PROVIDER = "scripted"  # nothing in the environment: the run's model is the one asked
    nell = make_character(user, name="Nell")
    seed_bank(bank=nell.preview_bank, characters=[nell.to_sheet()], scenario=None)
    Simulation.objects.filter(pk=finished.pk).update(provider="openai", base_url=server.base_url, model="run-model")
    server.script(ok("I am Nell."))
    html = client_for(user).get(reverse("character_ask", args=[nell.pk]), {"q": "who am I?"}, **HX).content.decode()
    assert "run-model" in answer_of(html) and "dry run" not in answer_of(html)
    assert server.requests[0]["model"] == "run-model"
