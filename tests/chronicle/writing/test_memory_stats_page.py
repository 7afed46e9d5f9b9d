"""The analytics page shows seed 002's MemoryStats: a row per agent, and for one agent its bands, latest
and most important memories."""

from __future__ import annotations

import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db


def test_the_analytics_page_shows_each_agents_memory_stats(user, client_for, finished):
    page = client_for(user).get(reverse("chronicle_analytics", args=[finished.pk]))
    html = page.content.decode()
    assert 'id="stats-table"' in html and all(f">{name}</a></th>" in html for name in finished.cast_names)
    assert [s.agent for s in page.context["stats"]] == finished.cast_names
    assert all(s.total > 0 and s.diversity is not None for s in page.context["stats"])
    # Seed 003's reflection frequency beside them: a finished run's turns give the per-100-turns figure.
    assert "<th>reflections</th>" in html
    assert all(s.reflections_per_100_turns is not None for s in page.context["stats"])
    assert all(f"<td>{s.reflections}" in html for s in page.context["stats"])
    agent = finished.cast_names[0]
    one = client_for(user).get(reverse("chronicle_analytics", args=[finished.pk]) + f"?agent={agent}")
    assert [s.agent for s in one.context["stats"]] == [agent]
    html = one.content.decode()
    assert 'id="stats-bands"' in html and 'id="stats-important"' in html and "life-changing" in html
