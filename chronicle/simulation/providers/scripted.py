"""The `scripted` provider: deterministic and offline, it plays seed 000's "agent behaviour pattern".

It answers through the same OpenAI-shaped tool-calling loop as a real model, all of a round's
calls in one response (parallel tool calls): on an agent's first turn `query_self`, `query_scene`
and `query_character` for each other agent present; later `query_memory` about what another agent
said and `recall_facts` about the last line (card lore, the writer's facts). Then it composes a line from
what the tools returned (its name from its identity, the place from the scene, an earlier line
quoted with its turn number), so a dry run shows whether retrieval actually worked.
"""

from __future__ import annotations

import json
import re
import textwrap

from chronicle.simulation.providers.reading import prepopulated, tool_results
from chronicle.simulation.providers.topics import insight, topics
from chronicle.simulation.providers.voice import named_voice, own_sheet_voice
from chronicle.simulation.providers.base import ChatResult, Provider, TurnHints, estimate_messages_tokens

NAME_RE = re.compile(r"\b(?:You are|I am|I'm)\s+([A-Z][\w'\-]*(?:\s+[A-Z][\w'\-]*)?)")


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


SECRET_LABEL = "My secret: "
# "Jordan: Sous-chef and food blogger. Jordan is …": a sheet line headed by whose it is.
_NAMED_SHEET = re.compile(r"^([A-Z][\w'’-]+(?: [A-Z][\w'’-]+)?): ([^.:]{1,80})\.\s*(.*)$")
# How a reply may open when what the agent would say was said before: with these, each thing it knows
# makes several different lines (never an echo of the last line: quoting quotes nests without end).
_OPENERS = ("Fair point.", "Maybe.", "I hear you.", "Hm.", "True enough.", "Wait.", "Listen.", "Honestly?")


def _to_you(line: str) -> str:
    """What one knows of the one addressed, said to them: "Sam, about Sam, I know this: Sam is kind"
    → "Sam, you're kind"."""
    return re.sub(r"^([A-Z][\w'’-]+), ((?:[a-z][^.?!]*[.?!] )?)[Aa]bout \1, I know this: \1 is ",
                  lambda m: f"{m.group(1)}, {m.group(2)}{'Y' if m.group(2) else 'y'}ou're ", line)


