"""The demo of seed 000: friends deciding where to eat tonight, with three fully written characters."""

from __future__ import annotations

import json
from pathlib import Path

from django.db import transaction

from chronicle.models import Character, Scenario
from chronicle.services.characters import character_create, character_request_preview
from chronicle.services.scenarios import scenario_create
from chronicle.simulation.run.models import Simulation
from chronicle.writing.exports import simulation_import

DEMO_TITLE = "Friends deciding where to eat tonight"

CHARACTERS = [
    {
        "name": "Alex",
        "role": "Project manager",
        "archetype": "The pragmatist",
        "description": "Alex is a pragmatic project manager in their early thirties who likes plans that can actually "
                       "be carried out. Friendly but efficient, Alex is usually the one who turns a vague idea into a "
                       "booking, a time and a plan B.",
        "public_face": "Alex is the friend who always ends up making the booking: organised, fair, a little "
                       "impatient when plans drift.",
        "background": "Alex grew up as the eldest of four siblings and organised family outings from the age of twelve. "
                      "They studied business at a state university while working evenings in a busy restaurant. "
                      "For the last six years Alex has led delivery teams at a software company. "
                      "Alex hosts the friends' get-togethers because their apartment is the most central.",
        "communication_style": "Direct and structured; sums up options and proposes a next step. Asks clarifying "
                               "questions, keeps a light tone, and avoids long debates.",
        "decision_style": "Weighs options against clear criteria (cost, distance, time) and sets a deadline for "
                          "deciding. Happy to compromise once everyone's constraints are on the table.",
        "traits": ["pragmatic", "organised", "even-tempered", "a little impatient"],
        "skills": ["planning", "mediating between friends", "finding a table at short notice"],
        "values": ["fairness", "reliability", "time well spent"],
        "goals": ["get everyone fed before nine", "pick a place all three can enjoy", "keep the evening relaxed"],
        "secrets": ["Alex has already put down a deposit at the Thai place around the corner, just in case, and has "
                    "not told anyone."],
        "knowledge": {
            "Jordan": "Jordan is Alex's oldest friend from university: warm, spontaneous, and passionate about food, "
                      "especially Italian. Jordan tends to suggest new places on a whim.",
            "Sam": "Sam is a thoughtful friend from work who is vegetarian and careful with money this month; "
                   "Sam likes to know the cost before agreeing.",
        },
    },
    {
        "name": "Jordan",
        "role": "Sous-chef and food blogger",
        "archetype": "The enthusiast",
        "description": "Jordan is a warm, impulsive foodie who works as a sous-chef and writes a small food blog. "
                       "Jordan loves Italian food above all and is always excited to try somewhere new.",
        "public_face": "Jordan is a sous-chef with a food blog who loves Italian food and always knows the newest "
                       "place in town.",
        "background": "Jordan grew up above their grandmother's trattoria and learned to make fresh pasta at eight. "
                      "After a year cooking in Bologna, Jordan came home full of opinions about carbonara. "
                      "Jordan met Alex at university, where they shared a flat and many late dinners. "
                      "The blog started as a joke and now has a few thousand loyal readers.",
        "communication_style": "Expressive and enthusiastic; talks with their hands, tells stories about dishes, "
                               "jumps between ideas, and uses lots of exclamation marks.",
        "decision_style": "Decides by gut feeling and appetite; will happily change their mind if someone paints a "
                          "tastier picture, and dislikes long deliberation.",
        "traits": ["warm", "impulsive", "generous", "easily excited"],
        "skills": ["cooking Italian food", "knowing every new restaurant in town", "telling stories"],
        "values": ["good food shared with friends", "spontaneity", "hospitality"],
        "goals": ["convince the others to try the new Italian place, Bella's", "have a fun, lively evening"],
        "secrets": ["Jordan knows the owner of Bella's and was promised a free dessert for a good review on the "
                    "blog."],
        "knowledge": {
            "Alex": "Alex is Jordan's old flatmate: organised, practical, always the one who makes the booking. "
                    "Alex likes to decide quickly.",
            "Sam": "Sam is vegetarian and a bit cautious; Jordan knows Sam loves a good mushroom risotto.",
        },
    },
    {
        "name": "Sam",
        "role": "Junior accountant",
        "archetype": "The careful one",
        "description": "Sam is a cautious, budget-minded junior accountant and a committed vegetarian. Sam is kind, "
                       "quietly funny, and prefers familiar places where the prices are on the website.",
        "public_face": "Sam is a kind, quietly funny accountant from Alex's team, a vegetarian who likes to know "
                       "prices before agreeing.",
        "background": "Sam grew up in a small town where eating out was a rare treat. "
                      "Sam became vegetarian at sixteen after a summer volunteering on an animal sanctuary. "
                      "Sam is saving for a deposit on a flat and tracks every expense in a spreadsheet. "
                      "Sam joined Alex's team at work two years ago and was soon invited to the friends' dinners.",
        "communication_style": "Polite and measured; asks about prices and menus before agreeing, uses gentle humour, "
                               "and says no softly rather than bluntly.",
        "decision_style": "Careful and risk-averse: checks the menu, reviews and cost first, prefers known options, "
                          "and needs a vegetarian main course that is more than a side salad.",
        "traits": ["cautious", "kind", "thrifty", "dryly funny"],
        "skills": ["budgeting", "reading reviews critically", "remembering everyone's allergies"],
        "values": ["animal welfare", "financial prudence", "being considerate"],
        "goals": ["keep dinner under twenty-five each", "find a place with real vegetarian options"],
        "secrets": ["Sam got a small bonus this month and could afford Bella's, but is saving it for a flat and "
                    "would rather not say so."],
        "knowledge": {
            "Alex": "Alex is Sam's team lead at work: fair, decisive, and good at making plans everyone can live with.",
            "Jordan": "Jordan is Alex's enthusiastic friend who loves Italian food and often suggests expensive new places.",
        },
    },
]

