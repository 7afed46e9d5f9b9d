"""One model call after a line judges what it leaves in everyone who heard it (seeds 002, 003):
each listener's importance, how the line moved each listener's standing towards its speaker (with
the words that did it), the facts a listener learned from it, and which of its speaker's secrets it tells.

Asked once per line however many listen, instead of one importance call per listener. What the
answer lacks or gets wrong falls back to the offline rules (memory.forming.importance, memory.living.relationships)
listener by listener, and the fallback is said in each memory's importance metadata.

memory knows no provider: the caller passes `ask` (prompt → answer).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from memory.living.relationships import MAX_STEP, Judgement
from memory.living.relevance import touches

PROMPT_OPENING = "Judge one line of a conversation for each character who heard it."
# Every field in few words: this call comes after every line, so its instructions are paid for on
# every turn (about 230 tokens, from 420).
PROMPT = PROMPT_OPENING + """

{before}The line (turn {turn}): {content}

Listeners: {names}
{profiles}
{keeping}{heard}
For each listener give:
- "importance" 0-10 of the line to them: 0-2 small talk, 3-4 ordinary, 5-6 notable (plans, news),
  7-8 emotional or a turn in a relationship, 9-10 life-changing;
- "trust", "affinity" (-{step} to {step}, 0 unchanged): how it moves their trust in and warmth
  towards {speaker}; "evidence": the exact phrase that moved them most ("" if none);
- "facts": up to {facts} short standalone statements they learn about the world or people, naming
  who and what, a claim as its speaker's ("{speaker} says …"); [] for small talk, questions, feelings;
