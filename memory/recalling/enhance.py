"""Query enhancement (seed 000 "Retrieval Enhancements"): context injection, temporal boosting and
synonym expansion, each optional per call.

QueryEnhancement holds what a caller switched on (a simulation's options, ToolContext.enhance);
apply() reads one query and says what it changes (EnhancedQuery), and recall() carries that out:
- context: the query vector becomes normalize((1 − CONTEXT_WEIGHT)·query + CONTEXT_WEIGHT·context);
- temporal: a query naming a time ("on turn 5", "just now", "at the start", "earlier") adds a
  boost to memories of those turns (a time component in the score; the window's turns also join
  the candidate pool, so a memory the query's words miss can still come up);
- synonyms: a small curated map adds related words to the BM25 side (at SYNONYM_IDF_SCALE of their
  weight) and, where a tool ranks by similarity alone, a second query vector mixed in.

Each applies only when it has something to add (an empty context, a query naming no time, a query
with no word in the map): EnhancedQuery.used lists what did, and the tools answer it as
`query_expansion_used`. The figures that set the defaults are in docs/memory.md ("Query enhancement").
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

# The context vector's share of the query vector. On locomo-dev (its last line as context) R@10 fell
# 0.729 → 0.725 at 0.15 and → 0.716 at 0.3: off by default, and kept light.
CONTEXT_WEIGHT = 0.3
# An expansion word's BM25 weight against the agent's own words: a synonym is evidence, not proof
# (locomo-dev R@10: 0.744 at 0.3, 0.738 at 0.5, 0.729 without).
SYNONYM_IDF_SCALE = 0.3
# Tools without a BM25 side: the vector of the query with its synonyms gets this share.
SYNONYM_VECTOR_WEIGHT = 0.3
MAX_EXPANSIONS = 12        # words added in all (BM25 reads at most 32 terms of a query)
SYNONYMS_PER_WORD = 3
# The time boost added to a memory's score inside the window, decaying outside it: a turn named
# by number outweighs most differences in relevance (0..1); a vague "recently" only tips a tie.
TURN_BOOST = 0.5
VAGUE_BOOST = 0.2


@dataclass(frozen=True)
class TimeWindow:
    """Turns lo..hi get `weight`; outside, weight·exp(−distance/width). Memories without a turn
    (gifted ones) get nothing."""
    lo: int
    hi: int
    width: float
    weight: float
    phrase: str

    def boost(self, turn: int | None) -> float:
        """The same figure the ranking SQL computes (sql.time_sql), for tests and docs."""
        if turn is None:
            return 0.0
        distance = max(self.lo - turn, turn - self.hi, 0)
        return self.weight * math.exp(-distance / self.width)


@dataclass(frozen=True)
class EnhancedQuery:
    """What the enhancements do to one query: recall() applies it."""
    query: str
    context: str = ""
    window: TimeWindow | None = None
    expansions: tuple[str, ...] = ()
    used: tuple[str, ...] = ()

    @property
    def lexical_text(self) -> str:
        return " ".join([self.query, *self.expansions])

    @property
    def expanded_text(self) -> str:
        """The query with its synonyms, as a second query vector's text."""
        return f"{self.query} ({', '.join(self.expansions)})" if self.expansions else self.query


@dataclass(frozen=True)
class QueryEnhancement:
    context: str = ""
    temporal: bool = False
    synonyms: bool = False

    @classmethod
    def from_options(cls, options: dict | None) -> "QueryEnhancement":
        """From ToolContext.enhance: {"context": str, "temporal": bool, "synonyms": bool}."""
        options = options or {}
        return cls(context=str(options.get("context") or "").strip(), temporal=bool(options.get("temporal")),
                   synonyms=bool(options.get("synonyms")))

    def __bool__(self) -> bool:
        return bool(self.context or self.temporal or self.synonyms)

    def apply(self, query: str, current_turn: int | None = None) -> EnhancedQuery:
        used = []
        context = self.context if self.context and query else ""
        if context:
            used.append("context")
        window = time_window(query, current_turn) if self.temporal else None
        if window:
            used.append("temporal")
        expansions = synonyms_for(query) if self.synonyms else ()
        if expansions:
            used.append("synonyms")
        return EnhancedQuery(query=query, context=context, window=window, expansions=expansions, used=tuple(used))


# ---- temporal -------------------------------------------------------------------------------

