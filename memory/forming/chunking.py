"""Sentence chunking of long fields (seed 000 "Text Chunking")."""

from __future__ import annotations

import re

_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+")


def split_sentences(text: str) -> list[str]:
    return [part.strip() for part in _SENTENCE_END.split(text.strip()) if part.strip()]


def chunk_text(text: str, max_chars: int = 300) -> list[str]:
    """Sentences at .!? boundaries, packed into chunks of at most max_chars.

    A new chunk starts when the next sentence would overflow; a single sentence longer than
    max_chars is cut at word boundaries so no chunk ever exceeds the limit.
    """
    chunks: list[str] = []
    current = ""
    for sentence in split_sentences(text or ""):
        pieces = [sentence] if len(sentence) <= max_chars else _split_long(sentence, max_chars)
        for piece in pieces:
            candidate = f"{current} {piece}" if current else piece
            if len(candidate) <= max_chars:
                current = candidate
            else:
                chunks.append(current)
                current = piece
    if current:
        chunks.append(current)
    return chunks


def _split_long(sentence: str, max_chars: int) -> list[str]:
    out: list[str] = []
    current = ""
    for word in sentence.split():
        while len(word) > max_chars:  # a pathological "word" (a URL): cut it hard
            if current:
                out.append(current)
                current = ""
            out.append(word[:max_chars])
            word = word[max_chars:]
        candidate = f"{current} {word}" if current else word
        if len(candidate) <= max_chars:
            current = candidate
        else:
            out.append(current)
            current = word
    if current:
        out.append(current)
    return out
