"""Reading what models actually reply, beyond the well-formed: a tool call written as text, a refusal."""

from __future__ import annotations

import json
import re

_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)
# A refusal as models word it: it opens declining ("I'm sorry, but I can't…", "I cannot…", "As an AI…")
# and speaks of the task, not the scene ("this request", "roleplay", "content", "guidelines"), so a
# character's own "I'm sorry, but I can't stay" is a line, not a refusal.
_DECLINING = re.compile(r"^\s*(?:(?:I['’]m )?sorry,? (?:but )?I|I) (?:can(?:no|['’])t|won['’]t|am (?:not able|unable)|"
                        r"must decline)|^\s*As an AI\b", re.IGNORECASE)
_ABOUT_THE_TASK = re.compile(r"\b(?:this|that|the|your) (?:request|task|roleplay|role-play|prompt|content)\b|"
                             r"\b(?:as an AI|language model|assist with|help with (?:this|that)|guidelines|policy|policies)\b",
                             re.IGNORECASE)


def text_tool_calls(content: str | None, offered: set[str], *, prefix: str) -> list[dict]:
    """A reply that is only a tool call's JSON, written as text ({"name", "arguments"} or a list of
    them, "parameters" for "arguments", in a code fence or not): the calls it means; else []."""
    text = (content or "").strip()
    if not text or text[0] not in "[{`":
        return []
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1)
    try:
        data = json.loads(text)
    except ValueError:
        return []
    items = data if isinstance(data, list) else [data]
    calls = []
    for position, item in enumerate(items):
        if isinstance(item, dict) and isinstance(item.get("function"), dict):
            item = item["function"]  # OpenAI's own shape, pasted as text
        if not isinstance(item, dict) or item.get("name") not in offered:
            return []
        arguments = item.get("arguments", item.get("parameters", {}))
        calls.append({"id": f"{prefix}_{position}", "type": "function",
                      "function": {"name": item["name"],
                                   "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments or {})}})
    return calls


def is_refusal(text: str) -> bool:
    head = (text or "")[:300]
    return bool(_DECLINING.search(head) and _ABOUT_THE_TASK.search(head))
