"""A claim about someone in the cast, as that person hears it, and the lines that answer it.

A claim that names someone ("Maeve signed off the inspection without reading it") is, to Maeve, not a
belief but an *accusation to face*: she knows the truth of it from her own sheet. She keeps it as
"Dara says you signed off the inspection without reading it" (category ACCUSATION), never as "Dara
told me: Maeve signed off …", in the third person about herself; and she does not dispute it by
being its subject.

Offline, three kinds of line answer a claim with few of its words, so the stance rule of
chronicle.simulation.story.beliefs does not see them; `answer()` reads them:
- the one accused denies it in the first person ("I never laid a finger on that drawer");
- a listener defends the one it is about ("That isn't like her at all", "He'd never do that");
- whoever passed it on takes it back ("I may have been wrong about him").
Each is a denial: beliefs revise by it as by any other.
"""

from __future__ import annotations

import re

from memory.api import memory_edits
from memory.models import Memory

ACCUSATION = "accusation"  # the memory category of a claim kept by the one it is about

# A title before a name is part of how the claim names the person ("Captain Maeve signed…").
_TITLE = (r"(?:(?:Captain|Capt\.|Dr\.?|Doctor|Mr\.?|Mrs\.?|Ms\.?|Miss|Sir|Lady|Lord|Chief|Officer|Sergeant|"
          r"Inspector|Father|Mother|Sister|Brother|Uncle|Aunt|Professor|Prof\.)\s+)?")
_ADVERB = r"(?:(?:never|always|often|still|also|really|secretly|just|already|once)\s+)?"
_STARTS_LOWER = {"the", "a", "an", "it", "there", "this", "that", "someone", "somebody", "everyone", "nobody", "one"}


def _name_pattern(name: str) -> str:
    """The name in full, or any part of it (a first or last name) of three letters or more."""
    parts = [name, *(p for p in name.split() if len(p) >= 3 and p[:1].isupper())]
    return "(?:" + "|".join(re.escape(p) for p in dict.fromkeys(parts)) + ")"


def named_in(text: str, cast: list[str]) -> list[str]:
    """The cast members the text names, in the order it first names them."""
    found = []
    for name in cast:
        match = re.search(rf"\b{_name_pattern(name)}\b", text)
        if match:
            found.append((match.start(), name))
    return [name for _start, name in sorted(found)]


def subject_of(claim: str, cast: list[str], *, holder: str = "") -> str:
    """Whom the claim is about: the first of the cast it names, if not its holder ("" when none)."""
    return next((name for name in named_in(claim, cast) if name != holder), "")


def _base(verb: str) -> str:
    """A third-person verb as "you" says it: is → are, has → have, signs → sign."""
    irregular = {"is": "are", "was": "were", "has": "have", "does": "do", "isn't": "aren't", "wasn't": "weren't",
                 "hasn't": "haven't", "doesn't": "don't"}
    if verb.lower() in irregular:
        return irregular[verb.lower()]
    if re.search(r"(ss|sh|ch|x|o)es$", verb):
        return verb[:-2]
    if re.search(r"[^aeiou]ies$", verb):
        return verb[:-3] + "y"
    if verb.endswith("s") and not verb.endswith(("ss", "us", "is")):
        return verb[:-1]
    return verb


def said_to_you(claim: str, subject: str, *, alone: bool = True) -> str:
    """The claim in the second person, about its subject: "Maeve has been skimming the fares" →
    "you have been skimming the fares". alone: the claim names nobody else of the cast, so its
    he/she/his/her are the subject's too."""
    name = _TITLE + _name_pattern(subject)
    text = claim.strip().rstrip(".")
    text = re.sub(rf"\b{name}['’]s\b", "your", text)
    text = re.sub(rf"\b{name}\s+({_ADVERB})([A-Za-z']+)\b",
                  lambda m: f"you {m.group(1)}{_base(m.group(2))}", text)
    text = re.sub(rf"\b{name}\b", "you", text)
    if alone:
        text = re.sub(r"\b(?:she|he)\s+(" + _ADVERB + r")([A-Za-z']+)\b",
                      lambda m: f"you {m.group(1)}{_base(m.group(2))}", text, flags=re.IGNORECASE)
        text = re.sub(r"\b(?:herself|himself)\b", "yourself", text)
        text = re.sub(r"\bhis\b", "your", text)
        # "her" before a word is whose ("her back"), else whom ("told her").
        text = re.sub(r"\bher\b(?=\s+(?!(?:and|or|to|with|in|at|on|for|from|by|about|before|after|again|that)\b)[a-z])",
                      "your", text)
        text = re.sub(r"\b(?:her|him)\b", "you", text)
    # "you take the key and hides it": the same "you" goes on with its second verb.
    text = re.sub(r"(\byou\b[^.;!?]*?\b(?:and|but) )(\w+s)(?= (?:it|him|her|them|the|a|an|your|his|their|this|every)\b)",
                  lambda m: m.group(1) + _base(m.group(2)), text)
    first, _, rest = text.partition(" ")
    if first.lower() in _STARTS_LOWER or first in ("You", "Your"):
        text = f"{first.lower()} {rest}".strip()
    return text


