"""`manage.py mcp_http [--host 127.0.0.1] [--port 8766]`: the agent tools over MCP on streamable HTTP.

Clients connect to http://HOST:PORT/mcp?bank=<id>&agent=<name> with `Authorization: Bearer <API token>`
(api.mcp_http). The stdio server (`manage.py mcp_serve`) stays for clients that start a process.
"""

from __future__ import annotations

import uvicorn
from django.core.management.base import BaseCommand

from api.mcp_http import PATH, application


class Command(BaseCommand):
    help = "Serve the memory tools over MCP streamable HTTP, with API-token auth (bank and agent per request)."

    def add_arguments(self, parser):
        parser.add_argument("--host", default="127.0.0.1",
                            help="0.0.0.0 to listen beyond this machine (put TLS in front)")
        parser.add_argument("--port", type=int, default=8766)

    def handle(self, *args, **opts):
        self.stderr.write(f"MCP over streamable HTTP at http://{opts['host']}:{opts['port']}{PATH}"
                          "?bank=<id>&agent=<name> (Authorization: Bearer <API token>)")
        uvicorn.run(application(), host=opts["host"], port=opts["port"], lifespan="on", log_level="warning")
