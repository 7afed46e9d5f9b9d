"""The dry run as a scene partner: what a character says back to the line before it, offline.

The scripted provider reads what its memory handed it (the sheet, what it knows of the others, what
it believes, what is said of it, what it recalled) and answers the last line it heard as a person
would: a greeting with a greeting, a question with an answer, an accusation with a denial, a
proposal with a yes or a counter from what it wants, news with surprise. It speaks in the first
person, in whole sentences, never a sheet's label; it tells a secret only when the talk touches it,
and once; it passes on what it believes when the talk comes near it. Deterministic: the same scene
gives the same lines, and no line twice.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from chronicle.simulation.providers.voice import named_voice, sheet_line_voice
from chronicle.simulation.story.accused import said_to_you

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


_LABELS = {"Location", "Situation", "Time", "Atmosphere", "Archetype"}


def _me(text: str, agent: str) -> str:
    """The agent's name left after named_voice is whom a sentence is about: "lends Tomasz the violin"
    → "lends me the violin"."""
    return re.sub(rf"(?<=[a-z,] ){re.escape(agent)}\b(?!['’])", "me", text) if agent else text


def _items(text: str, label: str) -> list[str]:
    """A sheet's list back into its items: "try the new place, Bella's, have a fun, lively evening"
    is two goals (a name or a describing word after a comma goes on the item before it)."""
    rest = text[len(label):].strip().rstrip(".")
    items: list[str] = []
    for chunk in (c.strip() for c in re.split(r",\s*(?:and\s+)?|;\s*", rest) if c.strip()):
        first = chunk.split()[0]
        goes_on = items and (first[:1].isupper() or (len(chunk.split()) < 3 and re.search(r"(?:ly|ful|ous|ive)$", first)))
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
    for raw in lines:
        line = sheet_line_voice(re.sub(r"^\((?:turn \d+|before this story)[^)]*\)\s*", "", raw), agent)
        if line.startswith("My goals:"):
            known.goals += _items(line, "My goals:")
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


def _pick(options: list[str], seed: int) -> list[str]:
    """The options, starting at one the seed chooses: each turn opens differently, all are tried."""
    if not options:
        return []
    start = seed % len(options)
    return options[start:] + options[:start]


def _sentence(text: str) -> str:
    text = " ".join(text.split()).strip()
    if not text:
        return ""
    text = text[:1].upper() + text[1:]
    return text if text[-1] in ".!?”" else text + "."


def _lower(text: str) -> str:
    return text[:1].lower() + text[1:] if text[:2] != "I " and not text[:1].isupper() or text[:1] in "AT" else text


def _to_want(goal: str) -> str:
    """A goal as a clause after "I'd like us to": "get everyone fed before nine"; "convince the others
    to try Bella's" → "try Bella's" (what one wants of us, said to us)."""
    goal = re.sub(r"^(?:to\s+)", "", goal.strip().rstrip("."))
    return re.sub(r"^(?:convince|persuade|get|talk)\s+(?:the others|everyone|them|the group)\s+(?:into\s+|to\s+)", "", goal)


def _relevant(options: list[str], topic: set[str]) -> list[str]:
    """The options that share words with the topic, the most first."""
    scored = [(len(words(o) & topic), -i, o) for i, o in enumerate(options)]
    return [o for score, _i, o in sorted(scored, reverse=True) if score]


def secret_fits(known: Known, line: Heard, told: set[str]) -> str:
    """The secret the last line touches (two of its words, or one in a question or an accusation),
    not told yet, or ""."""
    for secret in known.secrets:
        shared = words(secret) & line.topic
        if secret not in told and (len(shared) >= 2 or (shared and line.act in ("question", "yes_no", "accusation"))):
            return secret
    return ""


def belief_fits(known: Known, line: Heard | None, passed: set[str]) -> tuple[str, str] | None:
    """A belief to pass on: one the talk touches, not yet passed on in this scene by this character."""
    for teller, claim in known.beliefs:
        if claim in passed:
            continue
        if line is None or words(claim) & line.topic or line.act in ("statement", "news"):
            return teller, claim
    return None


