"""The API key goes only where it was set for, or where the user said yes, asked once."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from lsp_agent.agent.endpoint import KeyGate
from lsp_agent.config import Settings, load_settings
from lsp_agent.model import ProviderError
from lsp_agent.safety.endpoints import (
    ANSWER_REFUSE,
    ANSWER_SEND,
    Approvals,
    bound,
    host,
    origin,
)
from lsp_agent.testing import MemoryPort

KEY = "sk-live-endpoint-0123"


def settings(tmp_path: Path, editor: dict[str, str], environ: dict[str, str]) -> Settings:
    loaded, _ = load_settings(editor, environ=environ, env_file=tmp_path / "no-env-file")
    return loaded


def test_endpoints_compare_by_scheme_host_and_port() -> None:
    assert origin("https://API.openai.com/v1") == origin("https://api.openai.com:443/v2")
    assert origin("http://api.openai.com/v1") != origin("https://api.openai.com/v1")
    assert origin("http://127.0.0.1:8000/v1") != origin("http://127.0.0.1:8001/v1")
    assert origin("https://user:pw@evil.example/v1") == origin("https://evil.example")
    assert host("http://127.0.0.1:8000/v1") == "127.0.0.1:8000"
    assert host("https://evil.example/v1") == "evil.example"


def is_bound(chosen: Settings) -> bool:
    source = chosen.sources.get("apiKey", "default")
    return bound(chosen.api_key, source, chosen.key_endpoint, chosen.base_url)


def test_a_key_from_the_environment_is_bound_to_its_own_endpoint_only(tmp_path: Path) -> None:
    environ = {"LSP_AGENT_API_KEY": KEY, "LSP_AGENT_BASE_URL": "https://models.example/v1"}
    assert is_bound(settings(tmp_path, {}, environ))
    assert is_bound(settings(tmp_path, {"baseUrl": "https://models.example/v2"}, environ))
    assert not is_bound(settings(tmp_path, {"baseUrl": "https://evil.example/v1"}, environ))
    assert not is_bound(settings(tmp_path, {"apiKey": KEY}, environ))  # the editor's key
    assert is_bound(settings(tmp_path, {"baseUrl": "https://evil.example/v1"}, {}))  # no key
    assert is_bound(Settings(api_key=KEY, base_url="https://any.example"))  # made in code


async def test_the_user_is_asked_once_per_endpoint_and_a_yes_is_kept(tmp_path: Path) -> None:
    approvals = Approvals(tmp_path / "state" / "endpoints.json")
    port = MemoryPort(answer=ANSWER_SEND)
    gate = KeyGate(approvals, port)
    chosen = settings(tmp_path, {"apiKey": KEY, "baseUrl": "http://127.0.0.1:9/v1"}, {})

    await gate.check(chosen)
    await gate.check(chosen)

    ((question, actions),) = port.questions
    assert "127.0.0.1:9" in question
    assert tuple(actions) == (ANSWER_SEND, ANSWER_REFUSE)
    assert KEY not in approvals.path.read_text()  # a hash, never the key
    assert stat.S_IMODE(approvals.path.stat().st_mode) == 0o600
    again = KeyGate(Approvals(approvals.path), MemoryPort(answer=ANSWER_REFUSE))
    await again.check(chosen)  # another server: kept, not asked
    assert again.port.questions == []  # type: ignore[attr-defined]


@pytest.mark.parametrize("answer", [ANSWER_REFUSE, None], ids=["refused", "dismissed"])
async def test_a_no_or_no_answer_refuses_and_is_not_asked_again(
    tmp_path: Path, answer: str | None
) -> None:
    port = MemoryPort(answer=answer)
    gate = KeyGate(Approvals(tmp_path / "endpoints.json"), port)
    environ = {"LSP_AGENT_API_KEY": KEY, "LSP_AGENT_BASE_URL": "https://models.example/v1"}
    moved = settings(tmp_path, {"baseUrl": "https://evil.example/v1"}, environ)

    for _ in range(2):
        with pytest.raises(ProviderError) as refused:
            await gate.check(moved)
        assert "not sent to evil.example" in refused.value.message

    ((question, _),) = port.questions
    assert "evil.example" in question
    assert "set for models.example" in question
    assert not (tmp_path / "endpoints.json").exists()