_NUMBER_WORDS = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty".split())}
_NUM = r"(\d{1,6}|" + "|".join(sorted(_NUMBER_WORDS, key=len, reverse=True)) + r")"
_TURN_RANGE = re.compile(rf"\b(?:turns|rounds)\s+{_NUM}\s*(?:-|–|to|and|through|until)\s*{_NUM}\b", re.I)
_TURN = re.compile(rf"\b(?:turn|round)\s*#?\s*{_NUM}\b", re.I)
_TURNS_AGO = re.compile(rf"\b{_NUM}\s+(?:turns?|rounds?)\s+ago\b", re.I)
# "just now" means the last lines; "recently" the latest part of the story; "at the start" its
# opening; "earlier" anything before the last exchange.
_JUST_NOW = re.compile(r"\b(just now|a moment ago|moments ago|a second ago|a minute ago|last turn|just said|"
                       r"previous turn|last line|just told)\b", re.I)
_RECENT = re.compile(r"\b(recently|lately|latest|most recent|the other day|not long ago)\b", re.I)
_START = re.compile(r"\b(at the (?:start|beginning|outset)|in the beginning|at first|to begin with|first thing|"
                    r"when we (?:first )?met|first met|start of (?:the|our) (?:conversation|story|evening|day|meeting))\b",
                    re.I)
_EARLIER = re.compile(r"\b(earlier|previously|a while ago|some time ago|before now)\b", re.I)


def _number(text: str) -> int:
    return int(text) if text.isdigit() else _NUMBER_WORDS[text.lower()]


def time_window(query: str, current_turn: int | None) -> TimeWindow | None:
    """The turns a query names, or None. Relative phrases need the current turn (the one being
    spoken: the last line heard is current_turn − 1)."""
    if m := _TURN_RANGE.search(query):
        a, b = sorted((_number(m.group(1)), _number(m.group(2))))
        return TimeWindow(a, b, 1.0, TURN_BOOST, m.group(0))
    if m := _TURN.search(query):
        n = _number(m.group(1))
        return TimeWindow(n, n, 1.0, TURN_BOOST, m.group(0))
    if not current_turn or current_turn < 2:
        return None
    now = current_turn - 1  # the last line said
    span = max(3, round(now / 10))  # "recently" in a 500-line story is more than the last 3 lines
    if m := _TURNS_AGO.search(query):
        n = max(1, now + 1 - _number(m.group(1)))
        return TimeWindow(n, n, 1.0, TURN_BOOST, m.group(0))
    if m := _JUST_NOW.search(query):
        return TimeWindow(max(1, now - 1), now, 1.0, TURN_BOOST, m.group(0))
    if m := _RECENT.search(query):
        return TimeWindow(max(1, now - span + 1), now, span / 2, VAGUE_BOOST, m.group(0))
    if m := _START.search(query):
        return TimeWindow(1, span, span / 2, VAGUE_BOOST, m.group(0))
    if (m := _EARLIER.search(query)) and now > 3:
        return TimeWindow(1, now - 2, 2.0, VAGUE_BOOST / 2, m.group(0))
    return None


# ---- synonyms -------------------------------------------------------------------------------

