"""The `replay` provider: plays lines given in advance (chronicle.simulation.run.replay), offline.

Each turn it answers with the script's replies for that turn, in order: the tool calls (made for
real by the engine, their results recorded), then the line. Everything after the line — capture per
witness, whispers, beliefs, importance, reflection — runs as in any run. Where a run with a model
would ask it for more (importance, a distortion's retelling, reflection), the call is counted
(`aux_calls`) and answered as a run without a model answers it, so a replay measures what a model
run would cost without calling one.
"""

from __future__ import annotations

import json

from chronicle.simulation.providers.base import ChatResult, Provider, ProviderError, TurnHints, estimate_messages_tokens
from chronicle.simulation.providers.scripted import ScriptedProvider


class ReplayProvider(Provider):
    name = "replay"

    def __init__(self, script: list[dict]):
        self.script = script or []
        self.aux_calls = 0

    def entry(self, index: int) -> dict:
        if index >= len(self.script):
            raise ProviderError(f"the script has {len(self.script)} lines and no line for turn {index + 1}")
        return self.script[index]

    def chat(self, messages: list[dict], *, tools: list[dict] | None, allow_tools: bool = True,
             hints: TurnHints) -> ChatResult:
        entry = self.entry(hints.index)
        replies = entry.get("replies") or [{"content": entry.get("text") or "", "tool_calls": []}]
        # The engine sends back each reply we gave this turn as an assistant message: that many rounds are done.
        done = sum(1 for m in messages if m.get("role") == "assistant")
        reply = replies[done] if done < len(replies) else replies[-1]
        if not (tools and allow_tools) or reply.get("tool_calls") and done >= len(replies) - 1:
            # The line (no tools offered, as in pre-populate, or the budget spent: straight to it).
            reply = replies[-1] if not replies[-1].get("tool_calls") else {"content": entry.get("text") or ""}
        message: dict = {"role": "assistant", "content": reply.get("content")}
        if reply.get("tool_calls"):
            message["tool_calls"] = [
                {"id": f"call_{hints.index}_{done}_{position}", "type": "function",
                 "function": {"name": call["name"], "arguments": call["arguments"] if isinstance(call["arguments"], str)
                              else json.dumps(call["arguments"])}}
                for position, call in enumerate(reply["tool_calls"])]
        return ChatResult(message=message, prompt_tokens=estimate_messages_tokens(messages, tools),
                          completion_tokens=estimate_messages_tokens([message]), estimated=True)

    def ask(self, _prompt: str) -> str:
        """A model's aux call (importance, a distortion's retelling): counted, left unanswered, so the
        caller's offline rule decides, as in a run without a model."""
        self.aux_calls += 1
        return ""

    def complete(self, prompt: str) -> str:
        """Reflection's questions and insights: counted, and answered offline as the scripted provider does."""
        self.aux_calls += 1
        return ScriptedProvider().complete(prompt)

    def pick_speaker(self, *, candidates, transcript):
        return None, None  # the script says who speaks
