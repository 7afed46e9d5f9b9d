"""Whether a note bears on a line, by the words they share: the judgement after a line is sent a
claim, a secret or what a listener keeps to itself only when the line (or the one it answers) names
something of it, since that call comes after every line and most lines touch none of them."""

from __future__ import annotations

import re

_WORD = re.compile(r"[a-z0-9][a-z0-9']*")
# Words too common to say two texts are about one thing.
_COMMON = frozenset("""about after again also been before being could didn't does doesn't done down
even ever every from going gonna have here into just know like made make more most much must never
only other over really said same says should some still such than that their them then there these
they this those through told very want wants was were what when where which while will with would
your yours you're i'm it's that's""".split())


def words(text: str) -> set[str]:
    """The text's telling words: four letters or more, not among the most common, "'s" dropped."""
    out = set()
    for word in _WORD.findall(text.lower()):
        word = word.removesuffix("'s").strip("'")
        if len(word) >= 4 and word not in _COMMON:
            out.add(word)
    return out


def touches(note: str, *texts: str) -> bool:
    """The note shares a telling word with any of the texts (a name, a place, a thing)."""
    mine = words(note)
    return bool(mine) and any(mine & words(text) for text in texts if text)
