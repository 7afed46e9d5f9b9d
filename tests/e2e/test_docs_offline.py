"""The documentation site opened from disk, as a writer without a server or a network would: its
pages link to pages, search finds "Ollama" on Connect a model, and nothing is fetched from outside."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.e2e


def test_the_built_site_works_from_disk(browser, tmp_path):
    site = tmp_path / "site"
    built = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file",
                            str(ROOT / "mkdocs.yml"), "--site-dir", str(site)], cwd=ROOT, capture_output=True,
                           text=True, timeout=300, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert built.returncode == 0, built.stderr
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    outside: list[str] = []
    page.on("request", lambda r: outside.append(r.url) if not r.url.startswith(("file:", "data:", "blob:")) else None)
    try:
        page.goto((site / "index.html").as_uri())
        page.get_by_role("link", name="Connect a model").first.click()
        assert page.url.endswith("/connect-a-model.html")
        assert page.get_by_role("heading", name="Connect a model").first.is_visible()
        page.goto((site / "simulations.html").as_uri())
        toc = page.locator("nav.md-nav--secondary")
        for part in ("Real models", "The tools", "Who is in the room"):
            assert toc.locator(f"a:has-text('{part}')").count() >= 1, part
        page.keyboard.press("s")
        page.keyboard.type("Ollama")
        results = page.locator(".md-search-result__item")
        results.first.wait_for(timeout=10_000)
        assert "Connect a model" in page.locator(".md-search-result").inner_text()
        assert outside == [], f"fetched from outside: {outside}"
    finally:
        page.close()
