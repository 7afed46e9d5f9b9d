"""What the engine asks of a provider: one OpenAI-shaped chat completion at a time."""

from __future__ import annotations

from dataclasses import dataclass, field

from chronicle.simulation.prompting.context import request_tokens


def estimate_messages_tokens(messages: list[dict], tools: list[dict] | None = None) -> int:
    """A request's prompt tokens for a provider that reports none: the messages and the tool schemas."""
    return request_tokens(messages, tools)


class ProviderError(Exception):
    """A failed call; `retryable` ones (time-outs, 5xx, 429, connection) are tried again with backoff."""

    def __init__(self, message: str, *, retryable: bool = False):
        super().__init__(message)
        self.retryable = retryable


class ToolsUnsupported(ProviderError):
    """The server or model refuses function calling: the engine falls back to pre-populated memories."""


@dataclass
class TurnHints:
    """What the scripted provider needs to play its part; real models ignore it and read the messages."""

    agent: str
    others: list[str]
    index: int
    first_turn_of_agent: bool
    transcript: list[tuple[int, str, str]] = field(default_factory=list)  # (turn number, speaker, text)
    max_tool_calls: int = 6  # the turn's budget: the scripted provider asks for no more in one round


@dataclass
class ChatResult:
    message: dict  # {"role": "assistant", "content": str | None, "tool_calls": [OpenAI-shaped dicts]}
    prompt_tokens: int = 0
    completion_tokens: int = 0
    estimated: bool = False


class Provider:
    name = "base"

    def chat(self, messages: list[dict], *, tools: list[dict] | None, allow_tools: bool = True,
             hints: TurnHints) -> ChatResult:
        """One completion; with allow_tools False the tools stay declared but the model must speak."""
        raise NotImplementedError

    def pick_speaker(self, *, candidates: list[str], transcript: list[tuple[int, str, str]]) -> tuple[str | None, ChatResult | None]:
        """Who speaks next (speaking order "model picks"); None lets the engine decide."""
        return None, None

    def complete(self, prompt: str) -> str:
        """One plain answer to one user message, no tools (reflection's questions and insights)."""
        raise NotImplementedError
