"""Retrieval quality on LoCoMo-format conversations (LoCoMo, Maharana et al. 2024: conversations
whose questions name their evidence lines): recall@k of query_memory.

Each conversation becomes a fresh bank holding one episodic memory per turn, stored through the
real capture path (remember_utterance); each question goes through query_memory's own search
(memory.recalling.tools.search_memory). Plain cosine over the same stored vectors is measured alongside.

Query enhancement is measured through the same path: the options a simulation would put in
ToolContext.enhance. The questions have no scene, so context injection gets what an agent would
have heard last: the conversation's final line ("<speaker>: <text>", as the engine writes it).
Where an enhancement applies, the same questions are also asked without it, so its effect on the
questions it touched is reported beside the overall figure. --calibrate fits the confidence
scale (memory.recalling.confidence) on the similarities of every (question, line) pair, evidence
lines against the rest.
"""

from __future__ import annotations

import re
import time
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np
from django.conf import settings
from django.db import connection

from memory.embedding import encode
from memory.embedding.cache import embed_texts
from memory.forming.capture import remember_utterance
from memory.models import Memory, MemoryKey
from memory.recalling.confidence import calibrated, fit_logistic
from memory.recalling.filters import EPISODE_WINDOW, episode_keys
from memory.recalling.indexing import build_bank_index, drop_bank_index
from memory.recalling.scoring import DEFAULT_SCORING, SIMILARITY
from memory.recalling.tools import ToolContext, search_memory
from memory.services import bank_create

CATEGORIES = {"1": "multi-hop", "2": "temporal", "3": "open-domain", "4": "single-hop"}  # LoCoMo's numbering
LISTENER = "Reader"  # the agent whose episodic memories hold the conversation
_DIA = re.compile(r"D\d+:\d+")


@dataclass
class Turn:
    dia_id: str
    speaker: str
    text: str  # with "[shares …]" when the turn shares an image
    session: int
    date: str


@dataclass
class Question:
    text: str
    category: int
    evidence: set[str]


@dataclass
class Conversation:
    sample_id: str
    turns: list[Turn]
    questions: list[Question] = field(default_factory=list)


def parse_sample(sample: dict) -> Conversation:
    conv = sample["conversation"]
    sessions = sorted(int(m.group(1)) for key in conv if (m := re.fullmatch(r"session_(\d+)", key)))
    turns = []
    for n in sessions:
        for t in conv[f"session_{n}"] or []:
            text = (t.get("text") or "").strip()
            if t.get("blip_caption"):
                text = f"{text} [shares {t['blip_caption']}]".strip()
            if text:
                turns.append(Turn(t["dia_id"], t["speaker"], text, n, conv.get(f"session_{n}_date_time", "")))
    known = {t.dia_id for t in turns}
    questions = []
    for qa in sample.get("qa", []):
        if qa.get("category") not in (1, 2, 3, 4):
            continue  # 5: adversarial, no answer in the conversation
        # A few evidence entries are malformed ("D8:6; D9:17", "D1:3 D1:4"): split, keep real ids.
        evidence = {p for e in qa.get("evidence") or [] for p in re.split(r"[\s;,]+", str(e))
                    if _DIA.fullmatch(p) and p in known}
        if evidence:
            questions.append(Question(qa["question"], int(qa["category"]), evidence))
    return Conversation(str(sample.get("sample_id", "")), turns, questions)


def build_bank(conv: Conversation):
    """A fresh bank with one episodic memory per turn, turn numbers in order, session dates as the story clock."""
    bank = bank_create(name=f"evaluate_retrieval {conv.sample_id}")
    contents = [f"{t.speaker} said: {t.text}" for t in conv.turns]
    # One batched model pass for every text the capture path will embed (it then hits the cache).
    earlier = [[(0, text) for text in contents[max(0, i - EPISODE_WINDOW + 1):i][::-1]] for i in range(len(contents))]
    embed_texts(contents + [text for c, e in zip(contents, earlier) for text, _ids in episode_keys(c, e)])
    dia_of = {}
    for number, t in enumerate(conv.turns, start=1):
        (memory,) = remember_utterance(bank=bank, speaker=t.speaker, text=t.text, turn=number, listeners=[LISTENER],
                                       metadata={"dia_id": t.dia_id, "session": t.session, "story_time": t.date})
        dia_of[memory.pk] = t.dia_id
    return bank, dia_of


def _drop_bank(bank_id: int) -> None:
    """Remove an evaluation bank in SQL: nothing else refers to it, and no app's collector need load."""
    drop_bank_index(bank_id)
    with connection.cursor() as cur:
        cur.execute("DELETE FROM memory_memorykey k USING memory_memory m WHERE k.memory_id = m.id AND m.bank_id = %s", [bank_id])
        cur.execute("DELETE FROM memory_memory_evidence e USING memory_memory m "
                    "WHERE (e.from_memory_id = m.id OR e.to_memory_id = m.id) AND m.bank_id = %s", [bank_id])
        cur.execute("DELETE FROM memory_memory WHERE bank_id = %s", [bank_id])
        cur.execute("DELETE FROM memory_memorybank WHERE id = %s", [bank_id])


def _recall_at(ranked: list[str], evidence: set[str], k: int) -> float:
    return len(set(ranked[:k]) & evidence) / len(evidence)


def _mean(values: list[float]) -> float:
    return round(float(np.mean(values)), 4) if values else 0.0


def _by_category() -> dict[int, dict[int, list[float]]]:
    return defaultdict(lambda: defaultdict(list))


@dataclass
class _Tally:
    """Every question's recall@k, kept as evaluate's figures read them."""
    ks: list[int]
    fused: dict[int, list[float]] = field(default_factory=lambda: defaultdict(list))
    cosine: dict[int, list[float]] = field(default_factory=lambda: defaultdict(list))
    by_cat: dict[int, dict[int, list[float]]] = field(default_factory=_by_category)
    cos_by_cat: dict[int, dict[int, list[float]]] = field(default_factory=_by_category)
    # Per conversation (--split): recall@k overall and by category, so a gain on one shows whether it holds on another.
    per_conv: dict[str, dict[int, dict[int, list[float]]]] = field(default_factory=dict)
    touched: dict[str, dict[str, list[float]]] = field(
        default_factory=lambda: defaultdict(lambda: {"with": [], "without": []}))
    relevant: list[np.ndarray] = field(default_factory=list)    # similarity of each (question, evidence line) pair
    irrelevant: list[np.ndarray] = field(default_factory=list)  # similarity of each (question, any other line) pair

    def add(self, conversation: str, q: Question, ranked: list[str], plain: list[str]) -> None:
        mine = self.per_conv.setdefault(conversation, _by_category())
        for k in self.ks:
            mine[0][k].append(_recall_at(ranked, q.evidence, k))  # category 0: all questions
            mine[q.category][k].append(mine[0][k][-1])
            self.fused[k].append(_recall_at(ranked, q.evidence, k))
            self.cosine[k].append(_recall_at(plain, q.evidence, k))
            self.by_cat[q.category][k].append(self.fused[k][-1])
            self.cos_by_cat[q.category][k].append(self.cosine[k][-1])

    def figures(self) -> dict:
        ks, kmax = self.ks, max(self.ks)
        return {
            "questions": len(self.fused[kmax]),
            "recall": {str(k): _mean(self.fused[k]) for k in ks},
            "by_category": {str(c): {str(k): _mean(v[k]) for k in ks} for c, v in sorted(self.by_cat.items())},
            "cosine": {str(k): _mean(self.cosine[k]) for k in ks},
            "cosine_by_category": {str(c): {str(k): _mean(v[k]) for k in ks} for c, v in sorted(self.cos_by_cat.items())},
            "by_conversation": {
                name: {"questions": len(cats[0][kmax]), "recall": {str(k): _mean(cats[0][k]) for k in ks},
                       "by_category": {str(c): {str(k): _mean(v[k]) for k in ks} for c, v in sorted(cats.items()) if c}}
                for name, cats in self.per_conv.items()},
        }


def evaluate(samples: list[dict], *, ks: list[int], scoring: str = DEFAULT_SCORING, log=lambda _s: None,
             enhance: dict | None = None, calibrate: bool = False) -> dict:
    """enhance: {"context": True, "temporal": True, "synonyms": True} (any of them), as a simulation's
    options would set them; context is filled per conversation (its last line)."""
    started = time.perf_counter()
    enhance = dict(enhance or {})
    tally = _Tally(ks=sorted(set(ks)))
    for sample in samples:
        conv = parse_sample(sample)
        if not conv.questions:
            continue
        bank, dia_of = build_bank(conv)
        try:
            if len(conv.turns) > settings.RETRIEVAL_FUSION_EXACT_LIMIT:
                # As a worker would for a live bank this big (memory.recalling.indexing): its own vector indexes.
                build_bank_index(bank.pk)
            _ask_questions(conv, bank, dia_of, tally, scoring=scoring, enhance=enhance, calibrate=calibrate)
            log(f"{conv.sample_id}: {len(conv.turns)} turns, {len(conv.questions)} questions")
        finally:
            _drop_bank(bank.pk)
    figures = tally.figures() | {"seconds": round(time.perf_counter() - started, 1)}
    if enhance:
        # R@10 (or the largest k below 10) on the questions each enhancement changed, with and without it.
        figures["enhancement"] = {
            "options": sorted(enhance),
            "applied": {name: {"questions": len(v["with"]), "with": _mean(v["with"]), "without": _mean(v["without"])}
                        for name, v in sorted(tally.touched.items())},
        }
    if calibrate and tally.relevant:
        figures["calibration"] = calibration_report(np.concatenate(tally.relevant), np.concatenate(tally.irrelevant))
    return figures


def _ask_questions(conv: Conversation, bank, dia_of: dict[int, str], tally: _Tally, *, scoring: str, enhance: dict,
                   calibrate: bool) -> None:
    """One conversation's questions through query_memory's search, beside plain cosine over the same vectors."""
    kmax = max(tally.ks)
    options = dict(enhance)
    if options.pop("context", False):
        last = conv.turns[-1]
        options["context"] = f"{last.speaker}: {last.text}"
    ctx = ToolContext(bank=bank, agent=LISTENER, current_turn=len(conv.turns) + 1, scoring=scoring,
                      enhance=options)
    plain_ctx = ToolContext(bank=bank, agent=LISTENER, current_turn=len(conv.turns) + 1, scoring=scoring)
    rows = list(Memory.objects.in_bank(bank).filter(agent=LISTENER, kind="episodic").values_list("id", "embedding"))
    ids = [dia_of[pk] for pk, _ in rows]
    matrix = np.asarray([v for _, v in rows], dtype=np.float32)
    if calibrate:
        # The ranking's similarity: the best of a memory's content and its keys (the in-reply-to key).
        position = {pk: i for i, (pk, _) in enumerate(rows)}
        keys = list(MemoryKey.objects.filter(memory__bank=bank, memory_id__in=position).values_list("memory_id", "embedding"))
        key_rows = np.asarray([position[pk] for pk, _ in keys], dtype=np.int64)
        key_matrix = np.asarray([v for _, v in keys], dtype=np.float32) if keys else None
    # The baseline's question vectors straight from the model, not through the cache: cached
    # there, they would also serve query_memory, which must embed each question as a live
    # search does (the query encoder).
    qvectors = encode([q.text for q in conv.questions])
    for q, qv in zip(conv.questions, qvectors):
        enhanced = ctx.enhanced(q.text)
        _flt, results = search_memory(ctx, q.text, k=kmax, enhanced=enhanced)
        ranked = [dia_of.get(r.memory.pk, "") for r in results]
        if enhanced.used:
            _flt, before = search_memory(plain_ctx, q.text, k=kmax)
            without = [dia_of.get(r.memory.pk, "") for r in before]
            for name in enhanced.used:
                tally.touched[name]["with"].append(_recall_at(ranked, q.evidence, min(10, kmax)))
                tally.touched[name]["without"].append(_recall_at(without, q.evidence, min(10, kmax)))
        if calibrate:
            sims = matrix @ qv
            if len(key_rows):
                np.maximum.at(sims, key_rows, key_matrix @ qv)
            is_evidence = np.array([i in q.evidence for i in ids])
            tally.relevant.append(sims[is_evidence]); tally.irrelevant.append(sims[~is_evidence])
        plain = [ids[i] for i in np.argsort(-(matrix @ qv), kind="stable")[:kmax]]
        tally.add(conv.sample_id, q, ranked, plain)


def calibration_report(relevant: np.ndarray, irrelevant: np.ndarray) -> dict:
    """The confidence scale's fit: P(relevant | similarity) with relevant and irrelevant pairs
    weighted equally (a logistic fit of the two distributions' likelihood ratio), and a
    reliability table: per similarity bin, the share of relevant pairs after that weighting beside
    what the current constants (confidence.calibrated) say."""
    sims = np.concatenate([relevant, irrelevant])
    labels = np.concatenate([np.ones(len(relevant)), np.zeros(len(irrelevant))])
    weights = np.concatenate([np.full(len(relevant), 0.5 / len(relevant)), np.full(len(irrelevant), 0.5 / len(irrelevant))])
    slope, intercept = fit_logistic(sims, labels, weights=weights)
    bins = []
    for lo in np.arange(-0.2, 1.0, 0.1):
        inside = (sims >= lo) & (sims < lo + 0.1)
        if inside.sum():
            share = float((weights * labels)[inside].sum() / weights[inside].sum())
            bins.append({SIMILARITY: f"{lo:.1f}..{lo + 0.1:.1f}", "pairs": int(inside.sum()),
                         "relevant": round(share, 4),
                         "calibrated": round(float(np.mean([calibrated(s) for s in sims[inside]])), 4)})
    return {"relevant_pairs": len(relevant), "irrelevant_pairs": len(irrelevant),
            "relevant_mean": round(float(relevant.mean()), 4), "irrelevant_mean": round(float(irrelevant.mean()), 4),
            "slope": round(slope, 3), "intercept": round(intercept, 3), "bins": bins}
