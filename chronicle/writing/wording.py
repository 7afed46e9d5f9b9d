"""What a search looked through, in a writer's words (the turn inspector's line under each tool call),
from the filter a retrieval recorded (memory.recalling.filters.MemoryFilter.to_dict)."""

from __future__ import annotations

KIND_WORDS = {
    "character": "who they are", "scene": "the scene", "character_knowledge": "what they know of others",
    "episodic": "what was said", "semantic": "facts and beliefs", "procedural": "lessons",
    "emotional": "feelings", "observation": "what they saw", "action": "what was done",
    "reflection": "insights", "plan": "plans", "goal_progress": "goal progress", "metacognition": "self-assessments", "opinion": "opinions",
}
STATUS_WORDS = {"active": "", "archived": "archived", "consolidated": "consolidated into summaries"}


def _either(words: list[str]) -> str:
    if len(words) <= 1:
        return "".join(words)
    return f"{', '.join(words[:-1])} or {words[-1]}"


def filter_sentence(flt: dict | None) -> str:
    """"Searched Jordan's own memories (and the shared ones) of who they are, from turn 2 to 5"."""
    flt = dict(flt or {})
    agent = flt.get("agent")
    whose = f"{agent}'s own memories" if agent else "everyone's memories"
    if agent and flt.get("shared"):
        whose += " and the shared ones"
    parts = [f"Searched {whose}"]
    kinds = [KIND_WORDS.get(k, k.replace("_", " ")) for k in flt.get("kinds") or []]
    if kinds:
        parts.append(f"of {_either(kinds)}")
    if flt.get("categories"):
        parts.append(f"({_either([c.replace('_', ' ') for c in flt['categories']])})")
    if flt.get("about"):
        parts.append(f"about {flt['about']}")
    if flt.get("participant"):
        parts.append(f"with {flt['participant']} in them")
    low, high = flt.get("min_turn"), flt.get("max_turn")
    if low is not None and low == high:
        parts.append(f"at turn {low}")
    elif low is not None and high is not None:
        parts.append(f"from turn {low} to {high}")
    elif high is not None:
        parts.append(f"up to turn {high}")
    elif low is not None:
        parts.append(f"from turn {low} on")
    if flt.get("min_importance") is not None:
        parts.append(f"of importance {flt['min_importance']:g} or more")
    if flt.get("tags"):
        joined = " and " if flt.get("tags_mode") == "all" else " or "
        parts.append(f"tagged {joined.join(flt['tags'])}")
    if flt.get("sources"):
        parts.append(f"({_either(flt['sources'])} only)")
    if flt.get("ids"):
        parts.append(f"among {len(flt['ids'])} linked memor{'y' if len(flt['ids']) == 1 else 'ies'}")
    statuses = [STATUS_WORDS.get(s, s) for s in flt.get("statuses") or ["active"]]
    if any(statuses):
        parts.append(f"including {_either([s for s in statuses if s])} ones")
    return " ".join(parts) + "."


# A memory's kind as a badge reads to a writer; the stored names stay in the admin and the API.
MEMORY_KIND_LABELS = {
    "character": "sheet", "scene": "scene", "character_knowledge": "knows of another", "episodic": "conversation",
    "semantic": "fact", "procedural": "lesson", "emotional": "feeling", "observation": "seen", "action": "action",
    "reflection": "insight", "plan": "plan", "goal_progress": "goal progress", "metacognition": "self-assessment", "opinion": "opinion",
}
# Where the category says it better than the kind (a belief is a fact held on someone's word).
CATEGORY_LABELS = {
    ("semantic", "belief"): "belief", ("semantic", "lore"): "lore", ("semantic", "learned"): "fact learned",
    ("semantic", "accusation"): "said of them",
    ("observation", "stage"): "stage direction", ("scene", "context"): "scene · situation",
}
# Categories that only restate their kind.
PLAIN_CATEGORIES = {"knowledge", "dialogue", "reaction", "reflection", "done", "witnessed", "formed", "lesson"}


def kind_label(kind: str, category: str = "") -> str:
    """"sheet · decision style", "knows of another", "belief": a memory's kind and category in words."""
    if (kind, category) in CATEGORY_LABELS:
        return CATEGORY_LABELS[kind, category]
    label = MEMORY_KIND_LABELS.get(kind, (kind or "").replace("_", " "))
    if category and category != kind and category not in PLAIN_CATEGORIES:
        label += f" · {category.replace('_', ' ')}"
    return label
