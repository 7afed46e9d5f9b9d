"""What a dry-run character could say back: a reaction to the line it heard, then a move that takes
the scene on, each worded in the character's manner (chronicle.simulation.providers.sayings).

The reaction answers what the line did (a greeting, a question, an accusation, a proposal, news) and
takes up what it was about ("Bella's? I'm not sold."). The move is what one wants, put to the
others; a question about something of the one it answers, from what it knows of them; a turn to
someone quiet; what the last line raised; what matters to one; an earlier line remembered. What one
knows of someone is never said back to them as a description: it becomes a question about it. The
provider takes the first candidate that repeats nothing said lately (providers.freshness).
"""

from __future__ import annotations

import re

from chronicle.simulation.providers import sayings
from chronicle.simulation.providers.partner import Heard, Known, words
from chronicle.simulation.providers.sayings import fill, things
from chronicle.simulation.providers.voice import named_voice
from chronicle.simulation.story.accused import said_to_you

_SURPRISE = ["Really? I hadn't heard that, {to}.", "Huh. That's news to me, {to}.", "No! Since when, {to}?",
             "Wait, truly? I had no idea, {to}."]
_ACCEPT = ["That works for me, {to}.", "Yes, {to}, let's do that.", "Good idea, {to}."]


def _rotate(options: list, seed: int) -> list:
    if not options:
        return []
    start = seed % len(options)
    return options[start:] + options[:start]


def _to_want(goal: str) -> str:
    """A goal as a clause after "I'd like us to": "convince the others to try Bella's" → "try Bella's"."""
    goal = re.sub(r"^(?:to\s+)", "", goal.strip().rstrip("."))
    return re.sub(r"^(?:convince|persuade|get|talk)\s+(?:the others|everyone|them|the group)\s+(?:into\s+|to\s+)", "", goal)


def wants(known: Known, to: str) -> list[str]:
    """What one wants, as clauses said to `to` (what one wants of them is said to them)."""
    out = []
    for goal in known.goals:
        want = _to_want(goal)
        out.append(said_to_you(want, to, alone=False) if to and re.search(rf"\b{re.escape(to)}\b", goal) else want)
    return list(dict.fromkeys(out))


def _key(text: str) -> set[str]:
    """A phrase's words for telling whether it was said: its content words, or, where it has none
    ("the evening"), every word but its article."""
    return words(text) or set(re.findall(r"[a-z][a-z'’]{2,}", text.lower())) - {"the", "your", "my", "his", "her", "their"}


def _voiced_lately(known: Known, want: str) -> bool:
    """One's goal (or a thing) said in one's lines of late: said again it reads as a loop."""
    said = _key(want)
    return bool(said) and any(len(said & _key(line) | said & words(line)) * 3 >= len(said) * 2 for line in known.lately)


def _ranked(options: list[str], topic: set[str]) -> list[str]:
    """The options that share words with the topic first, the most first, then the rest as they were."""
    hits = sorted((o for o in options if words(o) & topic), key=lambda o: -len(words(o) & topic))
    return hits + [o for o in options if o not in hits]


def agrees(known: Known, topic: set[str]) -> bool:
    """Whether what was said meets something one wants or holds dear: two of its words, or one
    where that is all it has ("honesty")."""
    return any(len(words(g) & topic) >= min(2, len(words(g))) for g in [*known.goals, *known.values] if words(g))


# When, not what: "the evening" is no thing to talk about.
_TIMES = re.compile(r"\b(?:evening|night|morning|afternoon|day|week|month|year|moment|hour|minute|time|tonight|today)"
                    r"(?:['’]s|s)?$",
                    re.IGNORECASE)


def topics(known: Known, line: Heard) -> list[str]:
    """What the line was about, as one would name it, what touches one's own concerns first."""
    names = {known.agent, line.speaker, *known.present, *known.others}
    # A thing two of the lines before it took up already is worn: taken up again, the talk goes round.
    before = [_key(text) for text in known.talk[-4:-1]]
    found = [t for t in things(line.text, names) if not _TIMES.search(t)
             and sum(bool(_key(t) & said) for said in before) < 2 and not _voiced_lately(known, t)]
    mine = words(" ".join([*known.goals, *known.values, *known.secrets]))
    return sorted(found, key=lambda t: -len(words(t) & mine))


