"""A local embedding server: real HTTP, OpenAI's ``/v1/embeddings`` and Ollama's ``/api/embed`` and
``/api/embeddings``, any size of vector. The tests' model of another size than the local one (no
768-d model is at hand offline, and nothing may be fetched from a model hub).

A text's vector is its words hashed into `dim` places (each word a place and a sign): texts that
share words are near, as a real model's are for these tests' lines. `ways` limits what it serves
("openai", "ollama", "ollama-legacy"): anything else is a 404, as a server of the other kind answers.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np

WAYS = ("openai", "ollama", "ollama-legacy")
_STOP = frozenset("a an and the of to in on at is are was were i you he she it we they his her my our at by for "
                  "with from that this be".split())


def hashed_vector(text: str, dim: int) -> list[float]:
    vector = np.zeros(dim, dtype=np.float64)
    for word in re.findall(r"[a-z0-9]+", text.lower()):
        if word in _STOP:
            continue
        digest = hashlib.sha256(word.encode()).digest()
        vector[int.from_bytes(digest[:4], "big") % dim] += 1.0 if digest[4] & 1 else -1.0
    if not vector.any():
        vector[0] = 1.0
    return (vector / np.linalg.norm(vector)).tolist()


class FakeEmbedder:
    """`FakeEmbedder(dim=768).start()`; `.base_url` (OpenAI style, ending /v1) and `.root` (Ollama's);
    `.paths` lists each request's path; `.stop()`."""

    def __init__(self, dim: int = 768, ways: tuple[str, ...] = WAYS):
        self.dim, self.ways, self.paths = dim, ways, []
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="fake-embedder", daemon=True)

    def answer(self, path: str, body: dict) -> tuple[int, dict]:
        self.paths.append(path)
        texts = body.get("input")
        texts = [texts] if isinstance(texts, str) else texts
        if path.endswith("/v1/embeddings") and "openai" in self.ways:
            rows = [{"object": "embedding", "index": i, "embedding": hashed_vector(t, self.dim)} for i, t in enumerate(texts)]
            return 200, {"object": "list", "data": rows, "model": body.get("model"),
                         "usage": {"prompt_tokens": sum(len(t.split()) for t in texts)}}
        if path.endswith("/api/embed") and "ollama" in self.ways:
            return 200, {"model": body.get("model"), "embeddings": [hashed_vector(t, self.dim) for t in texts]}
        if path.endswith("/api/embeddings") and "ollama-legacy" in self.ways:
            return 200, {"embedding": hashed_vector(str(body.get("prompt", "")), self.dim)}
        return 404, {"error": f"unknown path {path}"}

    @property
    def root(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def base_url(self) -> str:
        return f"{self.root}/v1"

    def start(self) -> FakeEmbedder:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _handler(server: FakeEmbedder) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as real servers do

        def log_message(self, *args):
            pass

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            status, reply = server.answer(self.path, body)
            data = json.dumps(reply).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler
