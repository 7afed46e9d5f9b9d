"""The `openai` provider: the `openai` client against any OpenAI-compatible server.

Ollama, LM Studio, vLLM, llama.cpp's server and OpenAI itself all speak /v1/chat/completions.
The client's own retries are off (max_retries=0): the engine retries with backoff itself so that
every failure is recorded on the turn.
"""

from __future__ import annotations

import os
import re
import threading

import openai
from django.conf import settings

from chronicle.simulation.providers.base import (
    ChatResult,
    Provider,
    ProviderError,
    ToolsUnsupported,
    TurnHints,
    estimate_messages_tokens,
)
from core import tracing
from core.crypto import decryption_error

TOOLS_REFUSED = re.compile(r"tool|function", re.IGNORECASE)

_pool: tuple[int, object] | None = None  # (the process it was made in, its HTTP client)
_pool_lock = threading.Lock()


def _http_client():
    """One connection pool per process (made after any fork) for every run's model: a client per
    provider built a new SSL context (~50 ms) and opened a new connection for each turn and again for
    its judgement. Each provider's own key, model and time-out still go with its requests."""
    global _pool
    with _pool_lock:
        if _pool is None or _pool[0] != os.getpid():
            _pool = (os.getpid(), openai.DefaultHttpxClient())
        return _pool[1]


