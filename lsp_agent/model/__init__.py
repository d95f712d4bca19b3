"""Model endpoints: OpenAI-compatible chat completions and Anthropic Messages, streamed.

The core speaks OpenAI chat-format messages (`lsp_agent.messages`) everywhere; a `Provider`
sends them, streams the reply's text to `on_text` as it arrives, assembles tool calls, and returns
a `Reply` with token usage (read from the server, or estimated when the server does not say).
When the endpoint fails or answers something that is not a reply, the turn ends with a
`ProviderError` whose message is one sentence that says what the endpoint did and what to check.

- `http.py`: what both dialects share: the requests, retries with backoff and `Retry-After`,
  which fault is which; `faults.py`: the sentence the user reads for each.
- `client.py`: the httpx client a provider sends through, with what is ours beside it (the
  certificates, the route through a proxy, headers checked); `body.py`: an answer's body read
  raw, capped and expanded a piece at a time.
- `stream.py`: reading a reply: SSE lines in bounded slices, the reply being assembled, the text
  passed on to the editor.
- `encoding.py`: request bodies, each stored message encoded once.
- `openai.py`, `anthropic.py`: the two dialects.

This module is the face, and loads no HTTP code: `make_provider` imports it when a provider is
made, so the context layers and an idle server do without the HTTP client.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from lsp_agent.errors import UserError

if TYPE_CHECKING:
    from lsp_agent.messages import Reply

BASE_URL_SETTING = "lspAgent.baseUrl or LSP_AGENT_BASE_URL"
API_KEY_SETTING = "lspAgent.apiKey or LSP_AGENT_API_KEY"
MODEL_SETTING = "lspAgent.model or LSP_AGENT_MODEL"
PROVIDER_SETTING = "lspAgent.provider or LSP_AGENT_PROVIDER"
CONTEXT_SETTING = "lspAgent.contextWindow or CONTEXT_WINDOW"
TOOL_MODELS = "qwen2.5-coder:7b or llama3.1"
"""Well-known local models that call tools reliably (Ollama names), suggested to the user."""


class ProviderError(UserError):
    """The model endpoint failed; the turn ends and the user reads `message`."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        """One sentence that says what went wrong and what to fix (which URL, which setting)."""
        self.status = status
        """The HTTP status the endpoint answered, or None when it never answered."""


TextSink = Callable[[str], None]
"""Receives each text delta of the reply as it arrives."""


class Provider(Protocol):
    """A model endpoint the agent loop can call."""

    name: str
    """`openai` or `anthropic`."""
    model: str
    base_url: str

    async def complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], on_text: TextSink
    ) -> Reply:
        """Send the request, stream the text to `on_text`, return the whole reply."""
        ...

    async def list_models(self) -> list[str]:
        """The model names the endpoint offers."""
        ...

    async def aclose(self) -> None:
        """Close the HTTP client."""
        ...


def make_provider(
    provider: str,
    base_url: str,
    model: str,
    api_key: str | None,
    *,
    retries: int = 4,
    base_delay: float = 1.0,
    max_delay: float = 30.0,
    max_retry_after: float = 60.0,
    connect_timeout: float = 10.0,
    read_timeout: float = 300.0,
    max_tokens: int = 8192,
    max_reply_bytes: int | None = None,
) -> Provider:
    """The provider named by the `provider` setting (`openai` or `anthropic`);
    `max_reply_bytes` bounds one answer, as received and once expanded (256 MiB by default)."""
    options: dict[str, Any] = {
        "retries": retries,
        "base_delay": base_delay,
        "max_delay": max_delay,
        "max_retry_after": max_retry_after,
        "connect_timeout": connect_timeout,
        "read_timeout": read_timeout,
    }
    if max_reply_bytes is not None:
        options["max_reply_bytes"] = max_reply_bytes
    kind = provider.strip().lower()
    if kind == "openai":
        from lsp_agent.model.openai import OpenAIProvider

        return OpenAIProvider(base_url, model, api_key, **options)
    if kind == "anthropic":
        from lsp_agent.model.anthropic import AnthropicProvider

        return AnthropicProvider(base_url, model, api_key, max_tokens=max_tokens, **options)
    raise ProviderError(
        f"unknown provider '{provider}': set {PROVIDER_SETTING} to openai or anthropic"
    )


__all__ = [
    "API_KEY_SETTING",
    "BASE_URL_SETTING",
    "CONTEXT_SETTING",
    "MODEL_SETTING",
    "PROVIDER_SETTING",
    "TOOL_MODELS",
    "Provider",
    "ProviderError",
    "TextSink",
    "make_provider",
]