def _greetings(known: Known, to: str, seed: int) -> list[str]:
    evening = re.search(r"\b(?:evening|night|dusk)\b", known.place or "", re.IGNORECASE)
    by_manner = {"blunt": ["Hi, {to}.", "Hello, {to}."], "warm": ["Hi, {to}! Good to see you.", "Hey, {to}! Lovely to see you."],
                 "plain": ["Hello, {to}.", "Hi, {to}."]}[known.manner]
    plain = ["Hi, {to}.", "Hello, {to}.", "Hey, {to}."]
    return list(dict.fromkeys(fill(g, to=to) for g in _rotate(by_manner + (["Evening, {to}."] if evening else []), seed) + plain))


def reactions(known: Known, line: Heard, seed: int, *, first_turn: bool) -> list[str]:
    """What one says first: the line's answer, in one's manner (a statement where the line asked)."""
    to, manner = line.speaker, known.manner
    about = topics(known, line)
    mine = words(" ".join([*known.goals, *known.values]))
    secret = words(" ".join(known.secrets))
    out: list[str] = []
    if line.act == "accusation":
        claim = next((what for who, what in known.said_of_me if who == to), "")
        denial = re.match(r"you ((?:\w+ed|took|stole|hid|broke|lost|kept|knew|signed|sold|made|told|got|left|did)\b.*)$", claim)
        if denial:
            out.append(f"That's not true, {to}. I never {denial.group(1).rstrip('.')}.")
        out += [f"That's not fair, {to}.", f"No, {to}. You've got that wrong.", "That isn't true, and you know it."]
    elif line.act in ("question", "yes_no"):
        wanted = [w for w in _ranked(wants(known, to), line.topic) if words(w) & line.topic and not _voiced_lately(known, w)]
        if line.act == "question" and not wanted:  # "Where should we go?": what one wants is the answer
            wanted = [w for w in wants(known, to) if not _voiced_lately(known, w)]
        # What the question was about is taken up first ("Bella's? I'd say we keep it cheap.").
        lead = f"{about[0][:1].upper() + about[0][1:]}? " if about and not words(about[0]) & words(" ".join(wanted[:1])) else ""
        out += [lead + fill(t, w=w, to=to) for w in wanted[:1] for t in _rotate(["I'd say we {w}.", "Me? I want to {w}.",
                                                                              "If it were up to me, we'd {w}."], seed)]
        if line.act == "yes_no":
            agreeing = agrees(known, line.topic)
            out += [fill(t, to=to) for t in _rotate((sayings.YES if agreeing else sayings.NO)[manner], seed)]
        facts = [f for f in known.facts if words(f) & line.topic and len(f.split()) <= 24]
        out += [f"From what I know, {_opening_lowered(f).rstrip('.')}." for f in facts[:2]]
        out += [fill(t, v=v, to=to) for v in known.values for t in
                _rotate(sayings.VALUE[manner], seed)][:2]
        if line.act == "question":  # asked what one would do, with nothing new to want: what would do
            out += [fill(t, to=to) for t in _rotate(sayings.EASY[manner], seed)]
        out += [fill(t, to=to) for t in _rotate(sayings.UNSURE[manner], seed)]
    elif line.act == "proposal":
        if agrees(known, line.topic):
            out += _rotate([fill(t, to=to) for t in _ACCEPT], seed)
        out += [fill(t, t=t_, to=to) for t_ in about[:2] for t in _rotate(sayings.DOUBT[manner], seed)]
    elif line.act == "news":
        out += _rotate([fill(t, to=to) for t in _SURPRISE], seed)
    else:
        for thing in about[:2]:
            if words(thing) & secret:
                pool = sayings.WARY[manner]
            elif words(thing) & mine:
                pool = sayings.AGREE[manner]
            else:
                pool = sayings.DOUBT[manner]
            out += [fill(t, t=thing, to=to) for t in _rotate(pool, seed)]
    out += [fill(t, to=to) for t in _rotate(sayings.HEARD[manner], seed)]
    if first_turn:  # one's first words in the scene greet whoever one answers
        hello = _greetings(known, to, seed)
        if line.act == "greeting":
            return hello
        return [f"{h} {_unnamed(r, to)}" for r in out for h in hello] + hello
    return out


