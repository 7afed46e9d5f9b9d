"""A character's own words for what its memory says of it: its name and its pronouns turned into
"I" and "my" ("Sam got a bonus" → "I got a bonus", "her father" → "my father"). The dry run's lines
and the offline "Ask as the character" speak with it."""

from __future__ import annotations

import re

# "Alex now leads" → "I now lead": a third-person verb after the name loses its -s.
_ADVERBS = r"(?:(?:now|also|always|often|never|still|usually|really|rarely|sometimes|already)\s+)?"
_NOT_VERBS = r"(?!(?:and|or|the|a|an|of|to|with|in|at|on|for|from|by)\b)"


def _base_verb(verb: str) -> str:
    if verb in ("is", "was", "has", "does"):
        return {"is": "am", "was": "was", "has": "have", "does": "do"}[verb]
    if re.search(r"(ss|sh|ch|x|o)es$", verb):
        return verb[:-2]
    if re.search(r"[^aeiou]ies$", verb):
        return verb[:-3] + "y"
    if verb.endswith("s") and not verb.endswith("ss"):
        return verb[:-1]
    return verb


# The sheet is the character's own, and writers write it about her or him: "She lost her brother"
# → "I lost my brother". Only the pronouns the text uses most are the character's ("She often walks
# him" keeps the dog a him); "her" before a word is whose ("her father"), else whom ("before her").
_PRONOUNS = {"she": ("she", "her", "her", "herself"), "he": ("he", "his", "him", "himself")}
_NOT_A_NOUN = (r"(?!\s+(?:and|or|to|with|in|at|on|for|from|by|before|after|again|too|awake|asleep|alone|away|up|"
               r"down|out|off|over|safe|going|here|there|now|then)\b)")


# A second verb of the same "I" ("I notice everything and says little"): -s goes when the word after it
# reads as what the verb does ("says little", "speaks quietly"), not a noun's plural ("bread and cakes").
_SECOND_VERB = re.compile(r"(\bI\b[^.;!?]*?\band )(\w+[^s\W]s)(?= (?:little|much|nothing|everything|something|anything|"
                          r"less|more|well|hard|aloud|once|twice|\w+ly)\b)")


# "I got a small bonus … but is saving it": the same "I" goes on with is/has/does/was after and/but.
_SECOND_AUX = re.compile(r"(\bI\b[^.;!?]*?\b(?:and|but) )(is|has|does)\b")


def _second_verbs(text: str) -> str:
    text = _SECOND_VERB.sub(lambda m: m.group(1) + _base_verb(m.group(2)), text)
    return _SECOND_AUX.sub(lambda m: m.group(1) + _base_verb(m.group(2)), text)


def own_sheet_voice(text: str) -> str:
    """A line of the character's own sheet, written about them in the third person, in their voice."""
    counts = {key: len(re.findall(rf"\b(?:{'|'.join(set(words))})\b", text, re.IGNORECASE))
              for key, words in _PRONOUNS.items()}
    key = max(counts, key=counts.get)
    if not counts[key]:
        return text
    subject, whose, whom, itself = _PRONOUNS[key]

    def verb(m: re.Match) -> str:
        return f"{m.group(1)}{_base_verb(m.group(2)) if m.group(2).endswith('s') else m.group(2)}"
    out = re.sub(rf"\b(?i:{subject}) ({_ADVERBS}){_NOT_VERBS}(\w+)\b", lambda m: "I " + verb(m), text)
    # "…and never speaks of it", "…, and feeds him": the same subject, its second verb (after an
    # adverb, or before its object: "bread and cakes" is no verb).
    out = re.sub(r"(\bI\b[^.;!?]*?\band (?:never|always|often|still|rarely|sometimes|usually|also) )(\w+s)\b",
                 lambda m: m.group(1) + _base_verb(m.group(2)), out)
    out = re.sub(r"(\bI\b[^.;!?]*?\band )(\w+s)(?= (?:him|her|it|them|the|a|an|my|his|their|this|every)\b)",
                 lambda m: m.group(1) + _base_verb(m.group(2)), out)
    out = _second_verbs(out)
    out = re.sub(rf"\b{itself}\b", "myself", out)
    out = re.sub(rf"\b(?i:{whose})\b(?=\s+[a-z]){_NOT_A_NOUN}", lambda m: "My" if m.group(0)[0].isupper() else "my", out)
    return re.sub(rf"\b{whom}\b", "me", out)


def named_voice(text: str, agent: str) -> str:
    """The agent's name as "I" and "my": "Alex's team" → "my team", "Alex now leads" → "I now lead"."""
    if not agent:
        return text
    name = re.escape(agent)
    out = re.sub(rf"\b{name}'s\b", "my", text)
    out = re.sub(rf"\b{name} ({_ADVERBS}){_NOT_VERBS}(\w+)\b",
                 lambda m: f"I {m.group(1)}{_base_verb(m.group(2)) if m.group(2).endswith('s') else m.group(2)}", out)
    return _second_verbs(out)


# A sheet line that leaves out its subject after the label ("My secret: has been skimming the fares").
_LABEL_VERB = re.compile(r"^((?:My [a-z ]+|I value): )(is|was|has|does)\b")


def sheet_line_voice(text: str, agent: str) -> str:
    """A line of the agent's own sheet as its prompt shows it: in the person its label speaks in
    ("My goals: keep the inspectors off my back", not "…off her back")."""
    out = named_voice(own_sheet_voice(text), agent)
    return _LABEL_VERB.sub(lambda m: f"{m.group(1)}I {_base_verb(m.group(2))}", out)
