"""`manage.py refresh_recorded`: the shipped recorded runs replayed through today's engine, written back."""

from __future__ import annotations

import io
import json

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from chronicle.demo import RECORDED_DIR
from chronicle.simulation.run.models import Simulation

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def test_the_recorded_runs_come_back_with_the_same_lines_and_what_the_engine_makes_of_them_now(tmp_path):
    out = io.StringIO()
    call_command("refresh_recorded", out=str(tmp_path), timeout=300, stdout=out, stderr=io.StringIO())

    for shipped in sorted(RECORDED_DIR.glob("*.simulation.json")):
        before, after = json.loads(shipped.read_text()), json.loads((tmp_path / shipped.name).read_text())
        assert after["simulation"]["title"] == before["simulation"]["title"]
        assert after["simulation"]["script"] == before["simulation"]["script"]
        assert [t["utterance"] for t in after["turns"]] == [t["utterance"] for t in before["turns"]]
        assert after["memories"] and "relationships" in after
    rumour = json.loads((tmp_path / "rumour.simulation.json").read_text())
    believers = {m["agent"] for m in rumour["memories"] if m.get("category") == "belief"}
    assert believers == {"Oren", "Mira", "Tess"}  # planted in Oren, told to Mira, denied by Tess
    assert "rumour.simulation.json" in out.getvalue()
    # What it made to replay them is gone.
    assert not Simulation.objects.exists()
    assert not get_user_model().objects.filter(username__startswith="refresh-").exists()
