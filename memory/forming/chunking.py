"""Sentence chunking of long fields (seed 000 "Text Chunking")."""

from __future__ import annotations

import re
from collections.abc import Iterable

# After .!? and any closing quote or bracket, which stays with its sentence.
_SENTENCE_END = re.compile(r"(?:(?<=[.!?])|(?<=[.!?][\"'’”)\]]))\s+")
# Where a sentence too long for one chunk is cut, best first: after a clause's punctuation (a memory
# that ends "on his" reads as broken, to a model and to a search), else between words.
_CLAUSE_END = re.compile(r"(?<=[,;:])\s+|\s+(?=[—–]\s)")


def split_sentences(text: str) -> list[str]:
    return [part.strip() for part in _SENTENCE_END.split(text.strip()) if part.strip()]


def chunk_text(text: str, max_chars: int = 300) -> list[str]:
    """Sentences at .!? boundaries, packed into chunks of at most max_chars.

    A new chunk starts when the next sentence would overflow; a single sentence longer than
    max_chars is cut between its clauses (else its words) so no chunk ever exceeds the limit.
    """
    return _pack((piece for sentence in split_sentences(text or "") for piece in _fitted(sentence, max_chars)),
                 max_chars)


def _fitted(sentence: str, max_chars: int) -> list[str]:
    if len(sentence) <= max_chars:
        return [sentence]
    clauses = _CLAUSE_END.split(sentence)
    return _pack((piece for clause in clauses
                  for piece in ([clause] if len(clause) <= max_chars else _words(clause, max_chars))), max_chars)


def _words(text: str, max_chars: int) -> list[str]:
    pieces = []
    for word in text.split():
        while len(word) > max_chars:  # a pathological "word" (a URL): cut it hard
            pieces.append(word[:max_chars])
            word = word[max_chars:]
        if word:
            pieces.append(word)
    return _pack(pieces, max_chars)


def _pack(pieces: Iterable[str], max_chars: int) -> list[str]:
    """Pieces (each within max_chars) joined by spaces into as few chunks as fit, in order."""
    chunks: list[str] = []
    current = ""
    for piece in pieces:
        candidate = f"{current} {piece}" if current else piece
        if len(candidate) <= max_chars:
            current = candidate
        else:
            if current:
                chunks.append(current)
            current = piece
    if current:
        chunks.append(current)
    return chunks
