#!/usr/bin/env python3
"""A development tool (no part of Wonda itself): an OpenAI-compatible chat server whose answers are
written into files, by hand or by a model.

Each POST /v1/chat/completions is written to DIR/req-NNNN.json ({"messages", "tools",
"tool_choice", "max_tokens"}); the server then waits for DIR/resp-NNNN.json, which holds
{"content": "text or null", "tool_calls": [{"name": "...", "arguments": {...}}]} (tool_calls
optional), and answers with a chat completion. Usage is estimated (4 characters a token).

    python3 relay_llm.py DIR [PORT=8790] [WAIT_S=900]

Lets Wonda run against a capable model answering as each character where no model server runs
locally: whoever answers reads only the request file, as a model would.
"""
import itertools
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DIR = sys.argv[1]
PORT = int(sys.argv[2]) if len(sys.argv) > 2 else 8790
WAIT_S = float(sys.argv[3]) if len(sys.argv) > 3 else 900
os.makedirs(DIR, exist_ok=True)
counter = itertools.count(1 + len([f for f in os.listdir(DIR) if f.startswith("req-")]))
lock = threading.Lock()


def tokens(obj) -> int:
    return max(1, len(json.dumps(obj)) // 4)


class Handler(BaseHTTPRequestHandler):
    def _send(self, code: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self._send(200, {"object": "list", "data": [{"id": "relay", "object": "model"}]})

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        with lock:
            n = next(counter)
        req = os.path.join(DIR, f"req-{n:04d}.json")
        resp = os.path.join(DIR, f"resp-{n:04d}.json")
        with open(req + ".tmp", "w") as f:
            json.dump({k: body.get(k) for k in ("messages", "tools", "tool_choice", "max_tokens")}, f, indent=1)
        os.replace(req + ".tmp", req)
        deadline = time.time() + WAIT_S
        answer = None
        while time.time() < deadline:
            if os.path.exists(resp):
                try:
                    answer = json.load(open(resp))
                    break
                except json.JSONDecodeError:
                    pass  # still being written
            time.sleep(0.5)
        if answer is None:
            self._send(504, {"error": {"message": f"no answer written to {os.path.basename(resp)}"}})
            return
        message = {"role": "assistant", "content": answer.get("content")}
        calls = answer.get("tool_calls") or []
        if calls:
            message["tool_calls"] = [
                {"id": f"call_{n}_{i}", "type": "function",
                 "function": {"name": c["name"], "arguments": json.dumps(c.get("arguments") or {})}}
                for i, c in enumerate(calls)]
        prompt_t, completion_t = tokens(body.get("messages")) + tokens(body.get("tools") or []), tokens(message)
        self._send(200, {"id": f"chatcmpl-{n}", "object": "chat.completion", "created": int(time.time()),
                         "model": body.get("model", "relay"),
                         "choices": [{"index": 0, "message": message,
                                      "finish_reason": "tool_calls" if calls else "stop"}],
                         "usage": {"prompt_tokens": prompt_t, "completion_tokens": completion_t,
                                   "total_tokens": prompt_t + completion_t}})

    def log_message(self, *args):
        pass


if __name__ == "__main__":
    ThreadingHTTPServer(("127.0.0.1", PORT), Handler).serve_forever()
