"""The model endpoint behind a key check: no request carries the API key to an endpoint it was
not set for unless the user said yes (`safety.endpoints`).

`KeyGate` holds a workspace agent's answers; `KeyCheckedProvider` wraps the provider the
settings make and checks with the gate before every call that goes out (a completion, the model
list). A refusal ends the call with a `ProviderError` that names the host: nothing was sent,
neither the key nor the conversation.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from lsp_agent.config import DEFAULT, Settings
from lsp_agent.model import ProviderError, TextSink
from lsp_agent.port import EditorPort
from lsp_agent.safety.endpoints import (
    ANSWER_SEND,
    ANSWERS,
    Approvals,
    bound,
    host,
    origin,
    question,
)

if TYPE_CHECKING:
    from lsp_agent.messages import Reply
    from lsp_agent.model import Provider


class KeyGate:
    """One workspace agent's decisions on where the key may go."""

    def __init__(self, approvals: Approvals, port: EditorPort) -> None:
        self.approvals = approvals
        """The user's yeses, kept across servers."""
        self.port = port
        """Where the question goes."""
        self._refused: set[tuple[str, str]] = set()
        """(key, origin) pairs the user said no to (or did not answer): not asked again."""
        self._lock = asyncio.Lock()
        """One question at a time: calls waiting on the same endpoint hear one answer."""

    async def check(self, settings: Settings) -> None:
        """Return when the key may go to `settings.base_url`; `ProviderError` when not."""
        key = settings.api_key
        key_source = settings.sources.get("apiKey", DEFAULT)
        if key is None or bound(key, key_source, settings.key_endpoint, settings.base_url):
            return
        pair = (key, origin(settings.base_url))
        async with self._lock:
            if pair in self._refused:
                raise self._refusal(settings)
            if await asyncio.to_thread(self.approvals.approved, key, settings.base_url):
                return
            self.port.log(f"lsp-agent: asking before the API key goes to {host(settings.base_url)}")
            try:
                asked = question(
                    key_source,
                    settings.sources.get("baseUrl", DEFAULT),
                    settings.key_endpoint,
                    settings.base_url,
                )
                answer = await asyncio.wait_for(
                    self.port.ask_user(asked, ANSWERS), settings.question_timeout
                )
            except TimeoutError:
                answer = None
            if answer != ANSWER_SEND:
                self._refused.add(pair)
                raise self._refusal(settings)
            try:
                await asyncio.to_thread(self.approvals.approve, key, settings.base_url)
            except OSError as error:  # the yes holds for this server, asked again next time
                self.port.log(f"lsp-agent: could not keep the approval ({error})")

    def _refusal(self, settings: Settings) -> ProviderError:
        return ProviderError(
            f"the API key was not sent to {host(settings.base_url)} ({settings.base_url}): it "
            "was not set for that endpoint and you did not approve it. If the endpoint is "
            "yours, set lspAgent.baseUrl in your user settings (or LSP_AGENT_BASE_URL) and "
            "answer the question with "
            f"'{ANSWER_SEND}'; nothing was sent."
        )


class KeyCheckedProvider:
    """A provider whose every call first asks the gate whether the key may go."""

    def __init__(self, inner: Provider, gate: KeyGate, settings: Settings) -> None:
        self.inner = inner
        """The provider the settings made."""
        self.gate = gate
        self.settings = settings
        """The settings `inner` was made from (the key and the endpoint)."""
        self.name = inner.name
        self.model = inner.model
        self.base_url = inner.base_url

    async def complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], on_text: TextSink
    ) -> Reply:
        await self.gate.check(self.settings)
        return await self.inner.complete(messages, tools, on_text)

    async def list_models(self) -> list[str]:
        await self.gate.check(self.settings)
        return await self.inner.list_models()

    async def aclose(self) -> None:
        await self.inner.aclose()

    def __getattr__(self, name: str) -> Any:
        # What else the turn reads of a provider (usage figures, the dialect's options).
        return getattr(self.inner, name)
