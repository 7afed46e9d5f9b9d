"""The HTTP embedding backends against a local server over real HTTP: unit vectors in the order
asked, over one kept-alive connection (a new client per call cost a new SSL context, ~50 ms)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from memory.embedding import http
from memory.embedding.errors import EmbeddingError


@pytest.fixture
def embedder():
    """An OpenAI-style /v1/embeddings: text i of a call gets a vector of 384 × (its length)."""
    seen = {"ports": [], "bodies": []}

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as real servers do

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen["ports"].append(self.client_address[1])
            seen["bodies"].append(body)
            if body["input"] == ["fail"]:
                data, status = b'{"error": "no"}', 500
            else:
                rows = [{"index": i, "embedding": [float(len(text))] * 384} for i, text in enumerate(body["input"])]
                data, status = json.dumps({"data": rows[::-1]}).encode(), 200  # any order: sorted by index
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *_args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    seen["url"] = f"http://127.0.0.1:{server.server_address[1]}/v1"
    yield seen
    server.shutdown()
    server.server_close()


def test_an_openai_style_embedder_gives_unit_vectors_in_order_over_one_connection(settings, embedder):
    settings.EMBEDDING_BACKEND, settings.EMBEDDING_URL, settings.EMBEDDING_MODEL = "openai", embedder["url"], "emb-1"
    vectors = http.encode(["a line", "a much longer line"])
    again = http.encode(["a query"])
    assert vectors.shape == (2, 384) and again.shape == (1, 384)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-6)
    assert [body["input"] for body in embedder["bodies"]] == [["a line", "a much longer line"], ["a query"]]
    assert embedder["bodies"][0]["model"] == "emb-1"
    assert len(set(embedder["ports"])) == 1  # the second call came over the first call's connection
    with pytest.raises(EmbeddingError, match="embedding server at"):
        http.encode(["fail"])
