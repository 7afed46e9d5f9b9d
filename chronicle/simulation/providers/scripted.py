"""The `scripted` provider: deterministic and offline, it plays seed 000's "agent behaviour pattern".

It answers through the same OpenAI-shaped tool-calling loop as a real model, all of a round's
calls in one response (parallel tool calls): on an agent's first turn `query_self`, `query_scene`
and `query_character` for each other agent present; later `query_memory` about what another agent
said and `recall_facts` about the last line (card lore, the writer's facts). Then it answers the
last line it heard (chronicle.simulation.providers.partner) from what its tools returned and its
notes hold: what it wants, what it knows of the one it answers, a secret or a rumour when the talk
touches it, an earlier line it recalled from beyond what it reads (so a dry run still shows whether
retrieval worked).
"""

from __future__ import annotations

import json
import re
import textwrap

from chronicle.simulation.providers.reading import prepopulated, tool_results
from chronicle.simulation.providers.topics import insight, topics
from chronicle.simulation.providers.answers import opening, quotable, remembered, replies
from chronicle.simulation.providers.freshness import Lately
from chronicle.simulation.providers.partner import Known, belief_fits, heard, known_from, secret_fits, words
from chronicle.simulation.providers.voice import named_voice, own_sheet_voice
from chronicle.simulation.providers.base import ChatResult, Provider, TurnHints, estimate_messages_tokens

def _short(text: str, width: int = 110) -> str:
    return textwrap.shorten(" ".join((text or "").split()), width=width, placeholder="…")


# A sheet memory's label → how the character says it of itself (memory.forming.seed_specs's wording).
FIRST_PERSON = (("My goals: ", "what I want is to {}."), ("My traits: ", "I'm {}."), ("I value ", "what matters to me is {}."),
                ("My skills: ", "I'm good at {}."), ("My secret: ", "between us: {}"), ("My situation: ", "{}"),
                ("My personality: ", "{}"))


# Words a cut must not end on: "…always knows the newest place in." reads as a line broken off.
_DANGLING = re.compile(r"(?:\s+(?:a|an|the|and|or|but|of|in|on|at|to|for|from|with|by|about|as|into|than|that|"
                       r"who|which|his|her|their|my|your|its|our|is|are|was|were|be))+$", re.IGNORECASE)


# The scene's memories (memory.forming.seed_specs' labels), said without the label.
SCENE_SAID = (("Location: ", "look where we are: {}."), ("Atmosphere: ", "you can feel it: {}."),
              ("Time: ", "remember the time: {}."), ("Situation: ", "remember why we're here: {}."))


def _clause(text: str, width: int) -> str:
    """The text up to `width` characters, cut at a clause or word (never after "the", "in"…), with no
    mark of the cut."""
    text = " ".join((text or "").split())
    if len(text) <= width:
        return text.rstrip(" .")
    head = text[:width]
    cut = max(head.rfind(mark) for mark in (",", ";", ":", " —", "."))
    if cut > width // 2:
        return head[:cut].rstrip(" .,;:")
    return _DANGLING.sub("", head.rsplit(" ", 1)[0]).rstrip(" .,;:")


def first_person(fact: str, agent: str = "") -> str:
    """What the agent knows, said as itself: "My goals: get everyone fed" → "what I want is to get
    everyone fed."; its own sheet written about it ("Sam got a bonus", "his friends") as "I" and
    "my"; the scene without its labels; "Oren told me: …" and what it knows of others as they are."""
    fact = re.sub(r"^\(turn \d+\)\s*", "", re.sub(r"\s*\(weak match\)$", "", " ".join(fact.split())))
    for label, said in FIRST_PERSON:
        if fact.startswith(label):
            rest = _clause(own_sheet_voice(named_voice(fact[len(label):], agent)), 140)
            return said.format(rest[:1].lower() + rest[1:] if label != "My secret: " else rest)
    for label, said in SCENE_SAID:
        if fact.startswith(label):  # a place is often a name: "Alex's apartment" is "my apartment" to Alex
            return said.format(_clause(named_voice(fact[len(label):], agent), 140))
    if fact.startswith("How others see me: "):
        return f"people would say {_clause(named_voice(fact[len('How others see me: '):], agent), 140)}."
    named = _NAMED_SHEET.match(fact)
    if named and not named.group(1).endswith(" told me"):
        # What the agent knows of someone ("Jordan: Sous-chef. Jordan is …"), or its own card line.
        who, role, rest = named.group(1), named.group(2), named.group(3)
        if who == agent:
            return f"{_clause(named_voice(rest or role, agent), 140)}."
        return f"about {who}, I know this: {_clause(named_voice(f'{role}. {rest}' if rest else role, agent), 140)}."
    if " told me: " in fact:
        teller, _, claim = fact.partition(" told me: ")
        return f"{teller} told me {_clause(named_voice(claim, agent), 140)}."
    return f"I keep thinking about this: {_clause(named_voice(fact, agent), 140)}."


