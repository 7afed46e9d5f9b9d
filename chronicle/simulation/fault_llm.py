"""A local OpenAI-compatible server that misbehaves on request: the drills' and tests' LLM.

The model name picks the behaviour: `anything:<fault>` (`drill:garbage`, `x:slow`…); no suffix or
`:ok` plays a well-behaved agent that asks `query_self` once, then speaks. Faults:

| fault          | what the server does                                                      |
|----------------|---------------------------------------------------------------------------|
| `ok`           | one `query_self` call, then a short line built from what it returned      |
| `garbage`      | 200 with an HTML page (not JSON)                                          |
| `bad_body`     | 200, `Content-Type: application/json`, a body cut in the middle           |
| `no_choices`   | 200 with JSON that has no `choices`                                       |
| `bad_json`     | a tool call whose arguments are not JSON, every time                      |
| `unknown_tool` | a call to a tool nobody offered, every time                               |
| `huge`         | a 20,000-character line                                                   |
| `empty`        | an empty message, every time                                              |
| `error500`     | 500 Internal Server Error                                                 |
| `rate_limit`   | 429 Too Many Requests                                                     |
| `slow`         | answers after 30 s (longer than any sensible time-out)                    |
| `flaky`        | every other request is a 500, the rest behave like `ok`                   |

Run it by hand with `manage.py fault_llm --port 8765` and point a simulation's base URL at
`http://127.0.0.1:8765/v1` with model `drill:garbage` (or any other fault).
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

FAULTS = ("ok", "garbage", "bad_body", "no_choices", "bad_json", "unknown_tool", "huge", "empty", "error500",
          "rate_limit", "slow", "flaky")


def _completion(message: dict) -> dict:
    return {"id": "chatcmpl-fault", "object": "chat.completion", "created": int(time.time()), "model": "fault",
            "choices": [{"index": 0, "message": {"role": "assistant", **message},
                         "finish_reason": "tool_calls" if message.get("tool_calls") else "stop"}],
            "usage": {"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60}}


def _call(name: str, arguments: str) -> dict:
    return {"tool_calls": [{"id": f"call_{name}_{time.monotonic_ns()}", "type": "function",
                            "function": {"name": name, "arguments": arguments}}], "content": None}


def _agent_line(body: dict) -> dict:
    """A well-behaved agent: asks who it is once, then says something that shows it remembered."""
    messages = body.get("messages") or []
    offered = {t.get("function", {}).get("name") for t in body.get("tools") or []}
    tool_answers = [m for m in messages if m.get("role") == "tool"]
    if "query_self" in offered and not tool_answers and body.get("tool_choice") != "none":
        return _call("query_self", "{}")
    remembered = ""
    for answer in tool_answers:
        try:
            memories = json.loads(answer.get("content") or "{}").get("memories") or []
        except (ValueError, AttributeError):
            memories = []
        if memories and isinstance(memories[0], dict):
            remembered = str(memories[0].get("content", ""))[:80]
            break
    heard = len([m for m in messages if m.get("role") == "user"])
    return {"content": f"I remember this much: {remembered or 'very little'}. ({heard} message(s) heard.)"}


class FaultLLM:
    """`FaultLLM().start()`; `.base_url`; `.requests` counts requests by fault; `.stop()`."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, slow_seconds: float = 30.0):
        self.requests: dict[str, int] = {}
        self.lock = threading.Lock()
        self.slow_seconds = slow_seconds
        self._flip = itertools.count()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet: the drills print their own figures
                pass

            def do_GET(self):
                if self.path.rstrip("/").endswith("/models"):
                    self._send(200, {"object": "list", "data": [{"id": f"drill:{f}", "object": "model"} for f in FAULTS]})
                else:
                    self._send(404, {"error": {"message": f"unknown path {self.path}"}})

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                except ValueError:
                    return self._send(400, {"error": {"message": "request body is not JSON"}})
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    return self._send(404, {"error": {"message": f"unknown path {self.path}"}})
                fault = str(body.get("model") or "").rpartition(":")[2] or "ok"
                if fault not in FAULTS:
                    fault = "ok"
                with server.lock:
                    server.requests[fault] = server.requests.get(fault, 0) + 1
                server.answer(self, fault, body)

            def _send(self, status: int, payload, content_type: str = "application/json") -> None:
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", content_type)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up waiting (the `slow` fault)

        self.handler = Handler
        self.httpd = ThreadingHTTPServer((host, port), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="fault-llm", daemon=True)

    def answer(self, handler, fault: str, body: dict) -> None:
        send = handler._send
        if fault == "flaky":
            fault = "error500" if next(self._flip) % 2 == 0 else "ok"
        if fault == "garbage":
            return send(200, b"<html><body><h1>502 Bad Gateway</h1>upstream sent nonsense</body></html>",
                        "text/html; charset=utf-8")
        if fault == "bad_body":
            return send(200, b'{"id": "chatcmpl-cut", "choices": [{"index": 0, "mess')
        if fault == "no_choices":
            return send(200, {"id": "chatcmpl-odd", "object": "chat.completion", "result": "fine, thanks"})
        if fault == "error500":
            return send(500, {"error": {"message": "the model crashed", "type": "server_error"}})
        if fault == "rate_limit":
            return send(429, {"error": {"message": "rate limit reached, slow down", "type": "rate_limit"}})
        if fault == "slow":
            time.sleep(self.slow_seconds)
            return send(200, _completion({"content": "Sorry, I was miles away."}))
        if fault == "bad_json":
            return send(200, _completion(_call("query_memory", '{"query": "what did we say, "k": }')))
        if fault == "unknown_tool":
            return send(200, _completion(_call("launch_rockets", '{"target": "the moon"}')))
        if fault == "huge":
            return send(200, _completion({"content": ("All work and no play makes a long line. " * 500).rstrip() + "!"}))
        if fault == "empty":
            return send(200, _completion({"content": ""}))
        return send(200, _completion(_agent_line(body)))

    @property
    def base_url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> "FaultLLM":
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
