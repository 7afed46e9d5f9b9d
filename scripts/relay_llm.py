#!/usr/bin/env python3
"""Record a model run where no model server runs: an OpenAI-compatible chat server that hands each
request to whoever answers it through files (a development tool, no part of Wonda itself).

    python3 scripts/relay_llm.py DIR [PORT=8790] [WAIT_S=900]
    WONDA_LLM_BASE_URL=http://127.0.0.1:8790/v1 WONDA_LLM_TIMEOUT=600 .venv/bin/python manage.py run_simulation \
        examples/demo.json --turns 12 --provider openai --save-recording tests/fixtures/recorded/NAME.json

Each chat completion the run asks for is written to DIR/req-NNNN.json (its messages, tools,
tool_choice and max_tokens, nothing else); the server then waits up to WAIT_S seconds for
DIR/resp-NNNN.json to appear, holding

    {"content": "the reply, or null", "tool_calls": [{"name": "...", "arguments": {...}}]}

and answers with that reply. Whoever answers (a capable model given the request file alone, or a
person) sees what a model would see and nothing more. Token usage is estimated at four characters a
token. GET /v1/models lists one model, "relay". The numbering continues after the requests already
in DIR, so a run can be resumed in the same folder.
"""

from __future__ import annotations

import argparse
import itertools
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

POLL_S = 0.5
KEPT = ("messages", "tools", "tool_choice", "max_tokens")  # what a request file holds


def estimate_tokens(value) -> int:
    return max(1, len(json.dumps(value)) // 4)


def read_answer(path: Path, wait_s: float) -> dict | None:
    """The answer written to `path`, once it is whole; None when none came within wait_s."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if path.exists():
            try:
                return json.loads(path.read_text())
            except json.JSONDecodeError:
                pass  # still being written
        time.sleep(POLL_S)
    return None


def completion(number: int, answer: dict, request: dict) -> dict:
    """A chat completion carrying the answer, tool calls as OpenAI writes them."""
    message = {"role": "assistant", "content": answer.get("content")}
    calls = answer.get("tool_calls") or []
    if calls:
        message["tool_calls"] = [
            {"id": f"call_{number}_{i}", "type": "function",
             "function": {"name": call["name"], "arguments": json.dumps(call.get("arguments") or {})}}
            for i, call in enumerate(calls)]
    prompt = estimate_tokens(request.get("messages")) + estimate_tokens(request.get("tools") or [])
    answered = estimate_tokens(message)
    return {"id": f"chatcmpl-{number}", "object": "chat.completion", "created": int(time.time()),
            "model": request.get("model", "relay"),
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": answered, "total_tokens": prompt + answered}}


def relay_handler(folder: Path, wait_s: float) -> type[BaseHTTPRequestHandler]:
    numbers = itertools.count(1 + len(list(folder.glob("req-*.json"))))
    lock = threading.Lock()

    class Relay(BaseHTTPRequestHandler):
        def reply(self, status: int, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):  # noqa: N802 (the name http.server calls)
            self.reply(200, {"object": "list", "data": [{"id": "relay", "object": "model"}]})

        def do_POST(self):  # noqa: N802
            request = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            with lock:
                number = next(numbers)
            asked, answer_path = folder / f"req-{number:04d}.json", folder / f"resp-{number:04d}.json"
            partial = asked.with_suffix(".tmp")
            partial.write_text(json.dumps({key: request.get(key) for key in KEPT}, indent=1))
            partial.replace(asked)  # whoever watches the folder never reads half a request
            answer = read_answer(answer_path, wait_s)
            if answer is None:
                self.reply(504, {"error": {"message": f"no answer written to {answer_path.name}"}})
            else:
                self.reply(200, completion(number, answer, request))

        def log_message(self, *_args):
            pass  # the request files are the log

    return Relay


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path, help="where req-NNNN.json are written and resp-NNNN.json read")
    parser.add_argument("port", type=int, nargs="?", default=8790)
    parser.add_argument("wait_s", type=float, nargs="?", default=900.0, help="how long a request waits")
    args = parser.parse_args()
    args.folder.mkdir(parents=True, exist_ok=True)
    ThreadingHTTPServer(("127.0.0.1", args.port), relay_handler(args.folder, args.wait_s)).serve_forever()


if __name__ == "__main__":
    main()
