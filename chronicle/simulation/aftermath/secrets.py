"""A character's secrets once told: the model's judgement of a line says which of its speaker's
secrets the line tells (memory.living.after_turn); from then on its owner's memories say whom it told
(briefing's "Secrets you have told", query_self's told_to). No rule guesses it offline: a line on the
secret's topic is as close to it in meaning as one that tells it."""

from __future__ import annotations

from memory.api import beliefs_held

NOTE_WORDS = 12  # how much of a secret the writer's note quotes


def untold(bank_id: int, speaker: str, heard_by: list[str]) -> list[str]:
    """The speaker's secrets someone hearing the line has not been told: what the judgement is asked about."""
    listeners = [name for name in heard_by if name != speaker]
    if not listeners:
        return []
    return [s.words for s in beliefs_held.held_secrets(bank_id, speaker) if any(name not in s.told for name in listeners)]


def tell(*, bank, speaker: str, heard_by: list[str], turn: int, revealed: list[str]) -> str:
    """Mark the secrets the judgement says the line told as known to its listeners (the first turn
    each heard it is kept); the writer's note says so ("" when nothing was told)."""
    listeners = [name for name in heard_by if name != speaker]
    if not revealed or not listeners:
        return ""
    held = {secret.words: secret for secret in beliefs_held.held_secrets(bank.pk, speaker)}
    told, notes = {}, []
    for words in revealed:
        secret = held.get(words)
        new = [name for name in listeners if name not in secret.told] if secret else []
        if new:
            told[secret.id] = {**secret.told, **{name: turn for name in new}}
            quoted = " ".join(words.split()[:NOTE_WORDS]) + ("…" if len(words.split()) > NOTE_WORDS else "")
            notes.append(f"{' and '.join(new)} now know{'s' if len(new) == 1 else ''} {speaker}'s secret: “{quoted}”")
    beliefs_held.secrets_mark_told(bank=bank, told=told)
    return "\n".join(notes)