# "Jordan: Sous-chef and food blogger. Jordan is …": a sheet line headed by whose it is.
_NAMED_SHEET = re.compile(r"^([A-Z][\w'’-]+(?: [A-Z][\w'’-]+)?): ([^.:]{1,80})\.\s*(.*)$")
def _said_key(text: str) -> str:
    """A line as compared with the ones said before: its words, without stage business or case."""
    return " ".join(re.sub(r"[*][^*]*[*]", " ", text or "").lower().split()).strip(" .!?")


_ACTIONS = re.compile(r"\*[^*]*\*")


def _lower_first(text: str) -> str:
    """A sentence going on after "Between us,": its first word lower-cased where it is a common word
    ("The harbour master…" → "the harbour master…"), never a name ("Bella's trattoria…")."""
    first = text.split(" ", 1)[0]
    return text[:1].lower() + text[1:] if first.lower() in _COMMON_OPENERS else text


_COMMON_OPENERS = {"the", "a", "an", "it", "there", "this", "that", "we", "he", "she", "they", "my", "our", "his",
                   "her", "their", "someone", "everyone", "nobody", "one", "some", "if", "when", "since"}


def _strip_label(text: str) -> str:
    return re.sub(r"^(Location|Atmosphere|Time|Situation):\s*", "", text or "").rstrip(".")


