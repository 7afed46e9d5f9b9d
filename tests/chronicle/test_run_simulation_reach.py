"""`run_simulation` in `both` mode over 12 turns shows every marker word of an
agent's own sheet in that agent's retrievals or context, and never another agent's secret."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command

from memory.models import Memory

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def sheet(name: str, role: str, word: str, other: str) -> dict:
    """A character whose every authored field carries its own marker word (`<word><field>`)."""
    return {
        "name": name, "role": role, "public_face": f"{name} is known around the harbour as a {role}.",
        "description": f"{name} keeps to the harbour.",
        "background": f"{name} grew up by the {word}bgmark docks.",
        "communication_style": f"Speaks in {word}commmark riddles.",
        "decision_style": f"Decides by the {word}decidemark coin.",
        "traits": [f"{word}traitmark"], "skills": [f"{word}skillmark"], "values": [f"{word}valuemark"],
        "goals": [f"find the {word}goalmark key"],
        "knowledge": {other: f"{other} owes me a {word}knowmark favour."},
        "extra_memories": [{"content": f"The old bell by the {word}loremark tower rings thrice.", "keys": ["bell"]}],
        "secrets": [f"I stole the {word}secretmark ledger."],
    }


MARKS = ["bgmark", "commmark", "decidemark", "traitmark", "skillmark", "valuemark", "goalmark", "knowmark",
         "loremark", "secretmark"]
CAST = {"Mira": "vela", "Oren": "koto"}


@pytest.fixture
def scenario_file(tmp_path):
    data = {
        "format": "wonda", "version": 1,
        "scenario": {"title": "Harbour", "location": "The pier at dusk", "atmosphere": "Foggy",
                     "time_of_day": "Dusk", "description": "Two keepers meet on the pier.", "cast": list(CAST)},
        "characters": [sheet("Mira", "lamplighter", "vela", "Oren"), sheet("Oren", "ferryman", "koto", "Mira")],
    }
    path = tmp_path / "markers.json"
    path.write_text(json.dumps(data))
    return path


def test_both_mode_reaches_every_field_of_the_own_sheet_and_no_other_secret(scenario_file, user):
    out, err = io.StringIO(), io.StringIO()
    call_command("run_simulation", str(scenario_file), turns=12, mode="both", provider="scripted",
                 owner=user.username, keep=True, timeout=600, stdout=out, stderr=err)
    result = json.loads(out.getvalue().strip().splitlines()[-1])
    turns = result["turns"]
    assert len(turns) == 12 and {t["speaker"] for t in turns} == set(CAST)
    # Living memory's figures: the lines were scored, not all alike; the memory system's time per turn.
    lifecycle = result["lifecycle"]
    assert lifecycle["importance"]["min"] < lifecycle["importance"]["max"]
    assert lifecycle["filtered"] == 0 and lifecycle["reflections"] == 0 and lifecycle["consolidated"] == 0
    assert all(isinstance(t["memory_ms"], float) and t["memory_ms"] > 0 for t in turns)

    seen: dict[str, str] = {name: "" for name in CAST}
    for turn in turns:
        reached = [r["content"] for r in turn["retrievals"]] + [m["content"] for m in turn["context"]]
        seen[turn["speaker"]] += "\n".join(reached)
    for name, word in CAST.items():
        missing = [mark for mark in MARKS if f"{word}{mark}" not in seen[name]]
        assert not missing, f"{name} never reached: {missing}"

    # Another's secret: never in an agent's system prompt before it is spoken aloud, never gifted.
    for name, word in CAST.items():
        secret = f"{word}secretmark"
        spoken = next((t["number"] for t in turns if secret in t["text"]), None)
        for turn in turns:
            if turn["speaker"] == name or (spoken and turn["number"] > spoken):
                continue
            assert secret not in turn["context"][0]["content"], (turn["speaker"], turn["number"])
            assert all(secret not in r["content"] for r in turn["retrievals"]), (turn["speaker"], turn["number"])
        other = next(n for n in CAST if n != name)
        assert not Memory.objects.filter(source="gifted", agent=other, content__contains=secret).exists()
        assert Memory.objects.filter(source="gifted", agent=name, content__contains=secret).exists()
