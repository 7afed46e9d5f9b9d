"""A story day kept as one memory (seeds 000/003: consolidation into dated episode summaries).

When a story's calendar moves on to a new day, each agent keeps what it lived on the day before as
one memory: dated, citing the lines it rests on, found by a search as any memory is, and put before
the agent's turns after the day has left its transcript. Without it an agent that wakes to "Two
days later" has only the lines a search happens to bring back of everything before.

With a model, the summary is the model's (a few sentences, asked once per agent and day); offline,
the day's most important lines, each its first sentence, in the order they were said. The lines
themselves stay as they were: the summary is one memory more, not a consolidation.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from datetime import datetime

from django.db import transaction

from memory.embedding.cache import embed_one
from memory.models import Memory, MemoryBank
from memory.recalling.story_time import DAY_CATEGORY, only_time
from memory.services.memories import memory_create

log = logging.getLogger(__name__)

DAY = DAY_CATEGORY  # the summary's category; metadata["day"] is its date, "2023-05-08"
LIVED_KINDS = ("episodic", "observation", "action")
OFFLINE_LINES = 3        # the day's lines an offline summary quotes
MODEL_LINES = 60         # the day's lines a model is shown (its most important, in order)
QUOTE_CHARS = 160
MIN_LINES = 2            # a day of one line is that line: no summary
MIN_WORDS = 5            # a quote shorter than this says little of a day

DAY_PROMPT = ("Here is what {agent} lived through on {day}, in order:\n{lines}\n\n"
              "Write what {agent} would remember of that day in two to four sentences, in the third person: "
              "who said or did what, and any plan, promise, news or change in how people stand with each other. "
              "Keep names, places, times and numbers. Answer with the summary only.")

_SAID = re.compile(r"^(?P<who>[^:]{1,80}?) (?:said|whispered to [^:]{1,80}|told me):\s*(?P<text>.+)$", re.DOTALL)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def said_day(moment: datetime) -> str:
    """"Monday 8 May 2023"."""
    return f"{moment.strftime('%A')} {moment.day} {moment.strftime('%B %Y')}"


def day_memories(bank: MemoryBank, agent: str, start: datetime, end: datetime) -> list[Memory]:
    """What the agent lived in [start, end) of story time, in order: its lines, what it saw."""
    rows = (Memory.objects.in_bank(bank).for_agent(agent).active()
            .filter(kind__in=LIVED_KINDS, story_time__gte=start, story_time__lt=end).exclude(category=DAY)
            .order_by("turn", "id"))
    return [m for m in rows if not only_time(m.content)]


def latest_day_turn(bank, agent: str, *, before: int, left_before: int | None = None) -> int | None:
    """The turn of the agent's latest day summary made before turn `before` (None: none yet);
    with left_before, only a day whose first line was said before that turn (some of the day has
    left the transcript that starts there: the rest of it is still in front of the agent)."""
    latest = (Memory.objects.in_bank(bank).filter(agent=agent, category=DAY, turn__lt=before).active()
              .order_by("-turn").values_list("turn", "metadata").first())
    if latest is None:
        return None
    turn, metadata = latest
    first = (metadata or {}).get("first_turn", turn) if isinstance(metadata, dict) else turn
    return turn if left_before is None or first < left_before else None


def _telling_sentence(text: str) -> str:
    """The sentence of a line that says most (its longest), stage business and photos left out:
    "That's the island." says less of a day than the sentence after it."""
    text = re.sub(r"\*[^*]*\*", " ", text)
    text = re.sub(r"\[shares [^\]]*\]", " ", text)
    sentences = [s.strip() for s in _SENTENCE_END.split(" ".join(text.split())) if s.strip()]
    sentence = max(sentences, key=lambda s: len(s.split()), default="")
    if len(sentence) <= QUOTE_CHARS:
        return sentence
    return sentence[:QUOTE_CHARS].rsplit(" ", 1)[0].rstrip(",;:—-") + "…"


def offline_summary(memories: list[Memory], day: str) -> str:
    """The day's most important lines, the sentence of each that says most, in the order they were
    said (what was seen only where too little was said: "Orla enters" is not what a day was about).
    Of lines as important, the fuller first; a line of a few words ("Grand. Wet.") is left out."""
    said = [m for m in memories if _SAID.match(m.content)]
    pool = said if len(said) >= MIN_LINES else memories
    quotes = {}
    for memory in pool:
        match = _SAID.match(memory.content)
        quote = _telling_sentence(match.group("text") if match else memory.content)
        if len(quote.split()) >= MIN_WORDS or pool is not said:
            quotes[memory.pk] = (match.group("who") if match else "", quote)
    ranked = sorted((m for m in pool if m.pk in quotes),
                    key=lambda m: (-m.importance, -len(quotes[m.pk][1].split()), m.turn or 0, m.pk))
    parts = []
    for memory in sorted(ranked[:OFFLINE_LINES], key=lambda m: (m.turn or 0, m.pk)):
        who, quote = quotes[memory.pk]
        quote = quote if quote.endswith((".", "!", "?", "…")) else f"{quote}."
        parts.append(f"{who} said “{quote}”" if who else quote)
    return f"What happened on {day}: {' '.join(parts)}"


def _model_prompt(agent: str, day: str, lived: list[Memory]) -> str:
    shown = sorted(sorted(lived, key=lambda m: -m.importance)[:MODEL_LINES], key=lambda m: (m.turn or 0, m.pk))
    return DAY_PROMPT.format(agent=agent, day=day, lines="\n".join(f"- {' '.join(m.content.split())}" for m in shown))


def day_summarise(*, bank: MemoryBank, agent: str, start: datetime, end: datetime,
                  summarize: Callable[[str], str] | None = None) -> Memory | None:
    """The agent's memory of the story day [start, end), once (None: made already, or too little lived)."""
    date = start.date().isoformat()
    if Memory.objects.in_bank(bank).filter(agent=agent, category=DAY, metadata__day=date).exists():
        return None
    lived = day_memories(bank, agent, start, end)
    if len(lived) < MIN_LINES:
        return None
    day = said_day(start)
    text, by = "", "extractive"
    if summarize is not None:
        try:
            answer = summarize(_model_prompt(agent, day, lived))
            text, by = " ".join((answer or "").split()), "llm"
        except Exception:  # a failing model costs the summary its words, not the day: the offline one stands in
            log.warning("day summary: the model failed, the offline summary stands in", exc_info=True)
        if text and not text.lower().startswith(("on ", "what happened")):
            text = f"On {day}: {text}"
    if not text:
        text, by = offline_summary(lived, day), "extractive"
    last = lived[-1]
    with transaction.atomic():
        return memory_create(
            bank=bank, agent=agent, kind="episodic", category=DAY, source=Memory.Source.CONSOLIDATION,
            turn=last.turn, importance=max(m.importance for m in lived), content=text, embedding=embed_one(text),
            evidence=[m.pk for m in lived[:100]], story_time=last.story_time,
            metadata={"day": date, "summarizer": by, "lines": len(lived), "first_turn": lived[0].turn})
