"""A LoCoMo conversation as a Wonda scene with probes (manage.py locomo_scene).

LoCoMo ("Evaluating Very Long-Term Conversational Memory of LLM Agents", Maharana et al., ACL 2024)
holds conversations of two friends over many sessions and months, with questions whose evidence
is named by line. As a scene: the two friends are the cast, every line of every session is a line
of the script (a shared photo as "[shares …]"), each session opens with a stage direction that
sets the story calendar ("A new day: it is 1:56 pm on 8 May 2023"), and each question (categories
1–4, with evidence) is a probe asked after the last line, expecting the words of its evidence
lines. The probe knows the turn of its evidence (answer_turn), so evaluate_agents can say how far
back memory had to reach.
"""

from __future__ import annotations

import re

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}  # 5, adversarial: no answer
_DIA = re.compile(r"D\d+:\d+")
_SESSION = re.compile(r"session_(\d+)")
EXPECT_WORDS = 8  # a probe expects the first words of its evidence line: enough to name one line


class LocomoError(ValueError):
    """A sample the converter cannot read; the message says what is missing."""


def _expect(text: str) -> str:
    return " ".join(text.split()[:EXPECT_WORDS])


def _when(stamp: str) -> str:
    """LoCoMo's "1:56 pm on 8 May, 2023" as a direction reads it: "1:56 pm on 8 May 2023"."""
    return re.sub(r"\s+", " ", stamp.replace(",", "")).strip()


def scene(sample: dict, *, minutes_per_turn: float = 1.0) -> dict:
    """One LoCoMo sample as Wonda JSON (format "wonda", version 1) with its script and probes."""
    conversation = sample.get("conversation")
    if not isinstance(conversation, dict) or not conversation.get("speaker_a") or not conversation.get("speaker_b"):
        raise LocomoError("the sample has no conversation with speaker_a and speaker_b.")
    a, b = str(conversation["speaker_a"]), str(conversation["speaker_b"])
    sessions = sorted(int(m.group(1)) for key in conversation if (m := _SESSION.fullmatch(key)))
    script, directions, turn_of, said = [], [], {}, {}
    for number in sessions:
        stamp = _when(str(conversation.get(f"session_{number}_date_time") or ""))
        opening = len(script) + 1
        for line in conversation.get(f"session_{number}") or []:
            text = " ".join(str(line.get("text") or "").split())
            if line.get("blip_caption"):
                text = f"{text} [shares {line['blip_caption']}]".strip()
            if not text or line.get("speaker") not in (a, b):
                continue
            script.append({"speaker": line["speaker"], "text": text})
            turn_of[str(line.get("dia_id"))] = len(script)
            said[str(line.get("dia_id"))] = text
        if stamp and len(script) >= opening:
            directions.append(f"{opening}: {'A new day' if opening > 1 else 'It begins'}: it is {stamp}")
    if not script:
        raise LocomoError("the sample's sessions hold no lines.")
    probes = []
    for qa in sample.get("qa") or []:
        category = qa.get("category")
        if category not in CATEGORIES or not str(qa.get("question") or "").strip():
            continue
        # A few evidence entries are malformed ("D8:6; D9:17"): split, keep the ids the conversation has.
        evidence = sorted({part for entry in qa.get("evidence") or [] for part in re.split(r"[\s;,]+", str(entry))
                           if _DIA.fullmatch(part) and part in turn_of}, key=turn_of.get)
        if not evidence:
            continue
        question = str(qa["question"]).strip()
        # The friend who is asked is the one the question is not about (she remembers what was said to her).
        agent = b if re.search(rf"\b{re.escape(a)}\b", question) else a
        probes.append({"after_turn": len(script), "agent": agent, "kind": CATEGORIES[category], "question": question,
                       "expect": [_expect(said[dia]) for dia in evidence],
                       "answer_turn": turn_of[evidence[-1]], "answer": str(qa.get("answer", ""))})
    title = f"{a} and {b}" + (f" ({sample['sample_id']})" if sample.get("sample_id") else "")
    return {
        "format": "wonda", "version": 1,
        "settings": {"max_turns": len(script), "minutes_per_turn": minutes_per_turn,
                     "stage_directions": "\n".join(directions)},
        "scenario": {
            "title": title,
            "location": f"The messages between {a} and {b}: they write to each other every few weeks.",
            "atmosphere": "Warm and easy: two friends catching up on their lives.",
            "time_of_day": "",
            "description": f"{a} and {b} are close friends who keep in touch by writing, over many months.",
            "cast": [a, b],
        },
        "characters": [_character(a, b), _character(b, a)],
        "script": script,
        "probes": probes,
    }


def _character(name: str, friend: str) -> dict:
    return {"name": name, "role": f"{friend}'s friend",
            "description": f"{name} is a close friend of {friend}; they write to each other about their lives.",
            "knowledge": {friend: f"{friend} is {name}'s close friend."}}