# The accused answers in the first person: "I never …", "I didn't …", "I would never …", "Not me".
_OWN_DENIAL = re.compile(
    r"\b(?:I\s+(?:have\s+|had\s+|would\s+|could\s+)?never\b|I\s+(?:did|do|have|had|was|would|could)\s*(?:n['’]t|\s+not)\b|"
    r"I['’](?:ve|d)\s+never\b|I['’]m\s+not\s+(?:a|an|the)\b|I\s+am\s+not\s+(?:a|an|the)\b|not\s+me\b|"
    r"wasn['’]t\s+me\b|that['’]?s\s+(?:a\s+lie|not\s+true|not\s+what\s+happened)|that\s+is\s+(?:a\s+lie|not\s+true)|"
    r"how\s+dare\b)", re.IGNORECASE)
# A listener speaks for the one it is about: "that isn't like her", "not like him at all", "she'd
# never", "he wouldn't", "not her style"; or will not have it: "I don't believe a word of it".
_PERSON_WORDS = ("her", "him", "them", "she", "he", "they", "his", "their")
_PERSON = r"(?:[Hh]er|[Hh]im|[Tt]hem|[Ss]he|[Hh]e|[Tt]hey|[A-Z][a-z]+)"
_DEFENCE = re.compile(
    rf"\b(?:(?i:is\s*n['’]t|is\s+not|not|does\s*n['’]t\s+sound|does\s+not\s+sound|nothing)\s+(?i:like)\s+(?P<like>{_PERSON})\b|"
    rf"(?P<would>{_PERSON})(?i:['’]d|\s+would|\s+could)\s*(?i:n['’]t|\s+not|\s+never)\b|"
    rf"(?i:not)\s+(?P<style>{_PERSON}|[Hh]is|[Tt]heir|[A-Z][a-z]+['’]s)\s+(?i:style|way|kind\s+of\s+thing)\b)")
_DISBELIEF = re.compile(r"\bI\s+(?:don['’]t|do\s+not|can['’]t|cannot)\s+believe\s+(?:a\s+word|it|that|this)\b",
                        re.IGNORECASE)
# Whoever said it takes it back: "I may have been wrong about him", "I take it back", "forget what I said".
_RETRACTION = re.compile(
    r"\b(?:I\s+(?:may|might|must|could)\s+have\s+been\s+(?:wrong|mistaken|unfair)|I\s+was\s+(?:wrong|mistaken|unfair)|"
    r"I\s+(?:got|had)\s+(?:it|that|him|her|them)\s+wrong|I\s+take\s+(?:it|that)\s+back|I\s+shouldn['’]t\s+have\s+said|"
    r"I\s+spoke\s+too\s+soon|forget\s+what\s+I\s+said|my\s+mistake|I\s+was\s+too\s+quick|I\s+jumped\s+to\s+conclusions)",
    re.IGNORECASE)
_UNSAID = re.compile(r"take|too soon|what I said|have said", re.IGNORECASE)
_PRONOUN = re.compile(r"\b(?:her|him|she|he|his|them|they)\b", re.IGNORECASE)


