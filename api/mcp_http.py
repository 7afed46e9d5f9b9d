"""The agent tools over MCP on streamable HTTP (the mcp SDK's own transport), beside the stdio server.

Every request carries `Authorization: Bearer <API token>` (made on /settings/tokens/) and names whose
memories answer: `/mcp?bank=3&agent=Alex` (or the headers X-Wonda-Bank and X-Wonda-Agent; optional
`turn` and `scoring`). A gate in front of MCP checks the token and that the bank is the token owner's
(another writer's bank is a 404, as in the HTTP API) before the SDK sees the request; the tools then
answer exactly as over stdio (memory.mcp_server: the same registry, call path and access counts).

Served by `manage.py mcp_http` (uvicorn). Stateless: each request stands alone (its own token, bank
and agent), so nothing a client sends later can borrow an earlier request's rights.
"""

from __future__ import annotations

import contextlib
import json
from urllib.parse import parse_qs

from asgiref.sync import sync_to_async
from django.core.exceptions import ValidationError
from django.db import close_old_connections
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.types import Receive, Scope, Send

from api.models import ApiToken
from api.throttle import allowed
from memory.api import DEFAULT_SCORING, SCORING_PRESETS, ToolContext, build_server, limits
from memory.models import MemoryBank

PATH = "/mcp"
STATE_KEY = "wonda_tool_context"


class Refused(Exception):
    def __init__(self, status: int, detail: str):
        super().__init__(detail)
        self.status, self.detail = status, detail


def _context(token: str, params: dict[str, str]) -> ToolContext:
    """The request's ToolContext, or Refused with the HTTP status and what to fix (sync: the ORM)."""
    close_old_connections()
    try:
        found = ApiToken.authenticate(token) if token else None
        if found is None:
            raise Refused(401, "Send a valid API token: Authorization: Bearer <token> (make one at /settings/tokens/).")
        ok, wait = allowed(found)  # the same per-token budget as the HTTP API
        if not ok:
            raise Refused(429, f"Too many requests with this token: try again in {int(wait or 1)} s.")
        if not params.get("bank") or not params.get("agent"):
            raise Refused(400, "Name the memory bank and the agent: /mcp?bank=<id>&agent=<name> "
                               "(or the headers X-Wonda-Bank and X-Wonda-Agent).")
        if not (params["bank"].isascii() and params["bank"].isdigit() and len(params["bank"]) < 19):
            raise Refused(400, "bank must be a memory bank's id (a number).")
        bank = MemoryBank.objects.owned_by(found.user).filter(pk=int(params["bank"])).first()
        if bank is None:
            raise Refused(404, "Not found.")  # another writer's bank is not said to exist
        scoring = params.get("scoring") or DEFAULT_SCORING
        if scoring not in SCORING_PRESETS:
            raise Refused(400, f"scoring must be one of: {', '.join(SCORING_PRESETS)}.")
        turn = params.get("turn")
        if turn and not (turn.isascii() and turn.lstrip("-").isdigit() and -limits.INT_MAX - 1 <= int(turn) <= limits.INT_MAX):
            raise Refused(400, f"turn must be a whole number between {-limits.INT_MAX - 1:,} and {limits.INT_MAX:,}.")
        try:  # the API's rule for a name (memory.services.validation): %00 or %07 in the URL is a 400
            agent = limits.clean_text(params["agent"], "agent", limit=limits.NAME_LIMIT, name=True)
        except ValidationError as exc:
            raise Refused(400, f"agent: {' '.join(exc.message_dict['agent'])}") from None
        return ToolContext(bank=bank, agent=agent, current_turn=int(turn) if turn else None, scoring=scoring)
    finally:
        close_old_connections()


def _params(scope: Scope) -> tuple[str, dict[str, str]]:
    headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers") or []}
    auth = headers.get("authorization", "")
    token = auth[7:].strip() if auth.lower().startswith("bearer ") else ""
    query = {k: v[-1] for k, v in parse_qs(scope.get("query_string", b"").decode("latin-1")).items()}
    params = {"bank": query.get("bank") or headers.get("x-wonda-bank", ""),
              "agent": query.get("agent") or headers.get("x-wonda-agent", ""),
              "turn": query.get("turn") or headers.get("x-wonda-turn", ""),
              "scoring": query.get("scoring") or headers.get("x-wonda-scoring", "")}
    return token, {k: v.strip() for k, v in params.items()}


async def _json(send: Send, status: int, body: dict) -> None:
    data = json.dumps(body).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    if status == 401:
        headers.append((b"www-authenticate", b'Bearer realm="wonda"'))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": data})


def application():
    """The ASGI app: the token gate in front of the SDK's streamable HTTP session manager."""
    from api.api import model_ask  # the API's rule for a bank's model (its run's, else offline)

    server = build_server(context_for=lambda ctx: ctx.request.scope["state"][STATE_KEY], ask_for=model_ask)
    manager = StreamableHTTPSessionManager(app=server, stateless=True, json_response=True)
    resolve = sync_to_async(_context, thread_sensitive=True)

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        if scope["path"].rstrip("/") != PATH:
            await _json(send, 404, {"detail": f"The MCP endpoint is {PATH}."})
            return
        token, params = _params(scope)
        try:
            context = await resolve(token, params)
        except Refused as refused:
            await _json(send, refused.status, {"detail": refused.detail})
            return
        scope.setdefault("state", {})[STATE_KEY] = context
        await manager.handle_request(scope, receive, send)

    async def _lifespan(receive: Receive, send: Send) -> None:
        async with contextlib.AsyncExitStack() as stack:
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await stack.enter_async_context(manager.run())
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return

    return app