class ScriptedProvider(Provider):
    name = "scripted"

    # ---- the conversation -------------------------------------------------------------------
    def plan(self, hints: TurnHints) -> list[tuple[str, dict]]:
        if hints.first_turn_of_agent:
            return [("query_self", {}), ("query_scene", {})] + [("query_character", {"name": o}) for o in hints.others]
        target = self._addressee(hints)
        # What was said, and what the agent knows that bears on it (card lore, the writer's facts).
        last = hints.transcript[-1][2] if hints.transcript else ""
        return [("query_memory", {"query": f"what did {target} say?"}),
                ("recall_facts", {"topic": _short(last, 200) or f"what I know about {target}"})]

    @staticmethod
    def _addressee(hints: TurnHints) -> str:
        for _number, speaker, _text in reversed(hints.transcript):
            if speaker != hints.agent:
                return speaker
        return hints.others[0] if hints.others else hints.agent

    def chat(self, messages: list[dict], *, tools: list[dict] | None, allow_tools: bool = True,
             hints: TurnHints) -> ChatResult:
        called, results = tool_results(messages)
        offered = {t["function"]["name"] for t in tools or []} if allow_tools else set()
        if offered:
            # The calls still to make, all in one response (parallel tool calls, as capable models
            # make them), within the turn's budget: every extra round re-sends the prompt and the
            # tool schemas (a first turn of the demo: 5 rounds → 2).
            # The plan narrowed to the offered tools first, so the calls made are a prefix of it.
            budget = max(0, hints.max_tool_calls - len(called))
            planned = [(name, arguments) for name, arguments in self.plan(hints) if name in offered]
            batch = [{"id": f"call_{hints.index}_{position}", "type": "function",
                      "function": {"name": name, "arguments": json.dumps(arguments)}}
                     for position, (name, arguments) in enumerate(planned) if position >= len(called)][:budget]
            if batch:
                return self._result(messages, tools, {"role": "assistant", "content": None, "tool_calls": batch})
        line = self.compose(hints, results, prepopulated(messages))
        return self._result(messages, tools, {"role": "assistant", "content": line})

    @staticmethod
    def _result(messages: list[dict], tools: list[dict] | None, message: dict) -> ChatResult:
        # Counted as a server would: the messages and the tool schemas sent (cl100k_base).
        completion = estimate_messages_tokens([message])
        return ChatResult(message=message, prompt_tokens=estimate_messages_tokens(messages, tools),
                          completion_tokens=completion, estimated=True)

    def compose(self, hints: TurnHints, results: dict[str, list[dict]], injected: dict[str, list[str]]) -> str:
        """The line: an answer to the last line heard (chronicle.simulation.providers.partner), from what
        the agent was handed: its sheet, the others, its beliefs, what is said of it, what it recalled."""
        sheet = [m["content"] for m in results.get("query_self", [])] + injected.get("who you are", []) \
            + injected.get("all about you", []) + injected.get("more about you", []) \
            + injected.get("looked up before", [])
        if injected.get("you want"):  # tools mode: the header says what it wants
            sheet.append("My goals: " + ", ".join(injected["you want"]))
        scene = [m["content"] for m in results.get("query_scene", [])] + injected.get("where you are", []) \
            + injected.get("scene", [])
        place = next((_strip_label(s) for s in scene if s.startswith("Location")), "")
        # What its tools (or "Recent events", or the writer's pins) brought back from beyond its window.
        episodes = list(results.get("query_memory", []))
        for line in injected.get("recent events", []):
            match = re.match(r"\(turn (\d+)\) (.*)", line)
            if match:
                episodes.append({"content": match.group(2), "turn": match.group(1)})
        pinned_plain = []
        for line in reversed(injected.get("pinned by the writer", [])):
            match = re.match(r"\(turn (\d+)\) (.*)", line)
            if match:
                episodes.insert(0, {"content": match.group(2), "turn": match.group(1), "pinned": True})
            else:
                pinned_plain.insert(0, line)
        recalled = []
        for memory in episodes:
            speaker, colon, words = memory.get("content", "").partition(" said: ")
            if colon and memory.get("turn") and speaker != hints.agent:
                said = quotable(_ACTIONS.sub(" ", words))
                if said:
                    recalled.append((speaker, _clause(said, 80), bool(memory.get("pinned"))))
        others = [m["content"] for m in results.get("query_character", [])] + injected.get("the others present", [])
        facts = [m["content"] for m in results.get("recall_facts", [])] \
            + injected.get("what you know", []) + injected.get("lore that just came up", [])
        # What it knows of someone ("Jordan: Sous-chef. …") is about that person, not a fact to recite.
        others += [f for f in [*facts, *(m["content"] for m in results.get("query_memory", [])),
                               *injected.get("looked up before", [])] if _NAMED_SHEET.match(f) and _NAMED_SHEET.match(f).group(1) not in (hints.agent,)
                   and not f.startswith(("Location:", "Situation:", "Time:", "Atmosphere:"))]
        known = known_from(hints.agent, sheet, beliefs=injected.get("what you believe", []),
                           said_of_me=next((v for k, v in injected.items() if k.startswith("what others say of you")), []),
                           others=others, facts=facts, header=(injected.get("you") or [""])[0], place=place,
                           recalled=[(who, said) for who, said, _pinned in recalled])
        known.present = list(hints.others)
        known.fresh = {m["content"].split(":", 1)[0] for m in results.get("query_memory", []) + results.get("query_character", [])
                       if _NAMED_SHEET.match(m.get("content", ""))}
        line = self._line(hints, known, recalled)
        if pinned_plain:
            line += f" I keep thinking: {_short(pinned_plain[0], 100)}"
        return line

    def _line(self, hints: TurnHints, known: Known, recalled: list[tuple[str, str, bool]]) -> str:
        number = hints.index + 1
        lately = Lately(hints.transcript, hints.agent, number)
        mine = [text for _n, speaker, text in hints.transcript if speaker == hints.agent]
        known.lately = lately.mine
        known.talk = [_ACTIONS.sub(" ", text) for n, speaker, text in hints.transcript if n > number - 12 and speaker != hints.agent
                      and not text.startswith("(")]
        seed = hints.index + sum(map(ord, hints.agent))
        last = next(((speaker, text) for _n, speaker, text in reversed(hints.transcript)
                     if speaker and speaker != hints.agent and not text.startswith("(")), None)
        if last is None:
            candidates = opening(known, hints.others, seed)
        else:
            line = heard(*last)
            to = line.speaker
            candidates = []
            # A secret is told once, when the talk touches it, in a whisper to the one who touched it.
            told = {s for s in known.secrets if any(_said_key(s)[:40] in _said_key(m) for m in mine)}
            # (Not with one's first words: those greet.)
            if mine and (secret := secret_fits(known, line, told)) and to in hints.others:
                candidates.append(f"*whispers to {to}* Between us, {_lower_first(secret)}")
            # News it believes, when the talk comes near it: the writer's rumour starts in a whisper,
            # what it heard is passed on aloud.
            passed = {c for _t, c in known.beliefs if any(_said_key(c)[:40] in _said_key(m) for m in mine)}
            belief = belief_fits(known, line, passed) if mine else None
            # News heard is passed on to someone who has not heard it; one's own rumour at the second line.
            fresh_ears = belief and belief[0] and any(o != belief[0] for o in hints.others)
            if belief and (words(belief[1]) & line.topic or fresh_ears or len(mine) % 3 == 1):
                teller, claim = belief
                # Told to someone who has not heard it from us: not back to whoever told it.
                news_to = to if to != teller else next((o for o in hints.others if o != teller), "")
                if not teller and to in hints.others:
                    candidates.append(f"*whispers to {to}* Don't tell anyone, but I heard {_lower_first(claim)}")
                elif teller and news_to:
                    candidates.append(f"{news_to}, did you hear? {teller} told me {_lower_first(claim)}")
            speakers = [speaker for _n, speaker, _text in hints.transcript]
            # What it recalled from beyond what it reads (a pinned memory first) goes with the answer:
            # the dry run shows what retrieval found.
            memory = next((r for r in recalled if r[2]), None) or \
                next((r for r in recalled if words(r[1]) & line.topic or hints.index % 2 == 0), None)
            known.recalled = [(memory[0], memory[1])] if memory else []
            answers = replies(known, line, seed, first_turn=not mine, speakers=speakers)
            if memory:
                said = remembered(memory[0], memory[1], hints.agent)
                candidates += [a for a in answers if a.endswith(said)]
            candidates += answers
        fresh = next((c for c in candidates if lately.fresh(c)), None)
        if fresh is not None:
            return fresh
        # Everything it could say was said lately: ask the one it answers to go on (names the turn: never twice).
        to = last[0] if last else (hints.others[0] if hints.others else "everyone")
        return f"Go on, {to}. What happened after turn {hints.transcript[-1][0] if hints.transcript else 0}?"

    # ---- reflection (memory.living.reflection's prompts) ------------------------------------------------
    def complete(self, prompt: str) -> str:
        """Offline answers built from the prompt's numbered statements: questions about the topics
        they keep coming back to, and one insight per topic in the words of the statements that raise
        it, citing them (chronicle.simulation.providers.topics)."""
        head = re.search(r"^Statements about (.+?):$", prompt, re.MULTILINE)
        agent = head.group(1) if head else "this character"
        lines = [(int(n), text) for n, text in re.findall(r"^(\d+)\. (.*)$", prompt, re.MULTILINE)]
        found = topics(lines, agent)
        if "insights" not in prompt:
            return "\n".join(f"What keeps coming up about {topic}?" for topic, _cited in found)
        statements = dict(lines)
        return "\n".join(f"{insight(topic, statements, cited, agent)} (because of {', '.join(map(str, cited))})"
                         for topic, cited in found)

    def pick_speaker(self, *, candidates, transcript):
        """Deterministic "model picks": whoever the last line named, else whoever spoke least recently."""
        last_speaker = transcript[-1][1] if transcript else None
        pool = [c for c in candidates if c != last_speaker] or list(candidates)
        if transcript:
            for name in pool:
                if re.search(rf"\b{re.escape(name)}\b", transcript[-1][2]):
                    return name, None
        last_seen = {c: -1 for c in pool}
        for number, speaker, _text in transcript:
            if speaker in last_seen:
                last_seen[speaker] = number
        return min(pool, key=lambda c: (last_seen[c], pool.index(c))), None


__all__ = ["ScriptedProvider"]
