"""Distortion filters (seeds 000 and 001): a character remembers, recalls and links things its own way.

Three stages, each with a built-in filter, and filters the writer words:

- **formation** — what a listener stores is not quite what was said. `paranoia` adds the threat the
  listener suspects; a writer's own instruction ("Sam hears every compliment as mockery") rewrites
  the line its way. With a model (`rewrite`) the model rewrites it; offline the rule appends the
  reading in brackets. The memory keeps the original (`metadata["distortion"]["original"]`) and its
  vector is the distorted text's: it is found as it is remembered.
- **retrieval** — `depression` dampens the positive: a recalled memory with warm words or a positive
  valence loses half its score (a "distortion" component, negative), and the ranking is redone.
- **association** — `trauma (fire, smoke)`: a new memory holding a trigger is linked to the
  listener's earlier memories holding one, so recalling one brings the others (recall's associations).

This module knows no simulation: chronicle parses a run's filters and hands them to capture and recall.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from memory.recalling.filters import reranked

BUILT_IN = {
    "paranoia": ("formation", "{name} is paranoid: retell it with the hidden threat {name} suspects behind it."),
    "depression": ("retrieval", "{name} is low: good memories come back faint."),
    "trauma": ("association", "{name} links anything touching its trauma strongly together."),
}
DEPRESSION_FACTOR = 0.5  # a positive memory's score under depression
TRAUMA_LINKS = 5         # earlier trigger memories a new one is linked to
WARM = re.compile(r"\b(?:love|glad|thank|happy|joy|wonderful|great|lovely|delight|proud|laugh|fun|kind|friend|"
                  r"beautiful|celebrat|best|enjoy|hope)", re.IGNORECASE)
_RULE = re.compile(r"^\s*(?P<name>[^:]+?)\s*:\s*(?P<what>.+?)\s*$")
_TRIGGERS = re.compile(r"^(?P<kind>\w+)\s*\((?P<words>[^)]*)\)\s*$")
REWRITE_PROMPT = (
    "You rewrite a memory the way a character remembers it.\n{instruction}\n\n"
    "Memory: {content}\n\nAnswer with the rewritten memory only, one or two sentences in its own form: a line "
    "someone said stays \"NAME said: …\", told in the third person, not as {name} speaking."
)


class DistortionError(ValueError):
    """A filter the form cannot take; the message names the line."""


@dataclass(frozen=True)
class Distortion:
    agent: str
    kind: str          # "paranoia" | "depression" | "trauma" | "rewrite" (the writer's instruction)
    stage: str         # formation | retrieval | association
    instruction: str = ""
    triggers: tuple[str, ...] = ()

    def label(self) -> str:
        if self.kind == "rewrite":
            return f"“{self.instruction}”"
        return f"{self.kind} ({', '.join(self.triggers)})" if self.triggers else self.kind

    def as_dict(self) -> dict:
        return {"agent": self.agent, "kind": self.kind, "stage": self.stage, "instruction": self.instruction,
                "triggers": list(self.triggers)}


def parse(text: str, *, cast: list[str]) -> list[Distortion]:
    """One filter per line: "Jordan: paranoia", "Jordan: depression", "Jordan: trauma (fire, smoke)",
    or "Sam: hears every compliment as mockery" (anything else is the writer's own formation filter)."""
    names = {n.lower(): n for n in cast}
    found = []
    for number, raw in enumerate((text or "").splitlines(), start=1):
        if not raw.strip():
            continue
        match = _RULE.match(raw)
        if not match:
            raise DistortionError(f"Line {number}: start with a character's name, like “Jordan: paranoia”.")
        name = names.get(match.group("name").lower())
        if name is None:
            raise DistortionError(f"Line {number}: {match.group('name')} is not in this run's cast ({', '.join(cast)}).")
        what = match.group("what")
        triggers = _TRIGGERS.match(what)
        kind = (triggers.group("kind") if triggers else what).strip().lower().rstrip(".")
        if kind in BUILT_IN:
            stage, instruction = BUILT_IN[kind]
            words = tuple(w.strip().lower() for w in triggers.group("words").split(",") if w.strip()) if triggers else ()
            if kind == "trauma" and not words:
                raise DistortionError(f"Line {number}: name the trauma's triggers, like “{name}: trauma (fire, smoke)”.")
            found.append(Distortion(name, kind, stage, instruction.format(name=name), words))
        elif len(what) < 8:
            raise DistortionError(f"Line {number}: “{what}” is not a filter: use paranoia, depression, "
                                  f"trauma (words), or say how {name} twists what it hears.")
        else:
            found.append(Distortion(name, "rewrite", "formation", f"{name}: {what}"))
    return found


@dataclass
class Formed:
    """A formation filter's result for one listener's copy."""
    content: str
    metadata: dict = field(default_factory=dict)


def form(content: str, *, agent: str, speaker: str, filters: list[Distortion],
         rewrite: Callable[[str], str] | None = None) -> Formed | None:
    """The listener's copy of a heard line through its formation filters (None: unchanged). A line
    the listener said itself is kept as said."""
    chosen = [f for f in filters if f.agent == agent and f.stage == "formation"]
    if not chosen or agent == speaker:
        return None
    text = content
    for f in chosen:
        text = _rewrite(text, f, rewrite)
    if text == content:
        return None
    return Formed(text, {"stage": "formation", "filter": ", ".join(f.label() for f in chosen), "original": content})


def _rewrite(text: str, f: Distortion, rewrite: Callable[[str], str] | None) -> str:
    if rewrite is not None:
        try:
            asked = REWRITE_PROMPT.format(instruction=f.instruction, content=text, name=f.agent)
            answer = " ".join(str(rewrite(asked) or "").split())
            if 8 <= len(answer) <= 4 * len(text) + 200:
                return answer
        except Exception:  # a failed call must not lose the line: the offline rule distorts it
            pass
    if f.kind == "paranoia":
        return f"{text} ({f.agent} suspects there is something threatening behind it.)"
    return f"{text} (as {f.agent} takes it: {f.instruction.split(':', 1)[-1].strip()})"


def triggers_for(agent: str, filters: list[Distortion]) -> tuple[str, ...]:
    return tuple(w for f in filters if f.agent == agent and f.stage == "association" for w in f.triggers)


def trigger_pattern(words: tuple[str, ...]) -> str:
    """A PostgreSQL regex matching any trigger at a word start (for the earlier memories' query)."""
    return r"\m(" + "|".join(re.escape(w) for w in words) + ")"


def holds_trigger(text: str, words: tuple[str, ...]) -> list[str]:
    return [w for w in words if re.search(rf"\b{re.escape(w)}", text, re.IGNORECASE)]


@dataclass
class RetrievalDistortion:
    """A retrieval-stage filter of one agent, applied to a search's results (recall's `distort`)."""
    agent: str
    factor: float = DEPRESSION_FACTOR
    label: str = "depression"

    def apply(self, results: list) -> list:
        changed = False
        for r in results:
            memory = r.memory
            positive = (memory.emotional_valence or 0) > 0 or bool(WARM.search(memory.content or ""))
            if positive:
                lost = r.score * (1 - self.factor)
                r.score -= lost
                r.components = {**r.components, "distortion": round(-lost, 6)}
                changed = True
        return reranked(results) if changed else results


def retrieval_filter(agent: str, filters: list[Distortion]) -> RetrievalDistortion | None:
    return next((RetrievalDistortion(agent) for f in filters if f.agent == agent and f.stage == "retrieval"), None)
