"""Times every page of a long run: `manage.py bench_pages --turns 5000`.

A throw-away writer gets a finished run of N turns (bulk inserted: chronicle.simulation.measuring.long_run) and
a branch of it; each page is asked for once to warm up, then `--repeat` times with the Django test
client. Printed per page: the median ms, the SQL queries and the response size. The writer and all
it owns are deleted afterwards. Target: every page under ~500 ms, queries the same at any length.
"""

from __future__ import annotations

import statistics
import time

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import BaseCommand
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext, override_settings
from django.urls import reverse

from chronicle.simulation.measuring.long_run import long_run
from memory.api import banks

HX = {"HTTP_HX_REQUEST": "true"}


def pages(run, branch) -> list[tuple[str, str, dict]]:
    """(name, address, headers) of every page a writer reads a run with."""
    pk = run.pk
    return [
        ("run page (latest lines)", reverse("simulation_detail", args=[pk]), {}),
        ("run page, page 1", reverse("simulation_detail", args=[pk]) + "?page=1", {}),
        ("run page, page 25 (turn 2500)", reverse("simulation_detail", args=[pk]) + "?page=25", {}),
        ("live poll (htmx)", reverse("simulation_detail", args=[pk]), HX),
        ("review", reverse("chronicle_review", args=[pk]), {}),
        ("review, page 1", reverse("chronicle_review", args=[pk]) + "?page=1", {}),
        ("export Markdown", reverse("chronicle_export", args=[pk, "md"]), {}),
        ("export Fountain", reverse("chronicle_export", args=[pk, "fountain"]), {}),
        ("export JSON", reverse("chronicle_export", args=[pk, "json"]), {}),
        ("analytics", reverse("chronicle_analytics", args=[pk]), {}),
        ("memory bank", reverse("chronicle_memories", args=[pk]), {}),
        ("history", reverse("chronicle_history", args=[pk]), {}),
        ("compare branches", reverse("chronicle_compare", args=[branch.pk]), {}),
        ("turn inspector (last turn)", reverse("turn_inspect", args=[pk, run.max_turns - 1]), {}),
    ]


def body_size(response) -> int:
    if response.streaming:
        return sum(len(part) for part in response.streaming_content)
    return len(response.content)


class Command(BaseCommand):
    help = "Build a run of N turns for a throw-away writer, time each of its pages, print the figures, delete it."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--turns", type=int, default=5000)
        parser.add_argument("--repeat", type=int, default=3)

    def handle(self, *args, turns: int, repeat: int, **options) -> None:
        # The test client's host is let in; its template recording (setup_test_environment) is left
        # off: it copies the context at every include, which no real request pays for.
        with override_settings(ALLOWED_HOSTS=[*settings.ALLOWED_HOSTS, "testserver"]):
            self._bench(turns, repeat)

    def _bench(self, turns: int, repeat: int) -> None:
        user = get_user_model().objects.create_user(username=f"bench-pages-{time.time_ns()}", password=None)
        try:
            began = time.perf_counter()
            run = long_run(user, turns, title=f"Bench run of {turns}")
            branch = long_run(user, turns, title=f"Bench run of {turns}, a branch", parent=run, seed=8)
            self.stdout.write(f"built 2 runs of {turns:,} turns in {time.perf_counter() - began:.1f} s")
            client = Client()
            client.force_login(user)
            self.stdout.write(f"{'page':34} {'ms (median)':>12} {'queries':>8} {'KB':>8}")
            for name, url, headers in pages(run, branch):
                self._time(client, name, url, headers, repeat)
        finally:
            banks.banks_delete(owner=user)
            user.delete()

    def _time(self, client: Client, name: str, url: str, headers: dict, repeat: int) -> None:
        body_size(client.get(url, **headers))  # warm: templates compiled, caches filled
        times, queries, size = [], 0, 0
        for _ in range(max(repeat, 1)):
            with CaptureQueriesContext(connection) as ctx:
                began = time.perf_counter()
                response = client.get(url, **headers)
                size = body_size(response)
                times.append(1000 * (time.perf_counter() - began))
            if response.status_code not in (200, 286):  # 286: a poll told the run is over (htmx stops)
                self.stdout.write(f"{name:34} answered {response.status_code}")
                return
            queries = len(ctx)
        self.stdout.write(f"{name:34} {statistics.median(times):12.0f} {queries:8d} {size / 1024:8.0f}")