SCENARIO = {
    "title": DEMO_TITLE,
    "location": "Alex's apartment, living room: a comfortable sofa, a coffee table with takeaway menus, and a "
                "window over the busy street.",
    "atmosphere": "Relaxed and friendly after a long week, with a hint of hungry impatience.",
    "time_of_day": "Early evening, around seven",
    "description": "Three friends have met at Alex's place and must decide where to eat dinner tonight. Jordan wants "
                   "Italian, Sam needs a vegetarian-friendly and affordable option, and Alex wants a decision soon.",
    "pair_notes": {
        "Alex": {"Jordan": "Jordan mentioned the new Italian place, Bella's, twice this week."},
        "Jordan": {"Sam": "Sam said last month that Bella's looked too expensive."},
        "Sam": {"Alex": "Alex has booked tables at short notice before and can probably do it again."},
    },
}


def load_demo(*, owner) -> bool:
    """Create the demo scenario and its cast once; False when it is already there."""
    if Scenario.objects.owned_by(owner).filter(title=DEMO_TITLE).exists():
        return False
    with transaction.atomic():
        cast = []
        for data in CHARACTERS:
            existing = Character.objects.owned_by(owner).filter(name=data["name"]).first()
            if existing is not None:  # the writer already has an Alex: cast theirs rather than fail
                cast.append(character_request_preview(character=existing))
            else:
                cast.append(character_create(owner=owner, data=data))
        scenario_create(owner=owner, data=SCENARIO, cast=cast)
    return True


RECORDED_DIR = Path(__file__).resolve().parent.parent / "examples" / "recorded"


def load_recorded(*, owner) -> list[str]:
    """The shipped recorded runs (lines a model wrote, replayed through the engine with every setting),
    imported once as finished runs, so a newcomer without a model server sees what a model's scene
    looks like in Wonda. Their memory banks are rebuilt by the worker (simulation_import)."""

    loaded = []
    for path in sorted(RECORDED_DIR.glob("*.simulation.json")):
        data = json.loads(path.read_text())
        title = (data.get("simulation") or {}).get("title") or path.stem
        if Simulation.objects.owned_by(owner).filter(title=title).exists():
            continue
        simulation_import(owner=owner, data=data)
        loaded.append(title)
    return loaded
