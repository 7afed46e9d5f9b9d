"""The agent tools over MCP: `manage.py mcp_serve` in a real subprocess, driven by the SDK's stdio client."""

from __future__ import annotations

import json
import os
import sys
from concurrent.futures import ThreadPoolExecutor

import anyio
import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from memory.mcp_server import mcp_tools
from memory.recalling.tools import TOOL_NAMES, openai_tool_schemas
from tests.conftest import ROOT


def _payload(result) -> dict:
    assert len(result.content) == 1 and result.content[0].type == "text"
    return json.loads(result.content[0].text)


async def _session_run(params: StdioServerParameters, errlog, stray: list, steps):
    async def on_message(message):
        if isinstance(message, Exception):  # a line on stdout that is not the protocol
            stray.append(message)

    with anyio.fail_after(240):
        async with stdio_client(params, errlog=errlog) as (read, write):
            # The first recall loads the embedding model in the server: allow it time.
            async with ClientSession(read, write, read_timeout_seconds=180, message_handler=on_message) as session:
                await session.initialize()
                return await steps(session)


def test_mcp_tools_come_from_the_registry():
    tools = mcp_tools()
    # The agents' tools as a run gives them, then the store's two verbs (memory.mcp_verbs).
    assert [t.name for t in tools] == [*TOOL_NAMES, "reflect", "consolidate"]
    assert [t.input_schema for t in tools[:len(TOOL_NAMES)]] == [s["function"]["parameters"] for s in openai_tool_schemas()]
    assert tools[-2].input_schema["required"] == ["query"] and "threshold" in tools[-1].input_schema["properties"]


@pytest.mark.django_db(transaction=True)
def test_an_outside_agent_uses_the_memory_tools_over_mcp(alex, jordan, scenario, tmp_path):
    from memory.forming.seeding import seed_bank
    from memory.services import bank_create

    bank = bank_create(name="mcp bank")
    seed_bank(bank=bank, characters=[alex, jordan], scenario=scenario)  # committed: the server is another process

    params = StdioServerParameters(
        command=sys.executable,
        args=[str(ROOT / "manage.py"), "mcp_serve", "--bank", str(bank.pk), "--agent", "Alex", "--turn", "3"],
        env=dict(os.environ) | {"WONDA_DB_NAME": connection.settings_dict["NAME"], "PYTHONUNBUFFERED": "1"},
        cwd=ROOT,
    )

    async def steps(session: ClientSession):
        listing = await session.list_tools()
        me = await session.call_tool("query_self", {})
        empty = await session.call_tool("query_memory", {"query": "  "})
        unknown = await session.call_tool("read_minds", {})
        return listing, me, empty, unknown

    stray: list = []
    log_path = tmp_path / "mcp_serve.log"
    with open(log_path, "w") as errlog:
        # A thread of its own: Playwright's sync API (the e2e tests, same session) leaves an event
        # loop running in the main thread, and asyncio refuses to start a second one there.
        with ThreadPoolExecutor(max_workers=1) as pool:
            listing, me, empty, unknown = pool.submit(anyio.run, _session_run, params, errlog, stray, steps).result()
    server_log = log_path.read_text()

    tools = {t.name: t for t in listing.tools}
    assert list(tools) == [*TOOL_NAMES, "reflect", "consolidate"], server_log  # the store's verbs after the tools
    assert {"query_self", "query_memory", "query_character", "recall_episodes", "form_memory"} <= set(tools)
    assert tools["query_memory"].input_schema["required"] == ["query"]
    assert tools["query_memory"].input_schema["properties"]["query"]["type"] == "string"
    # query_self narrows to one part of the sheet on request (every field reachable).
    assert tools["query_self"].input_schema["required"] == []
    assert "traits" in tools["query_self"].input_schema["properties"]["aspect"]["enum"]

    assert not me.is_error, server_log
    memories = _payload(me)["memories"]
    assert memories[0]["content"].startswith("You are Alex")
    assert 0 < memories[0]["relevance"] <= 1
    assert me.structured_content == _payload(me)
    # The outside agent's recall counts, at its turn, as a simulated agent's would.
    from memory.models import Memory

    ids = [m["memory_id"] for m in memories] if "memory_id" in memories[0] else None
    counted = Memory.objects.in_bank(bank).filter(access_count=1, last_accessed_turn=3)
    assert counted.count() == len(memories) and (ids is None or set(ids) == set(counted.values_list("pk", flat=True)))

    assert empty.is_error
    assert _payload(empty) == {"error": "query_memory: 'query' cannot be empty."}

    assert unknown.is_error
    error = _payload(unknown)["error"]
    assert "Unknown tool 'read_minds'" in error and "query_self" in error  # tells the agent what exists

    assert stray == [], f"stdout carried more than the protocol: {stray}\n{server_log}"
    assert "serving Alex's memory tools from bank" in server_log  # the logs went to stderr


@pytest.mark.django_db
def test_mcp_serve_refuses_an_unknown_bank():
    with pytest.raises(CommandError, match="no memory bank 987654"):
        call_command("mcp_serve", "--bank", "987654", "--agent", "Alex")
