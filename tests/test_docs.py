"""The documentation: a short README that links into docs/, and a MkDocs site that builds cleanly."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"

# [text](target) outside code; images too (![alt](target)).
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def _readme_links() -> list[str]:
    text = re.sub(r"```.*?```", "", README.read_text(), flags=re.S)  # fenced code
    text = re.sub(r"`[^`\n]*`", "", text)  # inline code
    return LINK.findall(text)


def _github_slug(heading: str) -> str:
    """The anchor GitHub (and MkDocs' toc) gives a heading: lower case, punctuation dropped, spaces → -."""
    text = re.sub(r"[`*]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(markdown: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", markdown.read_text(), flags=re.S)
    return {_github_slug(m) for m in re.findall(r"^#{1,6}\s+(.+?)\s*#*\s*$", text, flags=re.M)}


def test_readme_is_short():
    lines = README.read_text().splitlines()
    assert len(lines) <= 160, f"README.md has {len(lines)} lines; move detail into docs/ (at most 160)"


def test_readme_relative_links_point_to_files_that_exist():
    links = [link for link in _readme_links() if not re.match(r"^[a-z][a-z0-9+.-]*:", link)]
    assert links, "README.md should link into docs/"
    broken = []
    for link in links:
        path, _, anchor = link.partition("#")
        target = (ROOT / path).resolve() if path else README
        if not target.exists():
            broken.append(f"{link}: no file {target.relative_to(ROOT)}")
        elif anchor and target.suffix == ".md" and anchor not in _anchors(target):
            broken.append(f"{link}: no heading with anchor #{anchor} in {target.relative_to(ROOT)}")
    assert not broken, "README.md has broken links:\n" + "\n".join(broken)


def test_docs_site_builds_strict(tmp_path):
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # Material's banner about its successor
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(ROOT / "mkdocs.yml"),
         "--site-dir", str(tmp_path / "site")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, f"mkdocs build --strict failed:\n{result.stdout}\n{result.stderr}"
    site = tmp_path / "site"
    assert (site / "index.html").exists()
    _site_works_from_disk(site)


def _site_works_from_disk(site: Path) -> None:
    """Opened from disk (file://), the site is usable: its links are to pages, not folders (which a
    browser shows as listings), nothing is fetched from the internet (fonts), search needs no server,
    and the Simulations page's contents list its parts by task."""
    pages = sorted(site.glob("*.html"))
    remote = [p.name for p in pages if re.search(r"fonts\.(?:googleapis|gstatic)\.com", p.read_text())]
    assert not remote, f"pages that fetch fonts from the internet: {remote}"
    index = (site / "index.html").read_text()
    links = re.findall(r'href="((?!https?:|#|mailto:)[^"]+)"', index)
    folders = [link for link in links if link.endswith("/") or link in (".", "..")]
    assert not folders, f"links to folders (a directory listing from disk): {folders[:5]}"
    assert "simulations.html" in links and "connect-a-model.html" in links
    # The offline plugin puts the search index in a script a page loads from disk.
    assert list((site / "search").glob("search_index.js")), "search needs a server: no search_index.js"
    simulations = (site / "simulations.html").read_text()
    toc = simulations[simulations.index('md-nav--secondary'):]
    for part in ("The dry run: start here", "The tools", "Who is in the room", "Real models",
                 "Playing a character yourself"):
        assert part in toc, f"the Simulations page's contents miss {part!r}"
    connect = (site / "connect-a-model.html").read_text()
    for words in ("Ollama", "LM Studio", "vLLM", "llama.cpp", "OpenAI", "Test connection", "Model settings",
                  "host.docker.internal", "bookkeeping"):
        assert words in connect, f"Connect a model says nothing of {words}"
