"""The dry run as a scene partner: what a character has in front of it, and the line it answers.

The scripted provider reads what its memory handed it (the sheet, what it knows of the others, what
it believes, what is said of it, what it recalled) into `Known`, in the first person, and the last
line it heard into `Heard` (what the line did: a greeting, a question, an accusation…). What it says
back is chronicle.simulation.providers.answers; it tells a secret only when the talk touches it, and
once; it passes on what it believes when the talk comes near it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from chronicle.simulation.providers.sayings import manner
from chronicle.simulation.providers.voice import named_voice, sheet_line_voice

_ACTIONS = re.compile(r"\*[^*]*\*")
_WORDS = re.compile(r"[a-z][a-z'’]{2,}")
# Words that say nothing of what a line is about.
_COMMON = set("""
the and you but for was are his her she him not all say any one had has its who how why our out get got did can
too off now yes may way know took take made make told tell that this with have been from they them there what
about would your just were will said says into then than when some never here where which their want wants
think really going could should shall let's lets let what's that's it's i'm i've i'd you're we're don't can't
won't isn't wasn't also even still very much more most well over only like come came look tonight evening
something anything everything nothing someone anyone everyone thing things bit lot kind sure right good great
place places new try others other first last next night day people time way around just would could
without being before after because every
""".split())
_GREETING = re.compile(r"^\W*(?:hi|hello|hey|evening|good (?:morning|afternoon|evening)|welcome|howdy|greetings)\b",
                       re.IGNORECASE)
_ACCUSATION = re.compile(r"\b(?:you (?:lied|stole|took|hid|cheated|broke|lost|forgot|ruined|never told|knew|kept)|"
                         r"how could you|it was you|you['’]re (?:lying|hiding)|why did you|you have been|"
                         r"(?:is it|it['’]s) true (?:that )?you)\b", re.IGNORECASE)
_PROPOSAL = re.compile(r"\b(?:let['’]s|how about|what about|why don['’]t we|we could|we should|shall we|i vote|"
                       r"i suggest|i say we)\b", re.IGNORECASE)
_NEWS = re.compile(r"\b(?:did you hear|have you heard|guess what|apparently|i heard|told me|word is)\b", re.IGNORECASE)
_WH = re.compile(r"^\W*(?:what|where|who|why|how|when|which)\b", re.IGNORECASE)


def words(text: str) -> set[str]:
    """A text's content words, lightly stemmed ("prices" and "price" are one)."""
    found = set()
    for word in _WORDS.findall((text or "").lower().replace("’", "'")):
        word = word.removesuffix("'s").strip("'")
        if word in _COMMON or len(word) < 3:
            continue
        found.add(word[:-1] if word.endswith("s") and not word.endswith("ss") and len(word) > 4 else word)
    return found


@dataclass
class Known:
    """What a character has in front of it this turn, each in its own words (first person)."""

    agent: str
    role: str = ""
    place: str = ""
    goals: list[str] = field(default_factory=list)
    values: list[str] = field(default_factory=list)
    secrets: list[str] = field(default_factory=list)
    beliefs: list[tuple[str, str]] = field(default_factory=list)  # (who told me, or "", the claim)
    said_of_me: list[tuple[str, str]] = field(default_factory=list)  # (who says it, "you took …")
    others: dict[str, str] = field(default_factory=dict)  # name → what I know of them
    facts: list[str] = field(default_factory=list)
    recalled: list[tuple[str, str]] = field(default_factory=list)  # (who said it, the words) from beyond the window
    present: list[str] = field(default_factory=list)  # who else is here
    fresh: set[str] = field(default_factory=set)  # whom this turn's lookups told it about
    manner: str = "plain"  # blunt | warm | plain: how its sheet says it talks (providers.sayings)
    lately: list[str] = field(default_factory=list)  # its own lines of the last turns
    talk: list[str] = field(default_factory=list)  # the others' lines of the last turns, the last one last


_LABELS = {"Location", "Situation", "Time", "Atmosphere", "Archetype"}


def _me(text: str, agent: str) -> str:
    """The agent's name left after named_voice is whom a sentence is about: "lends Tomasz the violin"
    → "lends me the violin"."""
    return re.sub(rf"(?<=[a-z,] ){re.escape(agent)}\b(?!['’])", "me", text) if agent else text


# "keep the trio together, whatever the decision": what follows such a word qualifies the item before it.
_QUALIFIER = re.compile(r"(?:whatever|whoever|however|wherever|even|especially|unless|if|though|although|because|"
                        r"before|after|while|without|no|not|at|by|for|with|in|on)$", re.IGNORECASE)


def _items(text: str, label: str) -> list[str]:
    """A sheet's list back into its items: "try the new place, Bella's, have a fun, lively evening"
    is two goals (a name, a describing word or a qualifier after a comma goes on the item before it)."""
    rest = text[len(label):].strip().rstrip(".")
    items: list[str] = []
    for chunk in (c.strip() for c in re.split(r",\s*(?:and\s+)?|;\s*", rest) if c.strip()):
        first = chunk.split()[0]
        goes_on = items and (first[:1].isupper() or (len(chunk.split()) < 3 and re.search(r"(?:ly|ful|ous|ive)$", first))
                             or _QUALIFIER.match(first))
        if goes_on:
            items[-1] += f", {chunk}"
        else:
            items.append(chunk)
    return items