class OpenAIProvider(Provider):
    name = "openai"

    def __init__(self, *, base_url: str, api_key: str, model: str, timeout: float, temperature: float | None = None,
                 max_tokens: int | None = None, seed: int | None = None, key_error: str = ""):
        self.model = model
        # Set when the simulation's stored key cannot be decrypted: every call fails with this reason
        # (recorded on the turn, pausing the run) instead of going out with no key or the server default.
        self.key_error = key_error
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.seed = seed
        self.timeout = timeout
        # Local servers ignore the key but the client insists on one.
        self.client = openai.OpenAI(base_url=base_url, api_key=api_key or "not-needed", timeout=timeout, max_retries=0,
                                    http_client=_http_client())

    @classmethod
    def for_simulation(cls, simulation) -> "OpenAIProvider":
        return cls(base_url=simulation.base_url or settings.LLM_BASE_URL, api_key=simulation.api_key or settings.LLM_API_KEY,
                   model=simulation.model or settings.LLM_MODEL, timeout=simulation.timeout_s or settings.LLM_TIMEOUT,
                   temperature=simulation.temperature, max_tokens=simulation.max_tokens, seed=simulation.seed,
                   key_error=decryption_error(simulation.api_key))

    @classmethod
    def for_bookkeeping(cls, simulation) -> "OpenAIProvider":
        """The run's bookkeeping model (Simulation.bookkeeping_model): its own server, model and key,
        the run's time-out and sampling."""
        return cls(base_url=simulation.bookkeeping_base_url, api_key=simulation.bookkeeping_api_key,
                   model=simulation.bookkeeping_model, timeout=simulation.timeout_s or settings.LLM_TIMEOUT,
                   temperature=simulation.temperature, max_tokens=simulation.max_tokens, seed=simulation.seed,
                   key_error=decryption_error(simulation.bookkeeping_api_key))

    def _create(self, messages: list[dict], tools: list[dict] | None, *, max_tokens: int | None = None,
                allow_tools: bool = True, temperature: float | None = None):
        if self.key_error:
            raise ProviderError(self.key_error, retryable=False)
        kwargs: dict = {"model": self.model, "messages": messages}
        if tools:
            kwargs["tools"] = tools
            if not allow_tools:
                kwargs["tool_choice"] = "none"  # the tool-call budget is spent: speak now
        if temperature is not None or self.temperature is not None:
            kwargs["temperature"] = temperature if temperature is not None else self.temperature
        if max_tokens or self.max_tokens:
            kwargs["max_tokens"] = max_tokens or self.max_tokens
        if self.seed is not None:
            kwargs["seed"] = self.seed
        try:
            return self.client.chat.completions.create(**kwargs)
        except openai.APITimeoutError as exc:
            raise ProviderError(f"the LLM server did not answer within {self.timeout:g}s", retryable=True) from exc
        except openai.APIConnectionError as exc:
            raise ProviderError(f"cannot reach the LLM server: {exc}", retryable=True) from exc
        except openai.APIStatusError as exc:
            detail = _detail(exc)
            if exc.status_code == 400 and tools and TOOLS_REFUSED.search(detail):
                raise ToolsUnsupported(f"the model refused tool calling: {detail}") from exc
            retryable = exc.status_code >= 500 or exc.status_code in (408, 409, 429)
            raise ProviderError(f"LLM server answered {exc.status_code}: {detail}", retryable=retryable) from exc
        except openai.OpenAIError as exc:
            raise ProviderError(f"LLM error: {exc}", retryable=False) from exc
        except ValueError as exc:  # a 200 whose body claims JSON and is not
            raise MalformedResponse(f"a body that is not JSON ({exc})") from exc

    def _completion(self, messages: list[dict], tools: list[dict] | None, **kwargs):
        """A chat completion, or MalformedResponse when the server sent something else with a 200;
        each one a span (core.tracing), named and described as OpenTelemetry's GenAI conventions say."""
        with tracing.span(f"chat {self.model}", **{"gen_ai.operation.name": "chat", "gen_ai.system": "openai",
                                                   "gen_ai.request.model": self.model}) as span:
            response, message = self._checked(messages, tools, **kwargs)
            usage = getattr(response, "usage", None)
            for name, value in (("input", getattr(usage, "prompt_tokens", None)),
                                ("output", getattr(usage, "completion_tokens", None))):
                if isinstance(value, int):
                    span.set_attribute(f"gen_ai.usage.{name}_tokens", value)
            return response, message

    def _checked(self, messages: list[dict], tools: list[dict] | None, **kwargs):
        response = self._create(messages, tools, **kwargs)
        if isinstance(response, (str, bytes)):  # the client hands back a non-JSON body as text
            raise MalformedResponse(f"text instead of JSON: {_excerpt(response)}")
        choices = getattr(response, "choices", None)
        if not isinstance(choices, list):
            raise MalformedResponse(f"JSON without a \"choices\" list: {_excerpt(response)}")
        if not choices:
            raise MalformedResponse("no choices")
        message = getattr(choices[0], "message", None)
        if message is None or not hasattr(message, "content"):
            raise MalformedResponse(f"a choice without a message: {_excerpt(choices[0])}")
        return response, message

    def chat(self, messages: list[dict], *, tools: list[dict] | None, allow_tools: bool = True,
             hints: TurnHints) -> ChatResult:
        response, choice = self._completion(messages, tools, allow_tools=allow_tools)
        content = choice.content
        if content is not None and not isinstance(content, str):
            raise MalformedResponse(f"message content that is not text: {_excerpt(content)}")
        message: dict = {"role": "assistant", "content": content}
        try:
            if choice.tool_calls:
                message["tool_calls"] = [
                    {"id": call.id or f"call_{i}", "type": "function",
                     "function": {"name": str(call.function.name or ""), "arguments": call.function.arguments or ""}}
                    for i, call in enumerate(choice.tool_calls)
                ]
        except (AttributeError, TypeError) as exc:
            raise MalformedResponse(f"tool calls of an unknown shape ({exc})") from exc
        usage = getattr(response, "usage", None)
        if usage and isinstance(getattr(usage, "prompt_tokens", None), int):
            return ChatResult(message=message, prompt_tokens=usage.prompt_tokens or 0,
                              completion_tokens=usage.completion_tokens or 0)
        # Some servers send no usage: estimate it the same way as the full-definition baseline.
        return ChatResult(message=message, prompt_tokens=estimate_messages_tokens(messages, tools),
                          completion_tokens=estimate_messages_tokens([message]), estimated=True)

    def complete(self, prompt: str, *, max_tokens: int | None = None, temperature: float | None = None) -> str:
        """One plain answer; max_tokens: more room than the run's line length (a judgement with reflections);
        temperature: other than the run's (a consolidation's summary asks for 0.3)."""
        extra = {"max_tokens": max_tokens} if max_tokens else {}
        if temperature is not None:
            extra["temperature"] = temperature
        _response, choice = self._completion([{"role": "user", "content": prompt}], None, **extra)
        return choice.content if isinstance(choice.content, str) else ""

    def pick_speaker(self, *, candidates, transcript):
        lines = "\n".join(f"{speaker}: {text}" for _n, speaker, text in transcript[-8:]) or "(nobody has spoken yet)"
        messages = [
            {"role": "system", "content": "You direct a conversation. Answer with one name only."},
            {"role": "user", "content": f"Conversation so far:\n{lines}\n\nWho should speak next? Choose one of: "
                                        f"{', '.join(candidates)}. Answer with the name only."},
        ]
        response, choice = self._completion(messages, None, max_tokens=16)
        text = choice.content if isinstance(choice.content, str) else ""
        usage = getattr(response, "usage", None)
        result = ChatResult(message={"role": "assistant", "content": text},
                            prompt_tokens=(usage.prompt_tokens if usage else 0) or estimate_messages_tokens(messages),
                            completion_tokens=(usage.completion_tokens if usage else 0) or 0)
        for name in sorted(candidates, key=len, reverse=True):
            if re.search(rf"\b{re.escape(name)}\b", text, re.IGNORECASE):
                return name, result
        return None, result


class MalformedResponse(ProviderError):
    """A 200 that is not a chat completion (a proxy's HTML page, a truncated body): retried, like a 5xx."""

    def __init__(self, what: str):
        super().__init__(f"the LLM server's reply was not a chat completion: {what}", retryable=True)


def _excerpt(value, limit: int = 120) -> str:
    if hasattr(value, "model_dump_json"):  # what the server sent, not the client's Python repr
        value = value.model_dump_json(exclude_none=True)
    text = value.decode(errors="replace") if isinstance(value, bytes) else str(value)
    text = " ".join(text.split())
    return repr(text[:limit] + ("…" if len(text) > limit else ""))


def _detail(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict):
            return str(error.get("message") or error)
        return str(error)
    return str(exc.message or exc)
