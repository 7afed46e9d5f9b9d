"""The `openai` provider: the `openai` client against any OpenAI-compatible server.

Ollama, LM Studio, vLLM, llama.cpp's server and OpenAI itself all speak /v1/chat/completions.
The client's own retries are off (max_retries=0): the engine retries with backoff itself so that
every failure is recorded on the turn.
"""

from __future__ import annotations

import re

import openai

from chronicle.simulation.providers.base import (
    ChatResult,
    Provider,
    ProviderError,
    ToolsUnsupported,
    TurnHints,
    estimate_messages_tokens,
)

TOOLS_REFUSED = re.compile(r"tool|function", re.IGNORECASE)


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
        self.client = openai.OpenAI(base_url=base_url, api_key=api_key or "not-needed", timeout=timeout, max_retries=0)

    @classmethod
    def for_simulation(cls, simulation) -> "OpenAIProvider":
        from django.conf import settings

        from wonda_site.crypto import decryption_error

        return cls(base_url=simulation.base_url or settings.LLM_BASE_URL, api_key=simulation.api_key or settings.LLM_API_KEY,
                   model=simulation.model or settings.LLM_MODEL, timeout=simulation.timeout_s or settings.LLM_TIMEOUT,
                   temperature=simulation.temperature, max_tokens=simulation.max_tokens, seed=simulation.seed,
                   key_error=decryption_error(simulation.api_key))

    def _create(self, messages: list[dict], tools: list[dict] | None, *, max_tokens: int | None = None,
                allow_tools: bool = True):
        if self.key_error:
            raise ProviderError(self.key_error, retryable=False)
        kwargs: dict = {"model": self.model, "messages": messages}
        if tools:
            kwargs["tools"] = tools
            if not allow_tools:
                kwargs["tool_choice"] = "none"  # the tool-call budget is spent: speak now
        if self.temperature is not None:
            kwargs["temperature"] = self.temperature
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

    def chat(self, messages: list[dict], *, tools: list[dict] | None, allow_tools: bool = True,
             hints: TurnHints) -> ChatResult:
        response = self._create(messages, tools, allow_tools=allow_tools)
        if not response.choices:
            raise ProviderError("the LLM server returned no choices", retryable=True)
        choice = response.choices[0].message
        message: dict = {"role": "assistant", "content": choice.content}
        if choice.tool_calls:
            message["tool_calls"] = [
                {"id": call.id or f"call_{i}", "type": "function",
                 "function": {"name": call.function.name or "", "arguments": call.function.arguments or ""}}
                for i, call in enumerate(choice.tool_calls)
            ]
        usage = response.usage
        if usage and usage.prompt_tokens is not None:
            return ChatResult(message=message, prompt_tokens=usage.prompt_tokens or 0,
                              completion_tokens=usage.completion_tokens or 0)
        # Some servers send no usage: estimate it the same way as the full-definition baseline.
        return ChatResult(message=message, prompt_tokens=estimate_messages_tokens(messages),
                          completion_tokens=estimate_messages_tokens([message]), estimated=True)

    def pick_speaker(self, *, candidates, transcript, hints_last=None):
        lines = "\n".join(f"{speaker}: {text}" for _n, speaker, text in transcript[-8:]) or "(nobody has spoken yet)"
        messages = [
            {"role": "system", "content": "You direct a conversation. Answer with one name only."},
            {"role": "user", "content": f"Conversation so far:\n{lines}\n\nWho should speak next? Choose one of: "
                                        f"{', '.join(candidates)}. Answer with the name only."},
        ]
        response = self._create(messages, None, max_tokens=16)
        text = (response.choices[0].message.content or "") if response.choices else ""
        usage = response.usage
        result = ChatResult(message={"role": "assistant", "content": text},
                            prompt_tokens=(usage.prompt_tokens if usage else 0) or estimate_messages_tokens(messages),
                            completion_tokens=(usage.completion_tokens if usage else 0) or 0)
        for name in sorted(candidates, key=len, reverse=True):
            if re.search(rf"\b{re.escape(name)}\b", text, re.IGNORECASE):
                return name, result
        return None, result


def _detail(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict):
            return str(error.get("message") or error)
        return str(error)
    return str(exc.message or exc)
