"""What people keep coming back to: the offline reflection (the scripted and replay providers) finds
the topics several statements share, and says each in the words of the lines that raised it.

A topic is a word that at least two lines someone said use (an earlier insight or a note is not
quoted again), found by how many different people raised it and then how many statements. A name that only opens a statement ("Sam said: …") is who spoke, not
what it was about, nor is the one it is said to ("No, Inspector."); a word every sentence has
("think", "there") is no topic, nor is what people say of anything ("great", "always"), nor is a contraction ("I'll", "don't", "it's").
"""

from __future__ import annotations

import re

# Words too common to be what a conversation keeps coming back to.
COMMON = set("""
about above after again against also always another anyone anything around asked away back been before
being below between both came cannot come comes coming could didn does doing done down during each
either else even ever every everyone everything first from gets getting give given goes going gone good
have having hear heard here hers herself himself into just keep keeps know knows last least left less
like little long look made make makes many maybe might mine more most much must myself need never next
nice none nothing once only other ours ourselves over perhaps please quite rather really right said same
says shall should since some someone something still such sure take tell tells than that their theirs
them themselves then there these they thing things think this those though through told tonight took
under until upon very want wants well went were what when where whether which while whispered whole
will with within without would yeah year years your yours yourself
""".split()) | set("""
alright amazing awesome beautiful best better cool definitely easy excited exciting fantastic feel feeling
feels felt fine glad great happy hard help helped helping helps hope hoping important incredible inspired
inspiring kind lots love loved lovely mean means meant okay people place pretty proud real share shared
sharing sorry sort sound sounds special stuff super thank thanks time times today totally true way ways
week weeks wonderful yesterday
""".split()) | set("""
afternoon day days evening half hour hours minute minutes month months morning night nights noon
tomorrow weekend
""".split()) | set("""
three four five seven eight nine eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen
nineteen twenty thirty forty fifty sixty seventy eighty ninety hundred hundreds thousand thousands
million third fourth fifth sixth seventh eighth ninth tenth half twice
""".split())  # what people say of anything (how it felt, how much, when): no subject of their own
SPEAKER = re.compile(r"^([A-Z][\w'’-]*(?: [A-Z][\w'’-]*)?) (?:said|whispered to [^:]+|told me):\s*")
WORD = re.compile(r"[A-Za-z][a-z'’-]{3,}")
ACTION = re.compile(r"\*[^*]*\*")
SENTENCE = re.compile(r"(?<=[.!?])\s+")
_NAME = r"(?:(?:Mr|Mrs|Ms|Miss|Dr)\.?\s+)?[A-Z][\w'’-]*(?:\s+[A-Z][\w'’-]*)?"
# Whom a sentence is said to: a name or title set off at its end ("…, Inspector." "No, Mr Finlay?").
# Not at its start: "Hail, same as Tuesday." opens with what it is about.
VOCATIVE = re.compile(rf",\s+{_NAME}(?=\s*[.!?…]|\s*$)")
CITED = 2  # the statements an insight quotes
QUOTE_CHARS = 120  # an insight is a thought, not a transcript: a clause or two of each line
# A word after one of these is a thing someone has or talks about ("the pier", "my pots", "two euros").
THING = re.compile(r"\b(?:the|a|an|my|your|his|her|our|their|its|this|these|those|some|no|every|each|another|"
                   r"any|one|two|three|four|five|six|seven|eight|nine|ten|fifteen|twenty|\d+)\s+([a-z][a-z'’-]{3,})",
                   re.IGNORECASE)
# An earlier insight among the statements (as `insight` writes it): its topic is said already.
EARLIER = re.compile(r"(?:^(?:the\s+)?([\w'’-]+) keeps? coming up:|keeps? coming back to (?:the\s+)?([\w'’-]+):)",
                     re.IGNORECASE)


def _stem(word: str) -> str:
    word = word.lower().replace("’", "'").removesuffix("'s")
    return word[:-1] if word.endswith("s") and not word.endswith("ss") and len(word) > 4 else word