# Curated by hand for the everyday talk of characters (no WordNet: nothing is downloaded at run
# time). Each group is mutually substitutable in a question; words are matched lower-case, with a
# plural -s/-es also tried.
SYNONYM_GROUPS: list[tuple[str, ...]] = [
    # people and family
    ("kid", "child", "children", "son", "daughter"), ("mother", "mom", "mum", "mommy"),
    ("father", "dad", "daddy"), ("parent", "mother", "father"), ("husband", "wife", "spouse", "partner"),
    ("brother", "sibling"), ("sister", "sibling"), ("friend", "buddy", "pal", "companion"),
    ("boss", "manager", "supervisor"), ("coworker", "colleague"), ("doctor", "physician"),
    ("teacher", "instructor", "tutor", "mentor"), ("neighbor", "neighbour"), ("family", "relatives"),
    # work and money
    ("job", "work", "career", "employment", "position"), ("company", "firm", "business", "employer"),
    ("money", "cash", "funds", "savings"), ("salary", "pay", "wage", "income"), ("buy", "purchase", "bought"),
    ("sell", "sold"), ("cost", "price", "expense"), ("shop", "store"), ("project", "task", "assignment"),
    ("meeting", "appointment"), ("school", "college", "university", "class"), ("study", "learn", "course"),
    # home and places
    ("house", "home", "apartment", "flat"), ("town", "city", "village"), ("trip", "journey", "travel", "vacation", "holiday"),
    ("restaurant", "diner", "cafe", "bistro"), ("hospital", "clinic"), ("beach", "shore", "coast", "seaside"),
    ("mountain", "hill", "peak"), ("forest", "woods"), ("road", "street"), ("car", "vehicle", "automobile"),
    ("boat", "ship", "ferry"), ("room", "chamber"), ("garden", "yard"), ("country", "nation"),
    # things and activities
    ("dog", "puppy", "pet"), ("cat", "kitten", "pet"), ("book", "novel", "reading"), ("movie", "film", "cinema"),
    ("song", "music", "tune"), ("painting", "art", "drawing", "artwork"), ("picture", "photo", "photograph", "image"),
    ("game", "match", "sport"), ("run", "jog", "running", "race", "marathon"), ("hike", "hiking", "trek", "walk"),
    ("camping", "camp", "tent"), ("swim", "swimming"), ("dance", "dancing"), ("cook", "cooking", "bake", "recipe"),
    ("food", "meal", "dish", "dinner", "lunch", "breakfast"), ("drink", "beverage"), ("gift", "present"),
    ("party", "celebration", "gathering"), ("wedding", "marriage"), ("birthday", "anniversary"),
    ("hobby", "pastime", "interest"), ("volunteer", "volunteering", "charity"), ("letter", "message", "note"),
    ("phone", "call"), ("weapon", "sword", "blade"), ("map", "chart"), ("key", "lock"),
    # events and states
    ("ill", "sick", "unwell"), ("illness", "sickness", "disease"), ("injury", "wound", "hurt"),
    ("accident", "crash"), ("fight", "argument", "quarrel", "conflict"), ("problem", "issue", "trouble", "setback"),
    ("plan", "idea", "scheme"), ("goal", "aim", "ambition", "dream"), ("promise", "vow", "pledge"),
    ("secret", "mystery"), ("danger", "threat", "risk"), ("help", "support", "assist"),
    ("win", "victory", "won"), ("lose", "loss", "lost", "defeat"), ("start", "begin", "beginning"),
    ("end", "finish", "over"), ("move", "relocate", "moved"), ("visit", "see", "visited"),
    # feelings
    ("happy", "glad", "joyful", "cheerful", "pleased"), ("sad", "unhappy", "upset", "down", "depressed"),
    ("angry", "mad", "furious", "annoyed"), ("afraid", "scared", "frightened", "fear"),
    ("worried", "anxious", "nervous", "concerned"), ("tired", "exhausted", "weary"),
    ("excited", "thrilled", "eager"), ("proud", "pride"), ("love", "adore"), ("hate", "dislike", "loathe"),
    ("like", "enjoy", "love"), ("calm", "relaxed", "peaceful"), ("lonely", "alone", "isolated"),
    ("grateful", "thankful"), ("surprised", "shocked", "amazed"), ("embarrassed", "ashamed"),
    # talk
    ("say", "tell", "mention", "said", "told"), ("ask", "question", "asked"), ("talk", "speak", "chat", "discuss"),
    ("think", "believe", "feel"), ("remember", "recall"), ("agree", "accept"), ("refuse", "decline", "reject"),
    ("lie", "deceive"), ("apologize", "apologise", "sorry"),
    # qualities and time
    ("big", "large", "huge"), ("small", "little", "tiny"), ("fast", "quick", "rapid"), ("old", "elderly", "aged"),
    ("new", "recent", "fresh"), ("beautiful", "pretty", "lovely"), ("difficult", "hard", "tough"),
    ("easy", "simple"), ("important", "significant", "crucial"), ("rich", "wealthy"), ("poor", "broke"),
    ("smart", "clever", "intelligent"), ("brave", "courageous", "bold"), ("kind", "nice", "caring"),
    ("night", "evening"), ("morning", "dawn"),
]


def _build_map() -> dict[str, tuple[str, ...]]:
    out: dict[str, list[str]] = {}
    for group in SYNONYM_GROUPS:
        for word in group:
            others = out.setdefault(word, [])
            others += [w for w in group if w != word and w not in others]
    return {w: tuple(v) for w, v in out.items()}


SYNONYMS = _build_map()
_WORD = re.compile(r"[a-z]+(?:'[a-z]+)?")


def synonyms_for(query: str) -> tuple[str, ...]:
    """Words related to the query's own, in query order, at most SYNONYMS_PER_WORD per word and
    MAX_EXPANSIONS in all; never a word the query already holds."""
    words = [w.removesuffix("'s") for w in _WORD.findall(query.lower().replace("\u2019", "'"))]
    present = set(words)
    out: list[str] = []
    for word in words:
        related = SYNONYMS.get(word)
        if related is None and word.endswith("es"):
            related = SYNONYMS.get(word[:-2])
        if related is None and word.endswith("s"):
            related = SYNONYMS.get(word[:-1])
        added = 0
        for other in related or ():
            if other in present or other in out:
                continue
            out.append(other)
            added += 1
            if added == SYNONYMS_PER_WORD or len(out) == MAX_EXPANSIONS:
                break
        if len(out) >= MAX_EXPANSIONS:
            break
    return tuple(out)