def answer(line: str, *, claim: str, speaker: str, subject: str, cast: list[str], holds: bool,
           touched_before: bool, present: bool = False) -> str:
    """Whether the line denies the claim in one of the three ways above ("denies", or ""): speaker's
    line; subject: whom the claim is about; holds: the speaker holds the claim (heard it, or passed
    it on, and has not taken it back); touched_before: the line the speaker heard just before was
    about the claim; present: the subject hears the line (a "him" in it is the subject's where
    the speaker holds the claim and names nobody else)."""
    if not subject:
        return ""
    named = named_in(line, cast)
    shares = bool(_words(claim) & _words(line))
    if speaker == subject:  # answering what was just said of it, or speaking of the claim's own matter
        return "denies" if _OWN_DENIAL.search(line) and (touched_before or shares) else ""
    # A pronoun is the subject's where the line names nobody else of the cast.
    alone = not [n for n in named if n not in (speaker, subject)]
    about = subject in named or (alone and bool(_PRONOUN.search(line)))
    # "I was wrong" must be about it; "I take it back", "I spoke too soon" take back what was said.
    retracted = _RETRACTION.search(line)
    if holds and retracted and (about or shares or touched_before or (present and _UNSAID.search(retracted.group(0)))):
        return "denies"
    for match in _DEFENCE.finditer(line):
        person = next(match.group(g) for g in ("like", "would", "style") if match.group(g))
        person = re.sub(r"['’]s$", "", person)
        if person.lower() in _PERSON_WORDS:
            if alone and (touched_before or shares or subject in named or (holds and present)):
                return "denies"
        elif re.fullmatch(_name_pattern(subject), person) and (touched_before or shares or holds):
            return "denies"
    if _DISBELIEF.search(line) and touched_before:
        return "denies"
    return ""


# Short words count ("jar", "tip"): an answer is short and names the thing, not the claim's phrasing.
_WORD = re.compile(r"[a-z0-9']{3,}")
_COMMON = {"that", "this", "with", "have", "been", "from", "they", "them", "there", "what", "about", "would",
           "your", "just", "were", "will", "said", "says", "into", "then", "than", "when", "some", "never",
           "the", "and", "you", "but", "for", "was", "are", "his", "her", "she", "him", "not", "all", "say", "any",
           "one", "had", "has", "its", "who", "how", "why", "our", "out", "get", "got", "did", "can", "too", "off",
           "now", "yes", "may", "way", "know", "took", "take", "made", "make", "told", "tell"}


def _words(text: str) -> set[str]:
    return {w.strip("'") for w in _WORD.findall(text.lower().replace("’", "'"))} - _COMMON


def faced_row(data: dict, *, subject: str, speaker: str, turn: int, cast: list[str], unsure: bool = False,
              evidence: list[int] = ()) -> dict:
    """The accusation the one a claim is about keeps on hearing it (memories_create's row)."""
    you = said_to_you(data["claim"], subject, alone=len(named_in(data["claim"], cast)) <= 1)
    content = f"{speaker} says, not sure of it, that {you}" if unsure else f"{speaker} says {you}"
    stance = "doubts" if unsure else "asserts"
    state = {"id": data["id"], "claim": data["claim"], "true": data["true"], "by": [speaker], "turn": turn,
             "stance": stance, "answered": None, "history": [{"turn": turn, "by": speaker, "stance": stance}]}
    return dict(content=content, agent=subject, kind="semantic", category=ACCUSATION, source="earned", turn=turn,
                importance=7.0, speaker=speaker, keys=[f"What do they say about me? {you}", f"Is it true that {you}?"],
                evidence=list(evidence), metadata={ACCUSATION: state})


def facing(bank, data: dict, subject: str) -> Memory | None:
    """The accusation `subject` keeps of this claim, if it has heard it."""
    if not subject:
        return None
    return (Memory.objects.in_bank(bank).filter(agent=subject, category=ACCUSATION, status="active",
                                                metadata__accusation__id=data["id"]).order_by("id").first())


def faced(bank, data: dict, *, subject: str, speaker: str, heard_by: list[str], turn: int, said: str) -> list[Memory]:
    """A denial heard by (or said by) the one the claim is about: its accusation says who answered it,
    and how ("then I said (turn 9) it is not so", "then Dara took it back (turn 12)")."""
    if said != "denies" or not subject or (speaker != subject and subject not in heard_by):
        return []
    memory = facing(bank, data, subject)
    if memory is None:
        return []
    state = dict(memory.metadata[ACCUSATION])
    if speaker == subject:
        told, state["answered"] = f"then I said (turn {turn}) it is not so", {"turn": turn}
    elif speaker in state.get("by", []):
        told = f"then {speaker} took it back (turn {turn})"
    else:
        told = f"then {speaker} said (turn {turn}) it is not so"
    state["stance"] = "denies"
    state["history"] = [*(state.get("history") or []), {"turn": turn, "by": speaker, "stance": "denies"}]
    base = (memory.metadata or {}).get("told") or memory.content
    return [memory_edits.memory_revise(memory=memory, content=f"{base} — {told}", importance=memory.importance,
                                       metadata={**memory.metadata, ACCUSATION: state, "told": base})]
