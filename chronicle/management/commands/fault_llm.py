"""Serve the fault-injecting OpenAI-compatible server (devtools/fake_llm.py) until Ctrl-C."""

from __future__ import annotations

import time

from django.core.management import BaseCommand

from devtools.fake_llm import FAULTS, FakeLLM


class Command(BaseCommand):
    help = "An OpenAI-compatible server that misbehaves on request: model 'drill:<fault>' picks the fault."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8765)

    def handle(self, *args, host: str, port: int, **options) -> None:
        server = FakeLLM(host, port, faults=True).start()
        self.stdout.write(f"Fault LLM on {server.base_url} — models: {', '.join(f'drill:{f}' for f in FAULTS)}")
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            server.stop()