def moves(known: Known, line: Heard, seed: int, *, speakers: list[str] = ()) -> list[str]:
    """What takes the scene on, by kind, a different kind first each turn: what one wants (first,
    unless just said), a question about something of the one answered or about what they would do,
    a turn to someone quiet, what the line raised, what matters, an earlier line remembered, someone
    who has stepped out."""
    to, manner = line.speaker, known.manner
    fresh_wants = [w for w in _ranked(wants(known, to), line.topic) if not _voiced_lately(known, w)]
    wanting = [fill(t, w=w, to=to) for w in fresh_wants for t in _rotate(sayings.WANT[manner], seed)]
    hooks = [h for h in things(known.others.get(to, ""), {known.agent, to, *known.present}, yours=True)
             if not _voiced_lately(known, h)]
    asking = [fill(t, t=h, to=to) for h in _rotate(hooks, seed) for t in _rotate(sayings.ASK_ABOUT[manner], seed)]
    # Whoever has spoken least lately is turned to first; one not heard since everyone last spoke is quiet.
    others = [o for o in known.present if o != to]
    others.sort(key=lambda o: max((i for i, s in enumerate(speakers) if s == o), default=-1))
    lately_heard = set(speakers[-len(known.present) - 1:])
    quiet = [fill(t, o=o, to=to) for o in others
             for t in _rotate(sayings.TURN_TO[manner] + ([] if o in lately_heard else sayings.QUIET[manner]), seed)]
    # The place's things ("a coffee table with takeaway menus": what its description lists), glanced
    # at before a turn to someone else; the hour, where the place says it is late.
    items = known.place.partition(":")[2] or known.place.split(". ")[0].partition(",")[2]  # not the place's name
    # "Alex's apartment, living room": a part named without an article is a room of it.
    room = re.fullmatch(r"\s*(?!(?:a|an|the)\b)(\w+(?: \w+)?)\s*", items, flags=re.IGNORECASE)
    looks = [fill(look, t=s) for s in _rotate(things(items, {known.agent, *known.present}, any_article=True, proper=False), seed)
             for look in _rotate(sayings.LOOK, seed)] + ([f"*looks around the {room.group(1)}*"] if room else [])
    late = re.search(r"\b(?:night|midnight|late)\b", known.place, re.IGNORECASE)
    looks += (["It's getting late.", "The night's getting on."] if late else [])
    quiet = [f"{look} {q}" for q, look in zip(quiet, looks)] + quiet
    planning = [fill(t, to=to) for t in _rotate(sayings.PLAN[manner], seed)]
    planning = [f"{look} {p}" for p, look in zip(planning, _rotate(looks, seed + 1))] + planning
    # Someone who spoke lately and is not here now.
    gone = [o for o in dict.fromkeys(reversed(speakers[-8:])) if o not in known.present and o != known.agent]
    missing = [fill(t, o=o) for o in gone for t in _rotate(sayings.MISSING[manner], seed)]
    # What was just said, else what the others said of late that one has not taken up.
    raised = topics(known, line)[:2] + [t for text in reversed(known.talk[:-1]) for t in topics(known, Heard(to, text, "", set()))]
    following = [fill(t, t=h, to=to) for h in list(dict.fromkeys(raised))[:4] for t in _rotate(sayings.FOLLOW[manner], seed)]
    valuing = [fill(t, v=v, to=to) for v in _rotate(known.values, seed)
               for t in _rotate(sayings.VALUE[manner], seed)]
    remembering = [remembered(who, said, known.agent) for who, said in known.recalled]
    # What one wants drives the scene: said first, unless said in one's last two lines (below).
    kinds = [wanting] + _rotate([asking, quiet, following, valuing, remembering, planning, missing], seed)
    # A kind of move one made in one's last two lines goes last: the scene moves on another way.
    wordings = {id(wanting): sayings.WANT[manner], id(asking): sayings.ASK_ABOUT[manner],
                id(quiet): sayings.TURN_TO[manner] + sayings.QUIET[manner], id(following): sayings.FOLLOW[manner],
                id(valuing): sayings.VALUE[manner], id(planning): sayings.PLAN[manner],
                id(missing): sayings.MISSING[manner]}
    kinds.sort(key=lambda kind: id(kind) in wordings and _made_lately(known.lately[-2:], wordings[id(kind)]))
    # What one would do is asked once in a while, not at every turn.
    if _made_lately(known.lately, sayings.PLAN[manner]):
        kinds = [kind for kind in kinds if kind is not planning]
    if _made_lately(known.lately, sayings.MISSING[manner]):
        kinds = [kind for kind in kinds if kind is not missing]
    return [m for kind in kinds for m in kind]


def _opening_lowered(text: str) -> str:
    """A sentence going on after "From what I know,": a common first word lower-cased, never a name."""
    first = text.split(" ", 1)[0]
    return text[:1].lower() + text[1:] if first.lower() in ("the", "a", "an", "it", "there", "this", "that", "my",
                                                            "our", "his", "her", "their", "some", "everyone") else text