- "valence" -1 (crushed, furious) to 1 (overjoyed), 0 unmoved; "feeling": one word ("uneasy"; "" if unmoved);
- only if the line moves them closer to or further from a goal: "progress": {{"goal": "<as their
  profile says it>", "closer": true or false}}; only if it changes what they think of {speaker}:
  "opinion", one sentence in their words.
{own}
{reflections}{plans}{claims}{secrets}Also "left": who walks out in this line (now, not a plan); "came": who comes in.
Answer with JSON only, one entry per listener, in this shape:
{{"listeners": {{"{example}": {{"importance": 5, "trust": 0.0, "affinity": 0.0, "evidence": "", "facts": [], "valence": 0.0, "feeling": ""}}}}, "left": [], "came": []{shape}}}"""

# Seed 003's reflection, asked in the same call for whoever is due (memory.living.reflection's threshold):
# what the agent remembers since it last reflected, and insights citing it.
REFLECT = """{agent} has not reflected for a while.
{who}What {agent} remembers, numbered:
{statements}
"""
# The sheet of whoever reflects (seed 003: its identity, traits, values and goals in the prompt).
REFLECT_WHO = "Who {agent} is:\n{sheet}\n"
REFLECT_ASK = """Also give "reflections": for {names}, up to {n} high-level insights each would draw from
the numbered statements above as they would see them (patterns, what people want, what changed), each
with the numbers of the statements it rests on: at least two, and saying more than any one of them. And "approach":
for each, one or two sentences in their own words on how their way of going after their goals is
working, and what they will change (or keep).

"""
REFLECT_SHAPE = ', "reflections": {{"{agent}": [{{"insight": "...", "because": [1, 4]}}]}}, "approach": {{"{agent}": "..."}}'
# What the line does with each claim a listener or its speaker holds (chronicle's beliefs revise by it).
CLAIMS = """Claims that some who hear the line hold, numbered, with who holds each:
{claims}
Also give "stances": what the line does with each claim: "asserts" (says it or passes it on as
true), "questions" (asks whether it is true), "doubts" (passes it on or speaks of it as uncertain: "I
heard …, not sure it's true", "I doubt it"), "denies" (says it is false, or corrects it), or "none".

"""
CLAIMS_SHAPE = ', "stances": {"1": "none"}'  # (put in as it is: not formatted again)
STANCES = ("asserts", "questions", "doubts", "denies", "none")
# What a listener keeps to itself weighs what a line means to it ("the inspection you signed" to
# the one who signed it unread); the judge is told, and told it is not news.
KEPT = """What the listeners keep to themselves (to weigh what the line means to each; not facts they learn):
{listed}
"""
KEPT_PER_LISTENER = 2
# Which of the speaker's secrets the line tells (chronicle marks them told to its listeners, and its
# speaker stops keeping them: so a secret half told is not told; a model asked). Only a
# model says so: on a model's run of the demo, Jordan's pitch for Bella's was closer in meaning to
# Jordan's secret (0.65) than Alex's confession was to Alex's (0.38), so no rule on words or vectors.
SECRETS = """{speaker}'s secrets, numbered:
{secrets}
Also give "revealed": the numbers of the secrets this line tells its listeners whole (says or
plainly admits; not a part of one, a hint or a topic near it), [] for none.

"""
SECRETS_SHAPE = ', "revealed": []'
# The listeners' current plans (memory.living.plans): a line that overturns one gets a new plan.
PLANS = """The listeners' plans for the scene:
{listed}
Also "plans": for a listener whose plan this line overturns (blocks, or makes pointless), the new
plan in their words, one or two sentences ("Change of plan: …"); {{}} if none changes.

"""
PLANS_SHAPE = ', "plans": {}'
REFLECT_INSIGHTS = 3
REFLECT_STATEMENTS = 15  # the memories a reflection asked this way rests on (the call stays short)…
REFLECT_POOL = 40  # …the most important of this many latest

MAX_FACTS = 3  # per listener per line: a line that teaches more is a speech, and its episodic copy keeps it
_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$", re.IGNORECASE)


@dataclass
class AfterTurn:
    """What the model said about one line; a listener missing from `importance` (or `moves`) is left
    to the offline rule. `error` says why nothing could be read."""

    importance: dict[str, float] = field(default_factory=dict)
    moves: dict[str, Judgement] | None = None  # None: the answer was unusable, the heuristic judges
    facts: dict[str, list[str]] = field(default_factory=dict)
    progress: dict[str, tuple[str, bool]] = field(default_factory=dict)  # listener → (goal, closer)
    opinions: dict[str, str] = field(default_factory=dict)  # listener → what it now thinks of the speaker
    plans: dict[str, str] | None = None  # listener → new plan (None: plans were not asked about)
    # Per agent that was due to reflect: (insight, the 1-based numbers of the statements it cites).
    insights: dict[str, list[tuple[str, list[int]]]] = field(default_factory=dict)
    approaches: dict[str, str] = field(default_factory=dict)  # per agent that reflected: its metacognition
    # How the line leaves each listener feeling (memory.living.mood): valence −1..1 and its word.
    feelings: dict[str, float] = field(default_factory=dict)
    feeling_words: dict[str, str] = field(default_factory=dict)
    stances: dict[str, str] = field(default_factory=dict)  # claim → asserts | questions | doubts | denies | none
    revealed: list[str] = field(default_factory=list)  # the speaker's secrets the line tells, as asked
    # Who the line takes out of the room (of those who heard it) and brings in (any name: the caller
    # knows who is away): a model reads "I'll wait outside" where no rule on words dares.
    left: list[str] = field(default_factory=list)
    came: list[str] = field(default_factory=list)
    raw: str = ""
    error: str = ""


def prompt_for(*, speaker: str, content: str, turn: int, profiles: dict[str, str],
               reflect: dict[str, list[str]] | None = None, claims: list[str] | None = None,
               secrets: list[str] | None = None, before: Sequence[str] = (),
               took: dict[str, str] | None = None, holders: dict[str, list[str]] | None = None,
               keeping: dict[str, list[str]] | None = None, numbers: dict[str, int] | None = None,
               sheets: dict[str, str] | None = None, plans: dict[str, str] | None = None) -> str:
    """sheets: the sheet of each agent due to reflect (its identity, traits, values, goals); plans: each
    listener's current plan (a line may overturn it); took: how a listener with a formation filter took
    the line (its own copy), to be judged by; holders: who holds each claim; numbers: each claim's
    number in the run (else 1, 2… as listed); keeping: each listener's own secrets;
    before: what the speaker witnessed just before, in order ("Jordan said: …", "*the phone buzzes*"),
    so a reply is judged as one; reflect: who is due to reflect, with the statements (memory contents) it reflects on; claims:
    what those who hear the line hold, for the line's stance on each; secrets: the speaker's, that
    some listener has not been told."""
    # The prompt's parts in the order they are sent, each present only when it bears on the line:
    # kept in one place so the order a model reads is the order written here.
    names = list(profiles)
    # The speaker is listed for its importance alone: no profile to weigh.
    described = "\n".join(f"- {name}: {_sentences(_about(text, name), 300)}" for name, text in profiles.items()
                          if text and name != speaker)
    context = [content, *before]  # what a claim or a secret must touch to be asked about
    reflections = shape = ""
    if reflect:
        reflections = "".join(REFLECT.format(agent=agent, who=REFLECT_WHO.format(agent=agent, sheet=(sheets or {})[agent])
                                             if (sheets or {}).get(agent) else "", statements="\n".join(
            f"{i}. {_sentences(text, 300)}" for i, text in enumerate(lines, start=1))) + "\n"
            for agent, lines in reflect.items())
        reflections += REFLECT_ASK.format(names=", ".join(reflect), n=REFLECT_INSIGHTS)
        shape = REFLECT_SHAPE.format(agent=next(iter(reflect)))
    planned = ""
    if plans:
        planned = PLANS.format(listed="\n".join(f"- {name}: {_sentences(text, 300)}" for name, text in plans.items()))
        shape += PLANS_SHAPE
    asked = ""
    if claims:
        held = holders or {}
        numbered = {n: c for n, c in claim_numbering(claims, numbers).items() if touches(c, *context)}
    if claims and numbered:
        asked = CLAIMS.format(claims="\n".join(
            f"{i}. {_sentences(c, 300)}" + (f" (held by {', '.join(held[c])})" if held.get(c) else "")
            for i, c in numbered.items()))
        shape += CLAIMS_SHAPE.replace('"1"', f'"{next(iter(numbered))}"')
    kept = ""
    told = [(i, text) for i, text in enumerate(secrets or [], start=1) if touches(text, content)]
    if told:  # numbered as listed, so the answer's numbers find them
        kept = SECRETS.format(speaker=speaker, secrets="\n".join(f"{i}. {_sentences(text, 300)}" for i, text in told))
        shape += SECRETS_SHAPE
    # Each part cut on its own: a long line keeps what followed it. One a line: "…twelve hundred.; then
    # *The horn…*" read as one run-on sentence.
    before = "Just before it (context only):\n" + "".join(f"- {_last_sentences(part, 300)}\n" for part in before) \
        if before else ""
    keeping = {name: [s for s in said if touches(s, *context)] for name, said in (keeping or {}).items()}
    secrets_of = "".join(f"- {name}: " + " / ".join(_sentences(s, 200) for s in said[:KEPT_PER_LISTENER]) + "\n"
                         for name, said in keeping.items() if said and name in profiles and name != speaker)
    secrets_of = KEPT.format(listed=secrets_of.rstrip("\n")) if secrets_of else ""
    # The speaker hears itself only when the caller lists it: then it gets an importance and no more.
    own = f"{speaker} said it: give {speaker} an importance only (trust and affinity 0, no facts).\n" \
        if speaker in profiles else ""
    example = next((name for name in names if name != speaker), speaker)
    heard = "".join(f"- {name} took it as: {_sentences(text, 400)}\n" for name, text in (took or {}).items()
                    if name in profiles and name != speaker)
    # A paranoid listener's trust moves by what it heard, not by the words a neutral ear hears.
    heard = f"Some heard it their own way; judge them by how they took it:\n{heard}" if heard else ""
    return PROMPT.format(turn=turn, content=content, names=", ".join(names), profiles=described, before=before,
                         heard=heard, keeping=secrets_of, own=own,
                         speaker=speaker, step=MAX_STEP, facts=MAX_FACTS, example=example,
                         reflections=reflections, plans=planned, claims=asked, secrets=kept, shape=shape)


def claim_numbering(claims: list[str], numbers: dict[str, int] | None) -> dict[int, str]:
    """Each claim by its number: the run's (numbers), so a claim keeps it from one request to the
    next; a claim without one after the highest, in order."""
    numbered: dict[int, str] = {}
    for claim in claims:
        number = (numbers or {}).get(claim)
        if number is None or number in numbered:
            number = max([*numbered, *(numbers or {}).values(), 0]) + 1
        numbered[number] = claim
    return dict(sorted(numbered.items()))


def judge_line(*, speaker: str, content: str, turn: int, profiles: dict[str, str],
               ask: Callable[[str], str], reflect: dict[str, list[str]] | None = None,
               claims: list[str] | None = None, secrets: list[str] | None = None, before: Sequence[str] = (),
               took: dict[str, str] | None = None, holders: dict[str, list[str]] | None = None,
               keeping: dict[str, list[str]] | None = None, numbers: dict[str, int] | None = None,
               sheets: dict[str, str] | None = None, plans: dict[str, str] | None = None) -> AfterTurn:
    """One call for every listener in `profiles` (name → identity and goals), and the reflections of
    those in `reflect`. A failed call is an AfterTurn with its error: the line is kept, the rules
    judge it, and the reflections wait."""
    try:
        answer = str(ask(prompt_for(speaker=speaker, content=content, turn=turn, profiles=profiles,
                                    reflect=reflect, claims=claims, secrets=secrets, before=before, took=took,
                                    holders=holders, keeping=keeping, numbers=numbers, sheets=sheets,
                                    plans=plans)) or "")
    except Exception as exc:  # the line must not be lost to a failed judgement
        return AfterTurn(error=f"the model could not be asked: {exc}"[:300])
    result = parse(answer, names=list(profiles), speaker=speaker,
                   statements={agent: len(lines) for agent, lines in (reflect or {}).items()}, claims=claims,
                   secrets=secrets, numbers=numbers)
    if plans and result.moves is not None:  # asked and answered: a plan left out is a plan kept
        given = _json_object(answer).get("plans") if isinstance(_json_object(answer), dict) else None
        result.plans = {name: " ".join(str(given[key]).split())[:600] for name in plans
                        for key in (given if isinstance(given, dict) else {})
                        if str(key).strip().lower() == name.lower() and str(given[key]).strip()}
    return result


def parse(answer: str, *, names: list[str], speaker: str, statements: dict[str, int] | None = None,
          claims: list[str] | None = None, secrets: list[str] | None = None,
          numbers: dict[str, int] | None = None) -> AfterTurn:
    """The model's JSON, checked name by name: numbers clamped, unknown names ignored. statements:
    how many statements each agent due to reflect was given (an insight must cite one of them);
    claims: the claims asked about, by number (an unknown stance is left to the rule); secrets: the
    speaker's, by number (a number not asked about is ignored)."""
    # One answer read field by field, each with its own fallback: kept together so the fields' order
    # matches the prompt's (split, a reader checks two places for every field).
    result = AfterTurn(raw=answer[:2000])
    data = _json_object(answer)
    if isinstance(data, dict) and isinstance(data.get("reflections"), dict) and statements:
        result.insights = _insights(data["reflections"], statements)
        given = data.get("approach") if isinstance(data.get("approach"), dict) else {}
        result.approaches = {agent: " ".join(str(text).split())[:600] for agent in statements
                             for key, text in given.items() if str(key).strip().lower() == agent.lower() and str(text).strip()}
    if isinstance(data, dict) and isinstance(data.get("stances"), dict) and claims:
        numbered = claim_numbering(claims, numbers)
        for number, said in data["stances"].items():
            said = str(said).strip().lower()
            if str(number).strip().isdigit() and int(str(number).strip()) in numbered and said in STANCES:
                result.stances[numbered[int(str(number).strip())]] = said
    if isinstance(data, dict) and isinstance(data.get("revealed"), list) and secrets:
        numbers = [int(n) for n in data["revealed"]
                   if (isinstance(n, (int, float)) and not isinstance(n, bool)) or (isinstance(n, str) and n.strip().isdigit())]
        result.revealed = [secrets[n - 1] for n in dict.fromkeys(numbers) if 1 <= n <= len(secrets)]
    if isinstance(data, dict):
        by_name = {name.lower(): name for name in names}
        result.left = list(dict.fromkeys(by_name[n.lower()] for n in _names(data.get("left")) if n.lower() in by_name))
        result.came = [n for n in _names(data.get("came")) if n.lower() not in by_name]
    rows = data.get("listeners") if isinstance(data, dict) else None
    if not isinstance(rows, dict):
        result.error = "the answer was not the JSON asked for" if answer.strip() else "no answer"
        return result
    by_lower = {str(key).strip().lower(): value for key, value in rows.items()}
    result.moves = {}
    for name in names:
        row = by_lower.get(name.lower())
        if not isinstance(row, dict):
            continue
        importance = _number(row.get("importance"))
        if importance is not None:
            result.importance[name] = round(max(0.0, min(10.0, importance)), 2)
        if name != speaker:
            trust = _step(row.get("trust"))
            affinity = _step(row.get("affinity"))
            evidence = " ".join(str(row.get("evidence") or "").split())[:200]
            # The reason an agent reads ("How you stand with Sam … (Sam: “…” (“…”))"): the words, no machinery.
            result.moves[name] = Judgement(trust=trust, affinity=affinity, words=[evidence] if evidence else [],
                                           why=f"“{evidence}”" if evidence else "")
        opinion = " ".join(str(row.get("opinion") or "").split())[:400] if name != speaker else ""
        if opinion:
            result.opinions[name] = opinion.rstrip(".")
        progress = row.get("progress")
        if isinstance(progress, dict) and str(progress.get("goal") or "").strip() and name != speaker \
                and isinstance(progress.get("closer"), bool):
            result.progress[name] = (" ".join(str(progress["goal"]).split())[:300], progress["closer"])
        valence = _number(row.get("valence"))
        if valence is not None and name != speaker:
            result.feelings[name] = round(max(-1.0, min(1.0, valence)), 3)
            word = " ".join(str(row.get("feeling") or "").split()[:2]).strip(".,;!").lower()[:30]
            if word:
                result.feeling_words[name] = word
        facts = row.get("facts") if isinstance(row.get("facts"), list) and name != speaker else []
        kept = [" ".join(str(f).split())[:300] for f in facts if isinstance(f, str) and len(f.split()) >= 3]
        if kept:
            result.facts[name] = kept[:MAX_FACTS]
    return result


def _names(value) -> list[str]:
    """A list of names as the model gave it: strings only, a few, each short."""
    if not isinstance(value, list):
        return []
    return list(dict.fromkeys(" ".join(n.split())[:100] for n in value if isinstance(n, str) and n.strip()))[:5]


def _about(text: str, name: str) -> str:
    """A sheet's own words ("You are Tess, Harbour clerk.", "My goals: …") as the judge reads them,
    about the listener: "Harbour clerk.", "Goals: …"."""
    text = re.sub(rf"\bYou are {re.escape(name)}\b[,.:]?\s*", "", text)
    return re.sub(r"\bMy goals:", "Goals:", text)  # the profile is the identity and the goals


def _sentences(text: str, limit: int) -> str:
    """The text on one line, cut after its last whole sentence within `limit` characters (else at a word, with "…")."""
    text = " ".join(str(text).split())
    if len(text) <= limit:
        return text
    cut = max(text.rfind(mark, 0, limit) for mark in (". ", "! ", "? "))
    return text[:cut + 1] if cut > limit // 3 else text[:text.rfind(" ", 0, limit)] + "…"


def _last_sentences(text: str, limit: int) -> str:
    """What came just before a line, on one line. A reply answers the end of what it replies to (the
    question is often last), so a long one keeps who said it and its last whole sentences."""
    text = " ".join(str(text).split())
    if len(text) <= limit:
        return text
    head, said, body = text.partition(" said: ")
    head, body = (head + said, body) if said else ("", text)
    tail = body[len(body) - max(limit - len(head) - 2, limit // 2):]
    starts = [i for i in (tail.find(mark) for mark in (". ", "! ", "? ")) if i >= 0]
    start = min(starts) + 2 if starts and min(starts) < len(tail) * 2 // 3 else tail.find(" ") + 1
    return f"{head}… {tail[start:]}"


def _insights(rows: dict, statements: dict[str, int]) -> dict[str, list[tuple[str, list[int]]]]:
    by_lower = {str(key).strip().lower(): value for key, value in rows.items()}
    found = {}
    for agent, count in statements.items():
        kept = []
        for item in by_lower.get(agent.lower()) or []:
            if not isinstance(item, dict):
                continue
            text = " ".join(str(item.get("insight") or "").split())
            cited = item.get("because") if isinstance(item.get("because"), list) else []
            numbers = list(dict.fromkeys(int(n) for n in cited if isinstance(n, (int, float)) and 1 <= n <= count))
            if len(text.split()) >= 3 and numbers:
                kept.append((text, numbers))
        if kept:
            found[agent] = kept[:REFLECT_INSIGHTS]
    return found


def _json_object(answer: str):
    text = _FENCE.sub("", (answer or "").strip())
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        return None
    try:
        return json.loads(text[start:end + 1])
    except ValueError:
        return None


def _number(value) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if number == number else None  # NaN is no answer


def _step(value) -> float:
    number = _number(value) or 0.0
    return round(max(-MAX_STEP, min(MAX_STEP, number)), 3)
