"""Sentence chunking of long fields (seed 000 "Text Chunking")."""

from __future__ import annotations

import re

_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+")


def split_sentences(text: str) -> list[str]:
    return [part.strip() for part in _SENTENCE_END.split(text.strip()) if part.strip()]


def chunk_text(text: str, max_chars: int = 300) -> list[str]:
    """Sentences at .!? boundaries, packed into chunks of at most max_chars.

    A new chunk starts when the next sentence would overflow; a single sentence longer than
    max_chars is cut between its clauses (else its words) so no chunk ever exceeds the limit.
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


# Where a long sentence may be cut, best first: after a clause's punctuation, then between words.
_CLAUSE_END = re.compile(r"(?<=[,;:])\s+|\s+(?=[—–]\s)")


def _split_long(sentence: str, max_chars: int) -> list[str]:
    """A sentence over max_chars, cut between its clauses where they fit (a memory that ends "on his"
    reads as broken, to a model and to a search), else between words."""
    out: list[str] = []
    current = ""
    for clause in _CLAUSE_END.split(sentence):
        pieces = [clause] if len(clause) <= max_chars else _split_words(clause, max_chars)
        for piece in pieces:
            candidate = f"{current} {piece}" if current else piece
            if len(candidate) <= max_chars:
                current = candidate
            else:
                out.append(current)
                current = piece
    if current:
        out.append(current)
    return out


def _split_words(text: str, max_chars: int) -> list[str]:
    out: list[str] = []
    current = ""
    for word in text.split():
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