def quotable(said: str) -> str:
    """The sentence of an earlier line worth bringing back: the first that says something (two words
    of substance besides names, not a greeting, not a question), or ""."""
    for sentence in re.split(r"(?<=[.!?])\s+", " ".join(said.split())):
        named = words(" ".join(re.findall(r"\b[A-Z][\w'’]*", sentence)))
        if len(words(sentence) - named) >= 2 and not sentence.endswith("?") and not re.match(
                r"\W*(?:hi|hello|hey|evening|good (?:morning|afternoon|evening))\b", sentence, re.IGNORECASE):
            return sentence
    return ""


def remembered(who: str, said: str, agent: str) -> str:
    """An earlier line brought back: "I remember Alex saying “…”" (a quote that ends a sentence ends this one)."""
    end = "" if said.rstrip("”’\"").endswith((".", "!", "?", "…")) else "."
    return f"I remember {who} saying “{said}”{end}" if who != agent else f"Like I said earlier: “{said}”{end}"


def _made_lately(lines: list[str], templates: list[str]) -> bool:
    """Whether one of the lines holds a sentence of one of these wordings."""
    for template in templates:
        pattern = re.sub(r"\\\{\w+\\\}", ".+?", re.escape(template)).replace(r"\ ", " ")
        if any(re.search(pattern, line, re.IGNORECASE) for line in lines):
            return True
    return False


def _named(sentence: str, to: str) -> str:
    """The reaction said to someone: "Noted." → "Noted, Sam."; "Right. Bella's works." → "Right, Sam. …"."""
    return re.sub(r"^([^.!?]+?)([.!?])", lambda m: f"{m.group(1)}, {to}{m.group(2)}", sentence, count=1)


def _unnamed(sentence: str, to: str) -> str:
    """A sentence without its vocative, where the greeting before it names them already."""
    out = re.sub(rf"^((?:\*[^*]*\*\s*)?){re.escape(to)}, (\w)", lambda m: m.group(1) + m.group(2).upper(), sentence)
    out = re.sub(rf",? {re.escape(to)}(?=[.!?])", "", out)
    return out


def replies(known: Known, line: Heard, seed: int, *, first_turn: bool = False, speakers: list[str] = ()) -> list[str]:
    """Whole lines, best first: each reaction with each move (the provider takes the first fresh)."""
    answers = reactions(known, line, seed, first_turn=first_turn)
    going_on = moves(known, line, seed, speakers=speakers)
    out = []
    to = line.speaker
    wanted = wants(known, to)
    # "I don't know" to a question is no answer to go on from with another question: the scene
    # would pass the question round the room.
    thin = {fill(t, to=to) for pool in (sayings.UNSURE, sayings.NO, sayings.YES, sayings.HEARD) for t in pool[known.manner]}
    for answer in answers:
        evasive = line.act in ("question", "yes_no") and any(answer.endswith(t) for t in thin)
        for move in going_on:
            if any(w in answer for w in wanted) and any(w in move for w in wanted):
                continue  # one thing one wants to a line
            if evasive and move.endswith("?"):
                continue
            move = _unnamed(move, to) if to in answer else move
            if to not in answer and to not in move and not re.match(r"\w+\?", answer):  # said to whom it answers
                answer = _named(answer, to)
            if not words(answer) & words(move) - {line.speaker.lower()}:  # one thing said once
                out.append(f"{answer} {move[:1].upper() + move[1:]}")
    return out + answers


def opening(known: Known, others: list[str], seed: int) -> list[str]:
    """The scene's first line: a greeting to those present, where we are, and what one wants."""
    names = ", ".join(others[:-1]) + f" and {others[-1]}" if len(others) > 1 else (others[0] if others else "")
    evening = re.search(r"\b(?:evening|night|dusk)\b", known.place or "", re.IGNORECASE)
    hello = _rotate([f"{h}, {names}." if names else f"{h}." for h in ["Hello", "Hi", *(["Evening"] if evening else [])]], seed)
    # Where we are, by its name ("the Harbour Inn", "my apartment, living room"), not its description.
    parts = named_voice(known.place.split(":")[0].split(". ")[0].strip().rstrip("."), known.agent).split(", ")
    head = ", ".join(parts[:1] + [p for p in parts[1:2] if not re.match(r"(?:a|an|the)\b", p, re.IGNORECASE)])
    place = f" So, here we are: {head[:1].lower() + head[1:] if head.split(' ')[0] in ('My', 'The', 'A', 'An') else head}." \
        if head else ""
    ask = {"blunt": "Who's in?", "warm": "What do you all say?", "plain": "What do you think?"}[known.manner]
    out = [f"{h}{place} I'd like us to {w}. {ask}" for h in hello for w in wants(known, "")]
    return out + [f"{h}{place} Where shall we start?" for h in hello]
