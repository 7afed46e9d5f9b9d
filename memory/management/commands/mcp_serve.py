"""`manage.py mcp_serve --bank N --agent NAME`: the agent tools over MCP on stdin/stdout.

stdout carries the protocol and nothing else: messages from this command go to stderr, and so do
the logs (settings.LOGGING's StreamHandler writes to stderr).
"""

from __future__ import annotations

import logging

import anyio
from django.core.management.base import BaseCommand, CommandError

from memory.mcp_server import serve_stdio
from memory.models import Memory, MemoryBank
from memory.recalling.scoring import DEFAULT_SCORING, SCORING_PRESETS
from memory.recalling.tools import ToolContext

logger = logging.getLogger(__name__)


class Command(BaseCommand):
    help = "Serve one agent's memory tools from one bank over MCP (stdio), for Claude Desktop or any MCP client."

    def add_arguments(self, parser):
        parser.add_argument("--bank", type=int, required=True, help="memory bank id")
        parser.add_argument("--agent", required=True, help="whose memories the tools answer from, e.g. Alex")
        parser.add_argument("--turn", type=int, default=None, help="current turn (recency, and the turn of formed memories)")
        parser.add_argument("--scoring", choices=list(SCORING_PRESETS), default=DEFAULT_SCORING)

    def handle(self, *args, **opts):
        bank = MemoryBank.objects.filter(pk=opts["bank"]).first()
        if bank is None:
            banks = list(MemoryBank.objects.order_by("pk").values_list("pk", flat=True)[:20])
            raise CommandError(f"no memory bank {opts['bank']}; banks: {banks}")
        agent = opts["agent"].strip()
        if not agent:
            raise CommandError("--agent cannot be blank")
        if not Memory.objects.in_bank(bank).filter(agent=agent).exists():
            # Not fatal: the agent may be about to form its first memories.
            logger.warning("bank %s holds no memories of %r yet", bank.pk, agent)
        context = ToolContext(bank=bank, agent=agent, current_turn=opts["turn"], scoring=opts["scoring"])
        logger.info("serving %s's memory tools from bank %s (%s) over MCP stdio", agent, bank.pk, opts["scoring"])
        try:
            anyio.run(serve_stdio, context)
        except KeyboardInterrupt:
            pass
