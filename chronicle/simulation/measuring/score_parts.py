"""The inspector's score column: a recalled memory's score as the sum of its weighted components,
under the run's preset (bars that add up to it)."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings

from memory.api import DEFAULT_SCORING, SIMILARITY, recollection


@dataclass
class ScorePart:
    key: str
    label: str
    weight: str  # as the preset has it, e.g. "0.6" or "1.0 × 0.2"
    value: float
    contribution: float

    @property
    def width(self) -> int:
        return max(0, round(self.contribution * SCORE_BAR_PX))


@dataclass
class ScoreBreakdown:
    parts: list[ScorePart]
    total: float
    scoring: str
    boosted: bool  # the speaker boost applied: the reason a score can pass 1
    adds_up: bool  # False when the run's weights changed since this was scored
    boost: float = 0.0  # the most the speaker boost adds (similarity weight × RETRIEVAL_SPEAKER_BOOST)


SCORE_BAR_PX = 80  # a contribution of 1.0


def score_breakdown(result: dict, *, scoring: str, weights: dict | None) -> ScoreBreakdown | None:
    """A result's score under the active preset as bars that add up to it: weight × component each.

    Plain recall: score = ws·similarity + wr·recency + wi·importance. query_memory's fusion
    (memory/recalling/sql.py ranked_sql): the similarity weight applies to a relevance of
    (1 − wl)·similarity rescaled among the candidates + wl·BM25 + wb·[speaker named], so a memory
    whose speaker the question names gets up to ws·wb more, which can take it past 1. The rescaled
    similarity is not stored; its share is what the other parts leave of the score."""
    # One memory's score, part by part, in the order the ranking SQL adds them: split, the parts
    # and their sum would drift apart.
    components = result.get("components") or {}
    score = result.get("score")
    if score is None or not components:
        return None
    try:
        w = recollection.resolve_weights(scoring, weights)
    except ValueError:
        w = recollection.resolve_weights(DEFAULT_SCORING, None)
    ws, wr, wi = w[SIMILARITY], w["recency"], w["importance"]
    parts = []
    fused = "lexical" in components or "speaker" in components
    if fused:
        wl, wb = float(settings.RETRIEVAL_LEXICAL_WEIGHT), float(settings.RETRIEVAL_SPEAKER_BOOST)
        rest = [ScorePart("speaker", "speaker boost", f"{ws:g} × {wb:g}", components.get("speaker", 0.0),
                          ws * wb * components.get("speaker", 0.0)),
                ScorePart("lexical", "keywords (BM25)", f"{ws:g} × {wl:g}", components.get("lexical", 0.0),
                          ws * wl * components.get("lexical", 0.0))]
    else:
        rest = []
    # Under `decayed` the recency component is seed 004's decay (memory.recalling.scoring.decay_component).
    rest += [ScorePart("recency", "how faded (decay)" if scoring == "decayed" else "recency", f"{wr:g}", components.get("recency", 0.0), wr * components.get("recency", 0.0)),
             ScorePart("importance", "importance", f"{wi:g}", components.get("importance", 0.0),
                       wi * components.get("importance", 0.0))]
    # Query enhancement's temporal boost (memory/recalling/enhance.py) comes weighted: added as it is.
    temporal = components.get("temporal", 0.0)
    rest.append(ScorePart("temporal", "turn named in the question", "1", temporal, temporal))
    # Spreading activation (recall's associations): the run's weight × the linked result's score, added as it is.
    association = components.get("association", 0.0)
    rest.append(ScorePart("association", "linked to a result", "1", association, association))
    # A retrieval distortion (memory.forming.distortion: depression) takes part of the score away: negative.
    distortion = components.get("distortion", 0.0)
    rest.append(ScorePart("distortion", "dampened (depression)", "1", distortion, distortion))
    # The agent's mood primes what matches it (memory.living.mood): added as it is.
    mood = components.get("mood", 0.0)
    rest.append(ScorePart("mood", "matches the mood", "1", mood, mood))
    if fused:
        share = max(0.0, float(score) - sum(p.contribution for p in rest))
        scale = ws * (1 - wl)
        parts.append(ScorePart(SIMILARITY, "similarity (rescaled among candidates)", f"{ws:g} × {1 - wl:g}",
                               share / scale if scale else 0.0, share))
    else:
        parts.append(ScorePart(SIMILARITY, SIMILARITY, f"{ws:g}", components.get(SIMILARITY, 0.0),
                               ws * components.get(SIMILARITY, 0.0)))
    # A part whose weight is 0 under this preset says nothing; the speaker boost shows where it applied.
    weight_of = {"speaker": ws * wb if fused else 0, "lexical": ws * wl if fused else 0, "recency": wr, "importance": wi,
                 "temporal": 1 if temporal else 0, "association": 1 if association else 0,
                 "distortion": 1 if distortion else 0, "mood": 1 if mood else 0}
    parts += [p for p in rest if weight_of[p.key] and (p.key != "speaker" or p.contribution > 0)]
    total = sum(p.contribution for p in parts)
    return ScoreBreakdown(parts=parts, total=total, scoring=scoring,
                          boosted=components.get("speaker", 0.0) > 0 or float(score) > 1.0,
                          adds_up=abs(total - float(score)) < 0.005,
                          boost=ws * float(settings.RETRIEVAL_SPEAKER_BOOST))
