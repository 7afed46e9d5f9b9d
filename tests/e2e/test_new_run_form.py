"""The new-run form, switching scenario: the planted beliefs and distortions name the cast, so they go
with it. The new scenario's own come in; a line typed about someone of the new cast stays; a line
about someone not in it is taken out, and the page says which."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from chronicle.models import Character
from tests.factories import make_dinner, scenario

pytestmark = pytest.mark.django_db(transaction=True)


def test_switching_scenario_takes_the_old_casts_beliefs_and_distortions_with_it(logged_in_page, user):
    page = logged_in_page
    dinner = make_dinner(user)
    mira, oren = (Character.objects.create(owner=user, name=name, role=role) for name, role in
                  (("Mira", "Innkeeper"), ("Oren", "Fisherman")))
    inn = scenario(user, [mira, oren], title="A rumour at the inn")
    inn.run_settings = {"planted_beliefs": "Oren: The harbour master is selling the inn. [false]",
                        "distortions": "Mira: paranoia"}
    inn.save()
    # Sam is in a third scene too, with no run settings of its own.
    sam = Character.objects.get(owner=user, name="Sam")
    market = scenario(user, [sam, mira], title="Market day")

    page.goto(f"/simulations/new/?scenario={inn.pk}")
    expect(page.locator("#id_planted_beliefs")).to_have_value("Oren: The harbour master is selling the inn. [false]")
    expect(page.locator("#id_distortions")).to_have_value("Mira: paranoia")

    # To the dinner: its cast has neither Oren nor Mira, and it brings no settings of its own.
    page.select_option("#id_scenario", str(dinner.pk))
    expect(page.locator("#cast-field")).to_contain_text("Jordan")
    expect(page.locator("#id_planted_beliefs")).to_have_value("")
    expect(page.locator("#id_distortions")).to_have_value("")
    expect(page.locator("#dropped-notes")).to_contain_text("Oren: The harbour master is selling the inn.")

    # The writer plants one for Sam and one for Jordan; to the market (Sam and Mira): Sam's stays.
    page.fill("#id_planted_beliefs", "Sam: The Thai place has closed.\nJordan: Bella's is full tonight.")
    page.select_option("#id_scenario", str(market.pk))
    expect(page.locator("#cast-field")).to_contain_text("Mira")
    expect(page.locator("#id_planted_beliefs")).to_have_value("Sam: The Thai place has closed.")
    expect(page.locator("#dropped-notes")).to_contain_text("Jordan: Bella's is full tonight.")

    # Back to the inn: its own settings again, and the run starts with them.
    page.select_option("#id_scenario", str(inn.pk))
    expect(page.locator("#id_planted_beliefs")).to_have_value("Oren: The harbour master is selling the inn. [false]")
    expect(page.locator("#id_distortions")).to_have_value("Mira: paranoia")
