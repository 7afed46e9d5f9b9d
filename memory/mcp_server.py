"""The agent tools over MCP: one bank, one agent, the same registry the simulation uses.

Every tool in `memory.recalling.tools.REGISTRY` is listed with the JSON schema its OpenAI form carries, and
every call runs through `memory.recalling.tools.call_tool`, so an outside agent (Claude Desktop, any MCP
client) sees exactly what a simulated agent sees: the response JSON as text, and a bad call's
{"error": "..."} object marked `isError` so the model can read it and try again.

Built on the SDK's low-level `Server`: `MCPServer` derives tools from Python signatures, and a
second, hand-written list of tools is what this module must not have.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable

import mcp_types as types
from asgiref.sync import sync_to_async
from django.db import close_old_connections
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from memory.mcp_verbs import SCHEMAS, VERBS, call_verb
from memory.services import accesses_record
from memory.services.store import MemoryLimitReached, room_check
from memory.recalling.tools import ToolCallResult, ToolContext, call_tool, openai_tool_schemas

logger = logging.getLogger(__name__)

SERVER_NAME = "wonda-memory"
AskFor = Callable[[object], Callable[..., str] | None]  # a bank → the model that writes for it, or None


def mcp_tools() -> list[types.Tool]:
    """The registry's tools as MCP tools (the OpenAI function schemas, unwrapped), then seed 004's
    reflect and consolidate (memory.mcp_verbs)."""
    return [
        types.Tool(name=fn["name"], description=fn["description"], input_schema=fn["parameters"])
        for fn in (schema["function"] for schema in openai_tool_schemas())
    ] + [types.Tool(name=name, description=verb["description"], input_schema=verb["parameters"])
         for name, verb in SCHEMAS.items()]


def _call(name: str, arguments: dict | None, context: ToolContext, ask_for: AskFor | None = None) -> ToolCallResult:
    # A stdio server lives for hours: drop a connection the database has closed, as a request would.
    close_old_connections()
    try:
        if name in VERBS:  # the store's verbs count what they recall themselves (recall_filtered)
            return call_verb(name, arguments, context, ask=ask_for(context.bank) if ask_for else None)
        if name == "form_memory":  # seed 004's per-agent cap holds for an outside agent's writes
            try:
                room_check(context.bank, [context.agent])
            except MemoryLimitReached as full:
                return ToolCallResult(name=name, arguments=arguments if isinstance(arguments, dict) else {},
                                      response={"error": str(full)}, query="", filter={}, results=[],
                                      latency_ms=0.0, error=str(full))
        result = call_tool(name, arguments, context=context)
        # An outside agent's recall counts like a simulated one's (decay and access boosts read it).
        accesses_record(memory_ids=[r.memory.pk for r in result.results], turn=context.current_turn)
        return result
    finally:
        close_old_connections()


def tool_result(result: ToolCallResult) -> types.CallToolResult:
    """The agent reads the same JSON as in a simulation; structured content mirrors it for clients that use it."""
    return types.CallToolResult(
        content=[types.TextContent(text=json.dumps(result.response, ensure_ascii=False))],
        structured_content=result.response,
        is_error=bool(result.error),
    )


def build_server(context: ToolContext | None = None, *,
                 context_for: Callable[[object], ToolContext] | None = None, ask_for: AskFor | None = None) -> Server:
    """An MCP server answering as `context.agent` from `context.bank` (stdio: one agent per process),
    or, with `context_for`, as whoever each request names (streamable HTTP: api.mcp_http finds the
    bank and agent of each request and `context_for(ctx)` reads them off it). `ask_for(bank)`: the
    model reflect and consolidate write with (prompt → text), or None for their offline answers."""
    tools = mcp_tools()
    # The ORM is synchronous: every call runs on asgiref's single sync thread, one at a time.
    call_sync = sync_to_async(_call, thread_sensitive=True)

    async def list_tools(ctx, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def on_call_tool(ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
        result = await call_sync(params.name, params.arguments, context_for(ctx) if context_for else context, ask_for)
        if result.error:
            logger.info("tool %s failed: %s", params.name, result.error)
        return tool_result(result)

    if context is None:
        title, about = "Wonda memory", "the Wonda memory bank and agent your connection names"
    else:
        bank = context.bank
        title = f"Wonda memory: {context.agent} in {getattr(bank, 'name', bank)}"
        about = f"Wonda memory bank {getattr(bank, 'pk', bank)} as {context.agent}"
    return Server(
        SERVER_NAME,
        version="1",
        title=title,
        instructions=(
            f"These tools recall your memories from {about}: start with query_self to learn who you are, "
            "then query_memory and the other tools as you need them; reflect answers a question from your "
            "memories in your voice, consolidate merges similar ones. A result with an \"error\" key explains "
            "how to fix the call."
        ),
        on_list_tools=list_tools,
        on_call_tool=on_call_tool,
    )


async def serve_stdio(context: ToolContext) -> None:
    """Serve until the client closes stdin. While serving, the SDK points fd 1 at stderr so nothing
    but the protocol reaches the wire (stray prints, model-loading chatter)."""
    server = build_server(context)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())
