"""Load drill: N concurrent scripted runs on real workers, plus page traffic from concurrent clients.

Last line: JSON {"errors", "gaps", "duplicates", "p50_ms", "p95_ms", "runs_finished"}.
Target: 0 errors, 0 gaps, 0 duplicates, p95 < 300 ms.
"""

from __future__ import annotations

import json
import random
import threading
import time
from pathlib import Path

import httpx
from django.conf import settings
from django.core.management import BaseCommand
from django.urls import reverse

from chronicle import drills, headless
from chronicle.simulation.run.models import Simulation


class Command(BaseCommand):
    help = "Run N scripted simulations at once with page traffic; check every turn; print latency figures."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--simulations", type=int, default=10)
        parser.add_argument("--turns", type=int, default=20)
        parser.add_argument("--clients", type=int, default=8)
        parser.add_argument("--concurrency", type=int, default=2, help="pool processes of the drill's own worker")
        parser.add_argument("--url", default="", help="use this running web server instead of starting one")
        parser.add_argument("--no-worker", action="store_true", help="use the workers already running")
        parser.add_argument("--timeout", type=float, default=900)
        parser.add_argument("--keep", action="store_true", help="keep the drill writer and its runs")

    def handle(self, *args, simulations: int, turns: int, clients: int, concurrency: int, url: str, no_worker: bool,
               timeout: float, keep: bool, **options) -> None:
        log_dir = Path(settings.VAR_DIR) / "drills" / f"load-{time.strftime('%Y%m%d-%H%M%S')}"
        log_dir.mkdir(parents=True, exist_ok=True)
        worker = web = None
        headless.database_ready(self.stderr.write)  # a fresh clone: set up first, not a missing table
        user = drills.drill_writer()
        try:
            if not no_worker:
                worker = drills.start_worker("drill-load", concurrency, log_dir)
            if not url:
                web = drills.WebServer(log_dir)
                url = web.url
            if worker:
                worker.wait_ready(timeout=120, pool=True)
            if web:
                web.wait_ready()
            self.stdout.write(f"Worker and web server up ({url}); logs in {log_dir}")
            runs = drills.start_runs(user, simulations, turns)
            self.stdout.write(f"{simulations} runs of {turns} turns started; {clients} clients browsing")
            traffic = Traffic(url, drills.session_cookie(user), [r.pk for r in runs], clients)
            traffic.start()
            started = time.monotonic()
            last = [0.0]

            def tick():
                if time.monotonic() - last[0] > 10:
                    last[0] = time.monotonic()
                    done = sum(r.turns.filter(status="done").count() for r in runs)
                    self.stdout.write(f"  {time.monotonic() - started:5.0f}s: {done}/{simulations * turns} turns, "
                                      f"{len(traffic.latencies)} page requests")

            finished_in_time = drills.wait_finished(runs, timeout, tick)
            traffic.stop()
            check = drills.check_runs(runs)
            statuses = list(Simulation.objects.filter(pk__in=[r.pk for r in runs]).values_list("status", "pause_reason"))
            for status, reason in statuses:
                if status != "completed":
                    self.stdout.write(f"  a run ended {status}: {reason}")
            self.stdout.write(f"All runs done in {time.monotonic() - started:.0f}s" if finished_in_time
                              else f"Time-out after {timeout:g}s")
            for problem in traffic.problems[:10]:
                self.stdout.write(f"  page error: {problem}")
            result = {
                "errors": len(traffic.problems), "gaps": check.gaps + check.lost_memories,
                "duplicates": check.duplicated_turns + check.duplicated_memories,
                "p50_ms": round(drills.percentile(traffic.latencies, 0.5), 1),
                "p95_ms": round(drills.percentile(traffic.latencies, 0.95), 1),
                "runs_finished": check.finished,
            }
            self.stdout.write(f"{len(traffic.latencies)} page requests by {clients} clients")
            self.stdout.write(json.dumps(result))
        finally:
            for part in (web, worker):
                if part:
                    part.stop()
            if not keep:
                drills.delete_writer(user)


class Traffic:
    """Clients that read what a writer reads while runs go on: lists, run pages (full and polled), turns."""

    def __init__(self, url: str, cookies: dict, simulation_ids: list[int], clients: int):
        self.url, self.cookies, self.ids, self.clients = url.rstrip("/"), cookies, simulation_ids, clients
        self.latencies: list[float] = []
        self.problems: list[str] = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.threads = [threading.Thread(target=self.client, args=(n,), daemon=True) for n in range(clients)]

    def pages(self, rng: random.Random) -> tuple[str, dict]:
        pk = rng.choice(self.ids)
        index = rng.randrange(0, 3)
        choices = [
            (reverse("simulation_detail", args=[pk]), {}),
            (reverse("simulation_detail", args=[pk]), {"HX-Request": "true"}),  # the page's own 2 s poll
            (reverse("simulation_detail", args=[pk]), {"HX-Request": "true"}),
            (reverse("simulation_list"), {}),
            (reverse("home"), {}),
            (reverse("chronicle_review", args=[pk]), {}),
            (reverse("chronicle_memories", args=[pk]), {}),
            (reverse("turn_inspect", args=[pk, index]), {"HX-Request": "true"}),  # a line's side panel
            ("/healthz", {}),
        ]
        return rng.choice(choices)

    def client(self, n: int) -> None:
        rng = random.Random(n)
        with httpx.Client(base_url=self.url, cookies=self.cookies, timeout=30, follow_redirects=False) as http:
            while not self.stopping.is_set():
                path, headers = self.pages(rng)
                started = time.perf_counter()
                try:
                    response = http.get(path, headers=headers)
                    status = response.status_code
                except httpx.HTTPError as exc:
                    status, response = 0, exc
                elapsed = (time.perf_counter() - started) * 1000
                with self.lock:
                    self.latencies.append(elapsed)
                    # A turn not run yet is a 404 the page never links to; anything else must be 2xx.
                    if status == 0 or status >= 500 or (status >= 300 and not (status == 404 and "/turns/" in path)):
                        self.problems.append(f"GET {path} → {status or response}")
                self.stopping.wait(rng.uniform(0.05, 0.25))

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def stop(self) -> None:
        self.stopping.set()
        for thread in self.threads:
            thread.join(timeout=35)
