"""Ask as the character (seed 004's `reflect`): a first-person answer grounded in the memories a
question retrieved, citing the ids of the memories it used.

With an OpenAI-compatible provider the model writes the answer from those memories alone and cites
them as [#id]; with the scripted provider (offline, deterministic) the answer is built from the
memories themselves, turned into the first person. Either way the ranked memories stay the ground
truth beside it: an answer that cites an id that was not retrieved links nothing, and a provider
that fails gives a readable error instead of an answer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from django.conf import settings

from chronicle.simulation.providers import ProviderError, TurnHints, get_provider
from chronicle.simulation.providers.voice import named_voice, own_sheet_voice
from memory.api import beliefs_held
from memory.models import Memory

CITATION = re.compile(r"\[#(\d+)\]")
# A web request waits for the answer: a shorter limit than a turn's (LLM_TIMEOUT, 60 s by default).
ASK_TIMEOUT_S = 30
ASK_MAX_TOKENS = 300
# The scripted answer quotes this many memories (the best ranked); the model sees all retrieved.
SCRIPTED_MEMORIES = 3


@dataclass
class Answer:
    """What the character said: `parts` are (text, memory id or None) in order, so a page can link
    each citation without marking any text safe."""

    parts: list[tuple[str, int | None]] = field(default_factory=list)
    cited: list[int] = field(default_factory=list)
    by: str = ""  # "dry run" or the model's name
    error: str = ""

    @property
    def text(self) -> str:
        """The answer as plain text, each citation written [#id] (a page shows it as a link)."""
        return "".join(text if memory_id is None else f"[#{memory_id}]" for text, memory_id in self.parts)


def split_citations(text: str, known: set[int]) -> Answer:
    """The answer's text cut at its [#id] citations; only ids among `known` become links."""
    answer, position = Answer(), 0
    for match in CITATION.finditer(text):
        memory_id = int(match.group(1))
        if memory_id not in known:
            continue  # not a memory the question retrieved: left as the model wrote it
        if match.start() > position:
            answer.parts.append((text[position:match.start()], None))
        answer.parts.append((f"#{memory_id}", memory_id))
        if memory_id not in answer.cited:
            answer.cited.append(memory_id)
        position = match.end()
    if position < len(text):
        answer.parts.append((text[position:], None))
    return answer


# --- the scripted (offline) answer ------------------------------------------------------------

_SECOND_PERSON = [
    (re.compile(r"\byou are\b", re.IGNORECASE), "I am"),
    (re.compile(r"\byou were\b", re.IGNORECASE), "I was"),
    (re.compile(r"\byou're\b", re.IGNORECASE), "I'm"),
    (re.compile(r"\byourself\b", re.IGNORECASE), "myself"),
    (re.compile(r"\byours\b", re.IGNORECASE), "mine"),
    (re.compile(r"\byour\b", re.IGNORECASE), "my"),
    (re.compile(r"(^|[.!?:;]\s+)you\b", re.IGNORECASE), r"\1I"),
    (re.compile(r"\byou\b", re.IGNORECASE), "me"),
]
_SCENE_LABELS = {"Location": "I am at", "Atmosphere": "The mood here:", "Time": "It is", "Situation": "What is going on:"}


def first_person(text: str, agent: str) -> str:
    """A memory written to or about the agent ("You are Alex", "Alex grew up…") in its own voice."""
    out = named_voice(" ".join((text or "").split()), agent)
    for pattern, replacement in _SECOND_PERSON:
        out = pattern.sub(replacement, out)
    out = re.sub(r"(^|[.!?]\s+)(my|me)\b", lambda m: m.group(1) + m.group(2).capitalize(), out)
    return out


def _sentence(memory: Memory, agent: str) -> str:
    content = " ".join(memory.content.split())
    if memory.kind == Memory.Kind.SCENE:
        label, _, rest = content.partition(": ")
        if label in _SCENE_LABELS and rest:
            return f"{_SCENE_LABELS[label]} {rest.rstrip('.')}."
        return content
    if content.startswith(beliefs_held.SECRET_LABEL):  # told only when asked: "Between us: I saw …"
        content = "Between us: " + content[len(beliefs_held.SECRET_LABEL):]
    speaker, colon, words = content.partition(" said: ")
    if colon and speaker and len(speaker) <= 100:
        # A line someone spoke is quoted as it was said; only who said it is in the agent's voice.
        said = f"I said: “{words}”" if speaker == agent else f"{speaker} said: “{words}”"
    else:
        said = first_person(content, agent)
        if memory.kind == Memory.Kind.CHARACTER:
            said = own_sheet_voice(said)
    if memory.kind == Memory.Kind.CHARACTER_KNOWLEDGE:
        return f"What I know of {memory.about}: {said}" if memory.about else f"I know this: {said}"
    if memory.kind in (Memory.Kind.EPISODIC, Memory.Kind.OBSERVATION, Memory.Kind.ACTION) and memory.turn:
        return f"On turn {memory.turn}, {said[0].lower() + said[1:] if said.startswith(('My ', 'Me ')) else said}"
    return said


# A question that asks for what the character hides ("what are you hiding?", "any secrets?").
_ASKS_SECRETS = re.compile(r"\b(?:secrets?|hid(?:e|es|ing|den)|confess\w*|the truth|never told|not told|"
                           r"keep(?:ing)? from)\b", re.IGNORECASE)


def _is_secret(memory: Memory) -> bool:
    return memory.category == "secrets" or memory.content.startswith(beliefs_held.SECRET_LABEL)


def scripted_answer(*, agent: str, question: str, memories: list[Memory]) -> Answer:
    """Deterministic and offline: the best memories in the agent's voice, each cited. A secret is told
    only to a question about secrets: "Who are you?" is answered as a person would, without them."""
    if not _ASKS_SECRETS.search(question or ""):
        memories = [m for m in memories if not _is_secret(m)]
    if not memories:
        return Answer(parts=[("I don't remember anything about that.", None)], by="dry run")
    parts: list[tuple[str, int | None]] = []
    for memory in memories[:SCRIPTED_MEMORIES]:
        sentence = _sentence(memory, agent)
        if sentence and sentence[-1] not in ".!?\"”":
            sentence += "."
        parts += [((" " if parts else "") + sentence + " ", None), (f"#{memory.pk}", memory.pk)]
    return Answer(parts=parts, cited=[m.pk for m in memories[:SCRIPTED_MEMORIES]], by="dry run")


# --- a model's answer -------------------------------------------------------------------------

def prompt(*, agent: str, question: str, memories: list[Memory]) -> list[dict]:
    """Seed 004's reflect prompt, with ids so the answer can cite what it used."""
    lines = [f"[#{m.pk}] ({m.kind}{'/' + m.category if m.category else ''}"
             f"{f', turn {m.turn}' if m.turn else ''}) {' '.join(m.content.split())}" for m in memories]
    system = (f"You are {agent}. You are responding based on the following memories:\n"
              + ("\n".join(lines) or "(none)")
              + "\n\nUse only these memories. Speak in the first person, as "
              f"{agent}, in a few sentences. After each thing you say, cite the memory it comes from as "
              "[#id]. If the memories do not answer the question, say that you do not remember.")
    return [{"role": "system", "content": system}, {"role": "user", "content": question}]


def writer_provider(owner):
    """The character page has no run: the model of the writer's latest run that had one (the model
    they chose for runs), else settings.LLM_* (default_provider), else None (the dry run)."""
    from chronicle.simulation.run.models import Simulation

    latest = (Simulation.objects.owned_by(owner).filter(provider="openai").exclude(model="")
              .order_by("-created").first())
    return get_provider(latest) if latest is not None else default_provider()


def default_provider():
    """settings.LLM_PROVIDER with settings.LLM_BASE_URL / LLM_MODEL."""
    if settings.LLM_PROVIDER != "openai":
        return None
    from chronicle.simulation.providers.openai_provider import OpenAIProvider  # defers importing openai (~0.6 s)

    return OpenAIProvider(base_url=settings.LLM_BASE_URL, api_key=settings.LLM_API_KEY, model=settings.LLM_MODEL,
                          timeout=min(settings.LLM_TIMEOUT, ASK_TIMEOUT_S), max_tokens=ASK_MAX_TOKENS)


def simulation_provider(simulation):
    """The run's own provider (its server, model and time limit), or None for a dry run."""
    return get_provider(simulation) if simulation.provider == "openai" else None


def ask(*, agent: str, question: str, memories: list[Memory], provider=None) -> Answer:
    """The character's answer to `question` from `memories` (best first). provider None: the scripted
    answer; otherwise one chat completion, never raising: a failure is `Answer.error`."""
    if provider is None:
        return scripted_answer(agent=agent, question=question, memories=memories)
    hints = TurnHints(agent=agent, others=[], index=0, first_turn_of_agent=False)
    try:
        result = provider.chat(prompt(agent=agent, question=question, memories=memories), tools=None, hints=hints)
    except ProviderError as exc:
        return Answer(by=provider.model, error=f"The model could not answer: {exc}")
    except Exception as exc:  # an unexpected client error is the page's to show, not a 500
        return Answer(by=provider.model, error=f"The model could not answer: {type(exc).__name__}: {exc}")
    text = (result.message.get("content") or "").strip()
    if not text:
        return Answer(by=provider.model, error="The model answered with nothing.")
    answer = split_citations(text, {m.pk for m in memories})
    answer.by = provider.model
    return answer
