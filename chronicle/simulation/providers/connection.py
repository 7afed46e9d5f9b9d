"""Test a model connection before a run depends on it: does the server answer, which models does it
have, does the chosen one reply, and can it call tools (else pre-populated mode is what will work).

Every outcome is said in a writer's words; nothing here raises.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import openai

# The usual local servers, and where they listen (`make run` looks for them).
LOCAL_SERVERS = (("Ollama", 11434, "/v1"), ("LM Studio", 1234, "/v1"), ("llama.cpp", 8080, "/v1"))
PROBE_TOOL = {"type": "function", "function": {
    "name": "get_time", "description": "The current time.", "parameters": {"type": "object", "properties": {}}}}


@dataclass
class ConnectionReport:
    ok: bool
    message: str  # one sentence a writer can act on
    models: list[str] = field(default_factory=list)
    replied: bool = False
    tools: bool | None = None  # None: not known (it did not reply)


def _reason(exc: Exception, base_url: str) -> str:
    if isinstance(exc, openai.APITimeoutError):
        return f"{base_url} did not answer in time: is the server busy, or still loading the model?"
    if isinstance(exc, openai.APIConnectionError):
        return f"Nothing answers at {base_url}: is the server running, and is the address right?"
    if isinstance(exc, openai.AuthenticationError):
        return "The server refused the API key."
    if isinstance(exc, openai.APIStatusError):
        detail = ""
        try:
            detail = (exc.response.json().get("error") or {}).get("message", "")
        except (ValueError, AttributeError):
            pass
        return f"The server answered {exc.status_code}" + (f": {detail}" if detail else ".")
    return f"The server's answer could not be read ({exc.__class__.__name__})."


def check_connection(*, base_url: str, model: str, api_key: str = "", timeout: float = 15.0) -> ConnectionReport:
    """Ask the server for its models, send the model one tiny message, then offer it one tool."""
    base_url = (base_url or "").strip().rstrip("/")
    if not urlsplit(base_url).scheme.startswith("http") or not urlsplit(base_url).netloc:
        return ConnectionReport(False, "Give the server's address, e.g. http://127.0.0.1:11434/v1 for Ollama.")
    client = openai.OpenAI(base_url=base_url, api_key=api_key or "not-needed", timeout=timeout, max_retries=0)
    report = ConnectionReport(False, "")
    try:
        report.models = sorted(m.id for m in client.models.list())
    except openai.NotFoundError:
        pass  # some servers have no /models: the reply below still says whether the model is there
    except Exception as exc:  # noqa: BLE001 - every failure becomes a sentence
        report.message = _reason(exc, base_url)
        return report
    if not model:
        report.message = ("The server answers. Choose one of its models: " + ", ".join(report.models)
                          if report.models else "The server answers; give the model's name.")
        return report
    if report.models and model not in report.models:
        report.message = f"The server has no model “{model}”. It has: {', '.join(report.models)}."
        return report
    try:
        client.chat.completions.create(model=model, messages=[{"role": "user", "content": "Say OK."}], max_tokens=5)
        report.replied = True
    except Exception as exc:  # noqa: BLE001
        report.message = _reason(exc, base_url)
        return report
    try:
        answer = client.chat.completions.create(
            model=model, max_tokens=50, tools=[PROBE_TOOL],
            messages=[{"role": "user", "content": "What time is it? Use the get_time tool."}])
        report.tools = bool(answer.choices and answer.choices[0].message.tool_calls)
    except openai.APIStatusError:
        report.tools = False  # a server that refuses the `tools` field cannot call them
    except Exception as exc:  # noqa: BLE001
        report.message = _reason(exc, base_url)
        return report
    report.ok = True
    report.message = (f"“{model}” answers and can call tools: every mode works." if report.tools else
                      f"“{model}” answers but did not call a tool: runs will use pre-populated memories "
                      "(the Pre-populate mode), which need no tools.")
    return report


def local_servers(host: str = "127.0.0.1", timeout: float = 0.3) -> list[tuple[str, str]]:
    """The usual local OpenAI-compatible servers that are listening: [(name, base URL)]."""
    found = []
    for name, port, path in LOCAL_SERVERS:
        try:
            with socket.create_connection((host, port), timeout=timeout):
                found.append((name, f"http://{host}:{port}{path}"))
        except OSError:
            continue
    return found


__all__ = ["ConnectionReport", "check_connection", "local_servers"]
