"""Whether a line the dry run could say would repeat the scene: a sentence said in the last turns
(word for word, or with one word changed), a phrase of five words the character said lately (a goal
said over and over reads as a loop), a stage business it just did, or a whole line said before."""

from __future__ import annotations

import re

WINDOW = 12  # turns a sentence stays "just said"
ECHO = 5  # words in a row that make a phrase one's own: said once in the window, not again

_ACTIONS = re.compile(r"\*[^*]*\*")
_WORD = re.compile(r"[a-z0-9_]+(?:'[a-z_]+)?")


def sentences(text: str) -> list[tuple[str, ...]]:
    """A line's sentences as their words (stage business left out, case and punctuation ignored)."""
    said = " ".join(_ACTIONS.sub(" ", text or "").split())
    # A quote of an earlier line is one word of the sentence that brings it back, not sentences of its own.
    said = re.sub(r"“([^”]*)”", lambda m: "_".join(_WORD.findall(m.group(1).lower().replace("’", "'"))), said)
    out = []
    for sentence in re.split(r"(?<=[.!?…])\s+", said):
        found = tuple(_WORD.findall(sentence.lower().replace("’", "'")))
        if found:
            out.append(found)
    return out


def actions(text: str) -> set[str]:
    """A line's stage business by what it is done to ("*nods toward the quay*" and "*glances at the
    quay*" are one): its last two words."""
    return {" ".join(_WORD.findall(a.lower())[-2:]) for a in _ACTIONS.findall(text or "")
            if not a.lower().startswith("*whisper")}  # whom one whispers to is no business done


def near(a: tuple[str, ...], b: tuple[str, ...]) -> bool:
    """The same sentence, or the same with one word changed, added or dropped (four words or more)."""
    if a == b:
        return True
    if min(len(a), len(b)) < 4 or abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        return sum(x != y for x, y in zip(a, b)) <= 1
    short, long = (a, b) if len(a) < len(b) else (b, a)
    return any(long[:i] + long[i + 1:] == short for i in range(len(long)))


def _runs(words: tuple[str, ...], size: int = ECHO) -> set[tuple[str, ...]]:
    return {words[i:i + size] for i in range(len(words) - size + 1)}


class Lately:
    """What was said in the run's last WINDOW turns, and by whom, as the one about to speak heard it."""

    def __init__(self, transcript: list[tuple[int, str, str]], agent: str, number: int):
        recent = [(speaker, text) for n, speaker, text in transcript if n > number - WINDOW and not text.startswith("(")]
        self.sentences = [s for _speaker, text in recent for s in sentences(text)]
        mine = [text for speaker, text in recent if speaker == agent]
        self.mine = mine
        self.runs = set().union(*(_runs(s) for text in mine for s in sentences(text)))
        # Stage business anyone did lately (three glances at the quay read as a loop too).
        self.actions = set().union(*(actions(text) for _speaker, text in recent))
        self.lines = {" ".join(w for s in sentences(text) for w in s) for _n, _s, text in transcript}

    def fresh(self, line: str) -> bool:
        said = sentences(line)
        if not said or " ".join(w for s in said for w in s) in self.lines or actions(line) & self.actions:
            return False
        for sentence in said:
            if any(near(sentence, other) for other in self.sentences) or _runs(sentence) & self.runs:
                return False
        # Nor the same sentence twice in one line.
        return len(set(said)) == len(said)
