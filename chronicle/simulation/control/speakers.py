"""Who speaks next: the rotation (from the greeter, among those in the room) or the model's pick."""

from __future__ import annotations

from chronicle.simulation.run.models import Simulation


def transcript(simulation: Simulation, before: int) -> list[tuple[int, str, str]]:
    rows = simulation.turns.done().filter(index__lt=before).order_by("index").values_list("index", "agent", "utterance")
    return [(index + 1, agent, text) for index, agent, text in rows]


def choose_speaker(*, simulation: Simulation, index: int, provider) -> str:
    names = simulation.cast_names
    if simulation.provider == Simulation.Provider.REPLAY and index < len(simulation.script or []):
        return simulation.script[index]["speaker"]  # the script says who speaks (checked present on import)
    if simulation.greeting_by in names:
        # The character who opens with its card's greeting speaks first; the rotation starts there.
        start = names.index(simulation.greeting_by)
        names = names[start:] + names[:start]
    if simulation.stage_directions:
        # Only those in the room speak; nobody there: the whole cast.
        here = set(simulation.present_at(index + 1)) or set(names)
        return _next_present(simulation, index, names, here, provider)
    if simulation.speaking_order == Simulation.SpeakingOrder.MODEL_PICKS and index > 0 and len(names) > 1:
        lines = transcript(simulation, index)
        try:
            picked, _usage = provider.pick_speaker(candidates=names, transcript=lines)
        except Exception:  # a failed pick is not worth a failed turn: fall back to the rotation
            picked = None
        last = lines[-1][1] if lines else None
        if picked in names and picked != last:
            return picked
        # The least recently heard of the others.
        heard = {name: -1 for name in names}
        for number, speaker, _text in lines:
            heard[speaker] = number
        return min((n for n in names if n != last), key=lambda n: (heard[n], names.index(n)))
    return names[index % len(names)]


def _next_present(simulation: Simulation, index: int, names: list[str], here: set[str], provider) -> str:
    """The rotation of a run with stage directions: the next one in the room after the last speaker,
    in cast order, so one who comes back takes its turn (model picks: the model chooses among those
    present)."""
    order = [name for name in names if name in here]
    last = simulation.turns.filter(index=index - 1).values_list("agent", flat=True).first() if index else None
    if simulation.speaking_order == Simulation.SpeakingOrder.MODEL_PICKS and index > 0 and len(order) > 1:
        try:
            picked, _usage = provider.pick_speaker(candidates=order, transcript=transcript(simulation, index))
        except Exception:
            picked = None
        if picked in order and picked != last:
            return picked
    if last not in names:
        return order[0]
    start = names.index(last)
    return next(name for name in names[start + 1:] + names[:start + 1] if name in here)