def _said_key(text: str) -> str:
    """A line as compared with the ones said before: its words, without stage business or case."""
    return " ".join(re.sub(r"[*][^*]*[*]", " ", text or "").lower().split()).strip(" .!?")


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def _sentences(text: str) -> str:
    """Each sentence begins with a capital: "The lamp room. near midnight" → "… Near midnight"."""
    return re.sub(r"([.!?]\s+)([a-z])", lambda m: m.group(1) + m.group(2).upper(), text)


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
        own = [m["content"] for m in results.get("query_self", [])]
        identity = own + injected.get("who you are", [])
        # Who it says it is: what its tools said, else the header every prompt carries ("## You").
        introduced = own + injected.get("you", []) + injected.get("who you are", [])
        scene = [m["content"] for m in results.get("query_scene", [])] + injected.get("where you are", []) \
            + injected.get("scene", [])
        # What its tools brought back from beyond its transcript first; then the last line it reads
        # there (the tools leave the window's lines out), once it has spoken before.
        # (The transcript it reads is not repeated back: a line answers it, it does not quote it.)
        episodes = list(results.get("query_memory", []))
        for line in injected.get("recent events", []):
            match = re.match(r"\(turn (\d+)\) (.*)", line)
            if match:
                episodes.append({"content": match.group(2), "turn": match.group(1)})
        # Memories the writer pinned onto this turn come first: an episode is the one quoted,
        # anything else is what the agent "keeps thinking" about.
        pinned_plain = []
        for line in reversed(injected.get("pinned by the writer", [])):
            match = re.match(r"\(turn (\d+)\) (.*)", line)
            if match:
                episodes.insert(0, {"content": match.group(2), "turn": match.group(1)})
            else:
                pinned_plain.insert(0, line)
        facts = [m["content"] for m in results.get("recall_facts", [])] + injected.get("what you know", []) \
            + identity[1:]
        # With no fact asked for, what else its search brought back (what one tool gave this turn, another
        # does not give again: a model speaks from either).
        facts = facts or [m["content"] for m in results.get("query_memory", [])]
        facts = list(dict.fromkeys(f for f in facts if " said: " not in f and not f.startswith(("You are ", "("))))
        # Beliefs are news: every other turn a character passes on one it holds (chronicle.simulation.story.beliefs).
        # A belief heard in the run comes as "(turn 9) Oren told me: …": passed on without its turn.
        believed = [re.sub(r"^\(turn \d+\) ", "", b) for b in injected.get("what you believe", [])]
        believed = [b for b in believed if not b.startswith("(")]
        if believed and hints.index % 2 == 0:
            facts = [believed[(hints.index // 2) % len(believed)]]
        mine = [text for _n, speaker, text in hints.transcript if speaker == hints.agent]
        if any(text.startswith("*whispers") and "between us" in text for text in mine):
            # A secret is told once: after that, the character speaks of other things.
            facts = [f for f in facts if not f.startswith(SECRET_LABEL)] or facts[:0]
        line = self._compose_line(hints, introduced, scene, episodes, facts, believed)
        if pinned_plain:
            line += f" I keep thinking: {_short(pinned_plain[0], 100)}"
        return self._unsaid(hints, line, episodes, facts)

    def _unsaid(self, hints: TurnHints, line: str, episodes: list[dict], facts: list[str]) -> str:
        """The line, or (it was said already in the scene) another from what the agent recalled: the
        other things it knows in turn, an earlier line it remembers, then its answer to the last line
        (which no earlier turn could have said, the last line being new)."""
        said = {_said_key(text) for _n, _speaker, text in hints.transcript}
        line = _to_you(line)
        if _said_key(line) not in said:
            return line
        addressee = next((speaker for _n, speaker, _t in reversed(hints.transcript)
                          if speaker and speaker != hints.agent), None)
        to = f"{addressee}, " if addressee else ""
        candidates = [f"{to}{first_person(facts[(hints.index + k) % len(facts)], hints.agent)}"
                      for k in range(1, len(facts) + 1) if not facts[(hints.index + k) % len(facts)].startswith(SECRET_LABEL)] \
            if facts else []
        for memory in episodes:
            speaker, colon, words = memory.get("content", "").partition(" said: ")
            if colon and speaker != hints.agent:
                candidates.append(f"{to}I remember {speaker} saying “{_clause(words, 80)}”.")
        told = [f for f in facts if not f.startswith(SECRET_LABEL)]
        for k in range(len(_OPENERS) * max(len(told), 1)):
            opener = _OPENERS[(hints.index + k) % len(_OPENERS)]
            thing = _capital(first_person(told[(hints.index + k // len(_OPENERS)) % len(told)], hints.agent)) \
                if told else "Give me a moment to think about that."
            candidates.append(f"{to}{opener[:1].lower() + opener[1:] if to and not opener.startswith('I ') else opener} {thing}")
        candidates.append(f"{to}I have nothing new to add after turn {hints.transcript[-1][0] if hints.transcript else 0}.")
        return next((c for c in map(_to_you, candidates) if _said_key(c) not in said), candidates[-1])

    def _compose_line(self, hints: TurnHints, identity: list[str], scene: list[str], episodes: list[dict],
                      facts: list[str], believed: list[str] = ()) -> str:
        name = hints.agent
        for text in identity:
            match = NAME_RE.search(text)
            if match:
                name = match.group(1)
                break
        location = next((_strip_label(s) for s in scene if s.startswith("Location")), _strip_label(scene[0]) if scene else "")

        addressee = next((speaker for _n, speaker, _t in reversed(hints.transcript) if speaker and speaker != hints.agent),
                         None)
        if addressee is not None and not hints.first_turn_of_agent:
            return self._answer(hints, addressee, episodes, facts, believed)
        if identity:
            # "You are Alex, a pragmatic project manager. Archetype: …" → "a pragmatic project manager"
            first = re.split(r"(?<=[.!?])\s", identity[0], maxsplit=1)[0]
            header = re.match(r"You are [^:,.]{1,80}: (.+?)(?: — |$)", identity[0])  # "You are Hannah: Cellist — …"
            me = header.group(1) if header else re.sub(r"^You are [^,.]+[,.]?\s*", "", first).rstrip(".")
            if addressee is not None:
                # Someone has spoken: answer them, saying who one is and one thing one wants or knows
                # (not the opening everyone else gave).
                line = f"{addressee}, I'm {name}" + (f", {_clause(me, 60)}." if me else ".")
                told = [f for f in facts if not f.startswith(SECRET_LABEL)]
                if told:
                    line += " " + _capital(first_person(told[hints.index % len(told)], hints.agent))
                return line
            line = f"Hello, I'm {name}" + (f", {_clause(me, 80)}." if me else ".")
            if location:  # the place, not its whole description ("…: a comfortable sofa, …")
                line += f" So here we are: {_sentences(_clause(named_voice(location.split(':')[0], name), 80))}."
            if hints.others:
                line += f" {', '.join(hints.others)}, shall we begin?"
            return line
        return f"I'm {name}. I don't remember much yet, so tell me: where are we?"

    def _answer(self, hints: TurnHints, addressee: str, episodes: list[dict], facts: list[str],
                believed: list[str]) -> str:
        """A later turn: a short first-person answer to whoever spoke last, built from what the agent
        recalled: an earlier line it remembers (beyond what it reads), or a different thing it knows
        each turn (its goals, values, lore), so a long dry run touches the whole sheet."""
        recalled = next((m for m in episodes if m.get("turn") and " said: " in m["content"]
                         and not m["content"].startswith(f"{hints.agent} said:")), None)
        fact = facts[hints.index % len(facts)] if facts else ""
        # News it believes is passed on (compose picks it every other turn); else an earlier line it
        # remembers, on those turns, and what it knows on the others.
        if recalled is not None and (not fact or (hints.index % 2 == 0 and fact not in believed)):
            speaker, _, said = recalled["content"].partition(" said: ")
            return f"{addressee}, I remember {speaker} saying “{_clause(said, 80)}”."
        if not fact:
            return f"{addressee}, I hear you. Give me a moment to think about that."
        line = f"{addressee}, {first_person(fact, hints.agent)}"
        # A secret is whispered to the one addressed (stage.deliver: only they hear it), and so is a
        # belief the writer planted (gossip starts in a whisper; "X told me: …" is said aloud).
        secret = fact.startswith("My secret") or (fact in believed and " told me: " not in fact)
        return f"*whispers to {addressee}* {line}" if secret else line

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