def known_from(agent: str, lines: list[str], *, beliefs: list[str] = (), said_of_me: list[str] = (),
               others: list[str] = (), facts: list[str] = (), header: str = "", place: str = "",
               recalled: list[tuple[str, str]] = ()) -> Known:
    """Known from the prompt's lines (the sheet's, the others', the beliefs…), turned to the first person."""
    known = Known(agent=agent, place=place)
    role = re.match(r"You are [^:,.]{1,80}: (.+?)(?: — |$)", header or "")
    known.role = role.group(1).strip().rstrip(".") if role else ""
    described = [header]
    for raw in lines:
        line = sheet_line_voice(re.sub(r"^\((?:turn \d+|before this story)[^)]*\)\s*", "", raw), agent)
        if line.startswith(("My traits:", "My personality:", "How others see me:")):
            described.append(line)
        if line.startswith("My goals:"):
            known.goals += [g for g in _items(line, "My goals:") if g not in known.goals]
        elif line.startswith("I value:") or line.startswith("I value "):
            known.values += _items(line, "I value:" if line.startswith("I value:") else "I value ")
        elif line.startswith("My secret:"):
            known.secrets.append(line[len("My secret:"):].strip())
    for raw in beliefs:
        line = re.sub(r"^\(turn \d+\)\s*", "", raw)
        if line.startswith("("):
            continue
        line = line.split(" — then ")[0]
        teller, sep, claim = line.partition(" told me: ")
        if not sep:
            teller, claim = "", line
        if ", not sure of it" in teller or " it is not so " in line:
            continue  # heard unsure, or heard denied: nothing to pass on
        known.beliefs.append((teller, claim.strip()))
    for raw in said_of_me:
        line = re.sub(r"^\(turn \d+\)\s*", "", raw).split(" — then ")[0]
        who, sep, what = line.partition(" says ")
        if sep and not what.startswith(","):
            known.said_of_me.append((who, what))
    for raw in others:
        match = re.match(r"^([A-Z][\w'’-]+(?: [A-Z][\w'’-]+)?): ([^.:]{1,80}\.)?\s*(.*)$", raw)
        if match and match.group(1) != agent and match.group(1) not in _LABELS:
            # "Jordan: Sous-chef. Jordan is …": the role is a title, what follows is what I know.
            known.others.setdefault(match.group(1), _me(named_voice(match.group(3) or match.group(2) or "", agent), agent))
    seen = set()
    for raw in facts:
        fact = re.sub(r"^\(turn \d+\)\s*", "", re.sub(r"\s*\(weak match\)$", "", raw))
        head = re.match(r"^([A-Z][\w'’ -]{0,40}): ", fact)
        if " said: " in fact or fact.startswith(("You are ", "(", "My ", "I value", "How others see me")) or head:
            # a line, the sheet, what one knows of someone, the scene: each has its place; and a
            # labelled note ("What I think of Sam: …", "Closer to: …") is the mind's, not a thing to say
            continue
        fact = _me(named_voice(fact, agent), agent)
        if fact not in seen:
            seen.add(fact)
            known.facts.append(fact)
    known.recalled = list(recalled)
    known.manner = manner(" ".join(described))
    return known


@dataclass
class Heard:
    """The line a reply answers: who said it, what it does, its words."""

    speaker: str
    text: str
    act: str  # greeting | accusation | question | yes_no | proposal | news | statement
    topic: set[str]
    asked: str = ""  # its questions


def heard(speaker: str, text: str) -> Heard:
    said = " ".join(_ACTIONS.sub(" ", re.sub(r"^\s*\*whispers[^*]*\*", "", text or "")).split())
    sentences = [s for s in re.split(r"(?<=[.!?])\s+", said) if s.strip()]
    asked = [s for s in sentences if s.rstrip("\"”’) ").endswith("?")]
    if _ACCUSATION.search(said):
        act = "accusation"
    elif asked:
        act = "question" if _WH.match(asked[-1]) else "yes_no"
    elif _GREETING.match(said):
        act = "greeting"
    elif _PROPOSAL.search(said):
        act = "proposal"
    elif _NEWS.search(said):
        act = "news"
    else:
        act = "statement"
    if act == "greeting" and len(sentences) > 1:  # "Hi, Sam. I'd like us to …": answered for the rest of it
        rest = heard(speaker, " ".join(sentences[1:]))
        act = rest.act if rest.act != "greeting" else act
    return Heard(speaker=speaker, text=said, act=act, topic=words(" ".join(asked) or said), asked=" ".join(asked))


def secret_fits(known: Known, line: Heard, told: set[str]) -> str:
    """The secret the last line touches (two of its words, or one in a question or an accusation),
    not told yet, or ""."""
    for secret in known.secrets:
        shared = words(secret) & line.topic
        if secret not in told and (len(shared) >= 2 or (shared and line.act in ("question", "yes_no", "accusation"))):
            return secret
    return ""


def belief_fits(known: Known, line: Heard | None, passed: set[str]) -> tuple[str, str] | None:
    """A belief to pass on, not yet passed on in this scene by this character: news answers most
    lines ("what do you think?" too), not an accusation."""
    for teller, claim in known.beliefs:
        if claim in passed:
            continue
        if line is None or words(claim) & line.topic or line.act != "accusation":
            return teller, claim
    return None