def topics(statements: list[tuple[int, str]], agent: str, limit: int = 3) -> list[tuple[str, list[int]]]:
    """The `limit` topics the statements keep coming back to, each with the statements that raise it
    (their numbers, at most two, one per person first: a thought that quotes more reads as a transcript). A statement's own speaker and the agent
    are not topics."""
    names = {_stem(agent)}
    found: dict[str, list[tuple[int, str]]] = {}  # topic -> [(statement number, who raised it)]
    display: dict[str, str] = {}  # topic -> how it reads: "the plane", "Bella"
    common: set[str] = set()  # topics written in lower case somewhere: a thing, not a name
    said_already = {_stem(m.group(1) or m.group(2)) for _n, text in statements if (m := EARLIER.search(text))}
    things: set[str] = set()  # words said after "the", "my", "two"…: a thing talked about, not how it was
    for number, text in statements:
        match = SPEAKER.match(text)
        if not match:
            continue  # what was said, not an earlier insight (quoting one nests quotes in quotes) nor a note
        speaker = match.group(1)
        names.add(_stem(speaker.split(" ")[0]))
        said = _said(text[match.end():])
        for word in WORD.findall(said):
            stem = _stem(word)
            if stem in COMMON or word.lower() in COMMON or len(stem) < 4 or "'" in stem:
                continue  # short, or a contraction: grammar, not a topic
            display.setdefault(stem, word.removesuffix("'s").removesuffix("’s"))
            if word[0].islower():
                common.add(stem)
            if all(n != number for n, _who in found.get(stem, [])):
                found.setdefault(stem, []).append((number, speaker))
        things.update(_stem(m.group(1)) for m in THING.finditer(said))
    ranked = sorted(
        ((stem, raised) for stem, raised in found.items()
         if len(raised) >= 2 and stem not in names and stem not in said_already
         and (stem in things or stem not in common)),  # a thing or a name; "tough", "lately" are neither
        key=lambda item: (-len({who for _n, who in item[1]}), -len(item[1]), item[1][0][0], item[0]))
    chosen: list[tuple[str, list[int]]] = []
    covered: set[int] = set()  # the statements that raised the topics chosen so far
    for stem, raised in ranked:
        # One statement per person first, then the rest, in the order they were said.
        firsts = {}
        for number, who in raised:
            firsts.setdefault(who, number)
        cited = sorted(firsts.values())[:CITED]
        cited += [n for n, _who in raised if n not in cited][:CITED - len(cited)]
        numbers = {n for n, _who in raised}
        if len(numbers & covered) * 3 >= len(numbers) * 2:
            continue  # the same lines again ("Yorkshire" after "Post"): nothing new to say
        chosen.append((f"the {stem}" if stem in common else display[stem], sorted(cited)))
        covered.update(numbers)
        if len(chosen) == limit:
            break
    return chosen


def _said(body: str) -> str:
    """What a statement says: its stage business (between asterisks) and whom it is said to left out."""
    return VOCATIVE.sub(" ", " ".join(ACTION.sub(" ", body).split()))


def sentence_about(text: str, topic: str) -> tuple[str, str]:
    """(who said it, the sentence of the statement that raises the topic), stage business left out."""
    match = SPEAKER.match(text)
    body = ACTION.sub(" ", text[match.end():] if match else text)
    stem = _stem(topic.removeprefix("the "))
    for sentence in SENTENCE.split(" ".join(body.split())):
        if stem in {_stem(w) for w in WORD.findall(_said(sentence))}:
            return (match.group(1) if match else "", _clip(sentence))
    return (match.group(1) if match else "", _clip(" ".join(body.split())))


def _clip(sentence: str) -> str:
    """A sentence, or its first clauses up to QUOTE_CHARS: cut at a clause's end, never mid-word."""
    if len(sentence) <= QUOTE_CHARS:
        return sentence.strip()
    head = sentence[:QUOTE_CHARS]
    cut = max(head.rfind(mark) for mark in (",", ";", ":", " —"))
    return (head[:cut] if cut > QUOTE_CHARS // 2 else head.rsplit(" ", 1)[0]).strip()


def insight(topic: str, statements: dict[int, str], cited: list[int], agent: str = "") -> str:
    """"Kit and I keep coming back to the plane: Kit said “…”, and I said “…”." in the lines' own
    words, as the one reflecting would note it (its own lines are "I")."""
    quoted, people = [], []
    for number in cited:
        who, sentence = sentence_about(statements[number], topic)
        speaker = "I" if who and who.split(" ")[0] == agent.split(" ")[0] else who
        quoted.append((speaker, sentence))
        if speaker and speaker not in people:
            people.append(speaker)
    # One person's lines need no "X said" before each; several people's do.
    said = [f"{speaker} said “{sentence}”" if speaker and len(people) > 1 else f"“{sentence}”"
            for speaker, sentence in quoted]
    people.sort(key=lambda name: name == "I")  # "Kit and I", not "I and Kit"
    who = " and ".join([", ".join(people[:-1]), people[-1]] if len(people) > 2 else people) or "Everyone"
    keeps = "keeps" if len(people) == 1 and who != "I" else "keep"
    quotes = ", and ".join([", ".join(said[:-1]), said[-1]]) if len(said) > 1 else said[0]
    ended = quotes.rstrip("”").endswith((".", "!", "?", "…"))
    return f"{who} {keeps} coming back to {topic}: {quotes}{'' if ended else '.'}"