def replies(known: Known, line: Heard, seed: int, *, first_turn: bool = False) -> list[str]:
    """What the character could say back, the best first (the provider takes the first not yet said)."""
    to = line.speaker
    others = [n for n in known.present if n != known.agent]
    # What one wants of the one spoken to is said to them: "find out why you are so sure".
    wants = [said_to_you(_to_want(g), to, alone=False) if re.search(rf"\b{re.escape(to)}\b", g) else _to_want(g)
             for g in known.goals]
    want_first = _pick(_relevant(wants, line.topic) + [w for w in wants if w not in _relevant(wants, line.topic)], 0)
    values = known.values
    out: list[str] = []
    # What it just looked up about the one it answers comes first: the line speaks from what it recalled.
    if to in known.fresh and line.act != "accusation":
        for knowing in _knowing(known, line, others, to)[:1]:
            out += [f"{knowing} I'd like us to {w}, then." if not knowing.endswith("?") else f"{knowing} Then let's {w}."
                    for w in want_first[:1]]
    if line.act == "accusation":
        mine = next((what for who, what in known.said_of_me if who == to), "")
        denial = re.match(r"you ((?:\w+ed|took|stole|hid|broke|lost|kept|knew|signed|sold|made|told|got|left|did)\b.*)$", mine)
        if denial:
            out.append(f"That's not true, {to}. I never {_base_past(denial.group(1))}.")
        for opener in _pick([f"That's not fair, {to}.", f"Where is this coming from, {to}?", "That isn't true.",
                             f"No, {to}. You've got that wrong."], seed):
            follow = _pick(["You know me better than that.", "Ask anyone here.",
                            *(f"All I want is to {w}." for w in want_first[:2])], seed)
            out += [f"{opener} {f}" for f in follow]
    if line.act == "greeting" and first_turn:
        for hello in _pick([f"Hi, {to}.", f"Evening, {to}.", f"Hello, {to}, good to see you.", f"Hey, {to}."], seed):
            out += [f"{hello} I'm hoping we can {w}." for w in want_first[:2]] + [f"{hello} I'm glad you're here."]
    if line.act == "question":
        about = [n for n in known.others if re.search(rf"\b{re.escape(n)}\b", line.asked) and n != known.agent]
        for name in about:
            view = _first_sentence(known.others[name])
            if view:
                out.append(f"{name}? {_sentence(view)}")
        for fact in _relevant([*(c for _t, c in known.beliefs), *known.facts], line.topic)[:2]:
            out.append(f"From what I know, {_lower(_sentence(fact))}")
        for w in want_first:
            out += _pick([f"Honestly, {to}, I'd like us to {w}.", f"For me it's simple, {to}. I want to {w}.",
                          f"Whatever we do, {to}, I'd like to {w}."], seed)
        for value in values:
            out.append(f"What matters to me is {value}, {to}, so I'd go with that.")
    if line.act == "yes_no":
        hits = _relevant(wants, line.topic)
        if hits:
            out += _pick([f"Yes, {to}, as long as we {hits[0]}.", f"I think so, {to}. I'd like us to {hits[0]}."], seed)
        for w in want_first:
            out += _pick([f"I'm not sure, {to}. I'd rather we {w}.", f"Maybe, {to}. First I'd like us to {w}.",
                          f"Not yet, {to}. Let's {w} first."], seed)
    if line.act == "proposal":
        hits = _relevant(wants + values, line.topic)
        if hits:
            out += _pick([f"That works for me, {to}.", f"Yes, {to}, let's do that.", f"Good idea, {to}."], seed)
        for w in want_first:
            out += _pick([f"Maybe, {to}, but I'd rather we {w}.", f"{to}, could we {w} instead?",
                          f"I'm not convinced, {to}. I want to {w}."], seed)
    if line.act == "news":
        out += _pick([f"Really? I hadn't heard that, {to}.", f"Are you sure about that, {to}?",
                      f"Where did you hear that, {to}?", f"Huh. That's news to me, {to}."], seed)
    # A statement, and whatever the above left short: take it up one way or another, a different
    # way each turn (what one wants, asking someone, what one knows of them, what matters, a fact).
    moves = [_wanting(want_first, to, seed, hits=_relevant(wants, line.topic)), _asking(known, others, to, seed),
             _knowing(known, line, others, to), _valuing(values, to, seed), _telling(known, line, to, seed)]
    start = seed % len(moves)
    for k in range(len(moves)):
        out += moves[(start + k) % len(moves)]
    for who, said in known.recalled:
        out.append(f"{to}, like {who} said earlier: “{said}”" if who != known.agent else f"Like I said earlier: “{said}”")
    if line.act != "greeting" and first_turn:  # one's first words in the scene greet whoever one answers
        hello = _pick([f"Hi, {to}.", f"Evening, {to}.", f"Hello, {to}."], seed)[0]
        out = [f"{hello} {c[:1].upper() + c[1:]}" if not c.startswith(to) else f"{hello} {c[len(to) + 2:][:1].upper()}"
               f"{c[len(to) + 3:]}" for c in out]
    return [c for c in out if c]


def _wanting(wants: list[str], to: str, seed: int, *, hits: list[str]) -> list[str]:
    if hits:
        return _pick([f"Yes! That's it, {to}. I want to {hits[0]}.", f"Exactly, {to}. Let's {hits[0]}."], seed)
    out = []
    for w in wants:
        out += _pick([f"Maybe, {to}, but I'd still like us to {w}.", f"Hold on, {to}. Can we {w} first?",
                      f"I hear you, {to}. I just want to {w}."], seed)
    return out


def _asking(known: Known, others: list[str], to: str, seed: int) -> list[str]:
    """A question to someone else present: the scene goes on between them."""
    out = []
    for other in _pick([o for o in others if o != to], seed):
        for nod in _pick([f"{to} has a point.", f"I'm with {to} on that.", f"Hm, {to} may be right."], seed):
            out += _pick([f"{nod} {other}, what do you think?", f"{nod} {other}, would that work for you?",
                          f"{nod} You're quiet, {other}. What would you pick?"], seed)
    return out


def _knowing(known: Known, line: Heard, others: list[str], to: str) -> list[str]:
    """What one knows of someone present, said to them ("Sam, you love a good mushroom risotto.")."""
    out = []
    for name in [n for n in others if n in known.others and n == to]:
        sentences = re.split(r"(?<=[.!?;])\s+", known.others[name])
        # The first is the face everyone sees; what follows is what I know of them myself.
        for sentence in sentences[1:] or sentences:
            sentence = sentence.strip().rstrip(";.")
            if not sentence or not re.search(rf"\b{re.escape(name)}\b", sentence):
                continue
            said = said_to_you(sentence, name)
            if said != sentence and said.startswith(("you ", "your ")):
                out.append(f"{name}, {said}, don't you?" if re.match(r"you \w+s?\b", said) and not
                           re.match(r"you (?:are|were|have|had|do|did|can|will|would)\b", said) else f"{name}, {said}.")
    relevant = _relevant(out, line.topic)
    return relevant + [o for o in out if o not in relevant]


def _valuing(values: list[str], to: str, seed: int) -> list[str]:
    out = []
    for value in values:
        out += _pick([f"For me it comes down to {value}, {to}.", f"You know me, {to}: {value} matters to me."], seed)
    return out


def _telling(known: Known, line: Heard, to: str, seed: int) -> list[str]:
    facts = _relevant(known.facts, line.topic) + [f for f in known.facts if f not in _relevant(known.facts, line.topic)]
    return [f"{to}, {_lower(_sentence(_first_sentence(f)))}" for f in facts[:4]]


def _first_sentence(text: str) -> str:
    head = re.split(r"(?<=[.!?;])\s", " ".join(text.split()), maxsplit=1)[0]
    return head.rstrip(";")


_PAST = {"took": "took", "stole": "stole", "hid": "hid", "broke": "broke", "lost": "lost", "kept": "kept",
         "knew": "knew", "made": "made", "told": "told", "got": "got", "left": "left", "did": "did"}


def _base_past(phrase: str) -> str:
    """ "took the money" stays: after "I never" the simple past reads ("I never took the money")."""
    return phrase.rstrip(".")


def opening(known: Known, others: list[str], seed: int) -> list[str]:
    """The scene's first line: a greeting to those present, where we are, and what one wants."""
    names = ", ".join(others[:-1]) + f" and {others[-1]}" if len(others) > 1 else (others[0] if others else "")
    hello = _pick([f"Hello, {names}." if names else "Hello.", f"Evening, {names}." if names else "Evening.",
                   f"Hi, {names}." if names else "Hi."], seed)
    place = named_voice(known.place.split(":")[0].strip(), known.agent)
    place = f" Here we are: {place[:1].upper() + place[1:]}." if place else ""
    wants = [_to_want(g) for g in known.goals]
    out = [f"{h}{place} I'd like us to {w}. What do you think?" for h in hello for w in wants]
    return out + [f"{h}{place} Where shall we start?" for h in hello]
