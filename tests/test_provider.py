"""The provider against a real HTTP endpoint on loopback: streaming, tool calls, usage, faults."""

from __future__ import annotations

import asyncio
import json
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Sequence
from email.utils import formatdate
from pathlib import Path
from typing import Any

import certifi
import httpx
import pytest

from lsp_agent.messages import NAMELESS_TOOL, Reply, Usage, cached_tokens, estimate_tokens
from lsp_agent.model import BASE_URL_SETTING, Provider, ProviderError, make_provider
from lsp_agent.model.anthropic import AnthropicProvider, to_anthropic
from lsp_agent.model.client import tls_context
from lsp_agent.model.faults import retry_after_seconds
from lsp_agent.model.openai import OpenAIProvider
from lsp_agent.model.stream import TEXT_SLICE
from tests.editor import server_env
from tests.fake_model import (
    Error,
    ScriptedAnthropic,
    ScriptedModel,
    break_after,
    chunk,
    disconnect,
    empty_stream,
    error,
    flood,
    hang_after,
    page,
    raw_stream,
    refuse_stream_with_tools,
    reply,
    text_chunks,
    tool_call,
    tool_calls,
)

READ_FILE: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "read_file",
        "description": "Read a file.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
    },
}
SEARCH: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "search",
        "description": "Search the workspace.",
        "parameters": {"type": "object", "properties": {"pattern": {"type": "string"}}},
    },
}
ASK = [{"role": "system", "content": "You are a test."}, {"role": "user", "content": "hi"}]

Open = Callable[..., Provider]


@pytest.fixture
async def open_provider() -> AsyncIterator[Open]:
    """Make providers with fast retries; all are closed when the test ends."""
    made: list[Provider] = []

    def factory(
        base_url: str,
        model: str = "test-model",
        api_key: str | None = None,
        kind: str = "openai",
        **options: Any,
    ) -> Provider:
        options.setdefault("base_delay", 0.001)
        provider = make_provider(kind, base_url, model, api_key, **options)
        made.append(provider)
        return provider

    yield factory
    for provider in made:
        await provider.aclose()


async def ask(
    provider: Provider,
    messages: list[dict[str, Any]] = ASK,
    tools: Sequence[dict[str, Any]] = (),
) -> tuple[Reply, list[str]]:
    """One model call; returns the reply and the text deltas `on_text` received."""
    chunks: list[str] = []
    result = await provider.complete(messages, list(tools), chunks.append)
    return result, chunks


async def refusal(
    open_provider: Open, *steps: Any, tools: Sequence[dict[str, Any]] = ()
) -> tuple[str, ScriptedModel]:
    """The sentence a call ends with when the endpoint answers `steps`, and the endpoint."""
    with ScriptedModel(list(steps)) as model, pytest.raises(ProviderError) as caught:
        await ask(open_provider(model.base_url), tools=list(tools))
    return caught.value.message, model


def free_port() -> int:
    """A port nobody listens on: bound, then closed."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# Streaming and assembly


async def test_the_answer_reaches_the_editor_while_the_model_is_still_writing(
    open_provider: Open,
) -> None:
    with ScriptedModel([hang_after("The bug is on line 3.")]) as model:
        shown = asyncio.Event()
        chunks: list[str] = []

        def on_text(text: str) -> None:
            chunks.append(text)
            shown.set()

        task = asyncio.create_task(open_provider(model.base_url).complete(ASK, [], on_text))
        await asyncio.wait_for(shown.wait(), 5)
        assert not task.done()  # the endpoint has not finished its reply
        model.release()
        answer = await task
    assert "".join(chunks) == answer.text == "The bug is on line 3."


async def test_one_connection_serves_call_after_call(open_provider: Open) -> None:
    script = [reply("one"), tool_call("read_file", {"path": "a.py"}), reply("three")]
    with ScriptedModel(script) as model:
        provider = open_provider(model.base_url)
        for _ in script:
            await ask(provider, tools=[READ_FILE])
    assert len({timing.peer for timing in model.timings}) == 1


async def test_the_tools_sent_follow_the_list_each_call_gives(open_provider: Open) -> None:
    """The tools' bytes are kept between calls; a skill loaded mid-session changes the list."""
    offered = [READ_FILE]
    with ScriptedModel([reply("one"), reply("two"), reply("three")]) as model:
        provider = open_provider(model.base_url)
        await ask(provider, tools=offered)
        await ask(provider, tools=[*offered, SEARCH])
        await ask(provider, tools=offered)
    names = [[t["function"]["name"] for t in body["tools"]] for body in model.requests]
    assert names == [["read_file"], ["read_file", "search"], ["read_file"]]


async def test_the_answer_streams_to_the_editor_in_order(open_provider: Open) -> None:
    with ScriptedModel([reply("The bug is on line 3.", chunks=4)]) as model:
        answer, chunks = await ask(open_provider(model.base_url))
    assert 1 <= len(chunks) <= 4  # deltas that arrive in one network read are passed on together
    assert "".join(chunks) == answer.text == "The bug is on line 3."
    assert answer.finish_reason == "stop"
    assert answer.tool_calls == ()
    sent = model.requests[0]
    assert sent["stream"] is True
    assert sent["stream_options"] == {"include_usage": True}
    assert sent["messages"] == ASK
    assert "tools" not in sent


async def test_two_interleaved_tool_calls_are_assembled_by_index(open_provider: Open) -> None:
    calls = tool_calls(
        [("read_file", {"path": "src/app.py"}, "call_a"), ("search", {"pattern": "def main"})],
        text="Let me look.",
        chunks=4,
    )
    with ScriptedModel([calls]) as model:
        answer, chunks = await ask(open_provider(model.base_url), tools=[READ_FILE, SEARCH])
    assert "".join(chunks) == "Let me look."
    assert answer.finish_reason == "tool_calls"
    assert [(c.name, json.loads(c.arguments)) for c in answer.tool_calls] == [
        ("read_file", {"path": "src/app.py"}),
        ("search", {"pattern": "def main"}),
    ]
    assert answer.tool_calls[0].id == "call_a"
    assert answer.tool_calls[1].id
    assert answer.tool_calls[1].id != "call_a"
    assert answer.message() == {
        "role": "assistant",
        "content": "Let me look.",
        "tool_calls": [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for call in answer.tool_calls
        ],
    }
    assert model.requests[0]["tools"] == [READ_FILE, SEARCH]


async def test_malformed_tool_arguments_are_kept_raw_for_the_loop_to_judge(
    open_provider: Open,
) -> None:
    with ScriptedModel([tool_call("read_file", '{"path": "a.py"', chunks=2)]) as model:
        answer, _ = await ask(open_provider(model.base_url), tools=[READ_FILE])
    assert answer.tool_calls[0].arguments == '{"path": "a.py"'


async def test_a_reply_with_only_tool_calls_stores_empty_content_not_null(
    open_provider: Open,
) -> None:
    with ScriptedModel([tool_call("read_file", {"path": "a.py"})]) as model:
        answer, chunks = await ask(open_provider(model.base_url), tools=[READ_FILE])
    assert chunks == []
    assert answer.message()["content"] == ""


async def test_a_step_can_answer_what_it_was_sent(open_provider: Open) -> None:
    def echo(body: dict[str, Any]) -> Any:
        return reply(f"you said {body['messages'][-1]['content']}")

    with ScriptedModel([echo]) as model:
        answer, _ = await ask(open_provider(model.base_url))
    assert answer.text == "you said hi"


async def test_a_failing_step_function_fails_the_call_loudly(open_provider: Open) -> None:
    def broken(body: dict[str, Any]) -> Any:
        raise AssertionError("the test expected a tool result")

    model = ScriptedModel([broken])
    with model, pytest.raises(ProviderError) as caught:
        await ask(open_provider(model.base_url))
    assert "the test expected a tool result" in caught.value.message
    assert len(model.requests) == 1


# Usage


async def test_usage_is_read_with_cached_tokens(open_provider: Open) -> None:
    with ScriptedModel([reply("ok", prompt_tokens=1234, cached_tokens=1000)]) as model:
        answer, _ = await ask(open_provider(model.base_url))
    assert answer.usage == Usage(
        prompt_tokens=1234, completion_tokens=1, cached_tokens=1000, estimated=False
    )


async def test_missing_usage_is_estimated_from_the_bytes_sent(open_provider: Open) -> None:
    with ScriptedModel([reply("x" * 35, usage=False)]) as model:
        answer, _ = await ask(open_provider(model.base_url), tools=[READ_FILE])
    assert answer.usage.estimated is True
    assert answer.usage.cached_tokens is None
    assert answer.usage.completion_tokens == 10
    assert answer.usage.prompt_tokens == estimate_tokens(len(model.bodies[0]))


def test_estimate_is_bytes_over_three_and_a_half_rounded_up() -> None:
    assert estimate_tokens(0) == 0
    assert estimate_tokens(1) == 1
    assert estimate_tokens(7) == 2
    assert estimate_tokens(8) == 3
    assert estimate_tokens(350_000) == 100_000
    assert estimate_tokens("é") == 1  # two bytes
    assert estimate_tokens("abcdefg") == 2
    assert estimate_tokens(b"abcdefgh") == 3


def test_cached_tokens_are_read_in_all_three_shapes() -> None:
    assert cached_tokens({"prompt_tokens_details": {"cached_tokens": 5}}) == 5
    assert cached_tokens({"cache_read_input_tokens": 6, "input_tokens": 1}) == 6
    assert cached_tokens({"prompt_cache_hit_tokens": 7, "prompt_cache_miss_tokens": 3}) == 7
    assert cached_tokens({"prompt_tokens": 10, "prompt_tokens_details": None}) is None
    assert cached_tokens({}) is None


# Faults that are retried


async def test_a_server_error_is_retried_and_the_turn_goes_on(open_provider: Open) -> None:
    with ScriptedModel([error(500), error(503), reply("recovered")]) as model:
        answer, chunks = await ask(open_provider(model.base_url))
    assert answer.text == "recovered"
    assert "".join(chunks) == "recovered"
    assert len(model.requests) == 3


async def test_rate_limit_waits_as_long_as_retry_after_says(open_provider: Open) -> None:
    with ScriptedModel([error(429, headers={"Retry-After": "1"}), reply("ok")]) as model:
        started = time.monotonic()
        answer, _ = await ask(open_provider(model.base_url, base_delay=0.001))
        waited = time.monotonic() - started
    assert answer.text == "ok"
    assert waited >= 0.9  # the backoff alone would be a millisecond


async def test_retries_are_bounded_and_the_error_quotes_the_server(open_provider: Open) -> None:
    failure = error(500, {"error": {"message": "CUDA error: out of memory"}})
    with ScriptedModel([failure] * 6) as model, pytest.raises(ProviderError) as caught:
        await ask(open_provider(model.base_url, retries=4))
    assert len(model.requests) == 5
    assert caught.value.status == 500
    assert "CUDA error: out of memory" in caught.value.message
    assert "after 4 retries" in caught.value.message
    assert model.base_url in caught.value.message


async def test_a_retry_after_of_an_hour_fails_at_once(open_provider: Open) -> None:
    model = ScriptedModel([error(429, headers={"Retry-After": "3600"}), reply("no")])
    with model, pytest.raises(ProviderError) as caught:
        await ask(open_provider(model.base_url))
    assert len(model.requests) == 1
    assert caught.value.status == 429
    assert "3600 s" in caught.value.message


async def test_a_connection_dropped_before_any_byte_is_retried(open_provider: Open) -> None:
    with ScriptedModel([disconnect(), reply("ok")]) as model:
        answer, _ = await ask(open_provider(model.base_url))
    assert answer.text == "ok"
    assert len(model.requests) == 2


async def test_a_stream_broken_mid_reply_is_retried_without_repeating_text(
    open_provider: Open,
) -> None:
    with ScriptedModel([break_after("Hello wo"), reply("Hello world!", chunks=5)]) as model:
        answer, chunks = await ask(open_provider(model.base_url))
    assert answer.text == "Hello world!"
    assert "".join(chunks) == "Hello world!"
    assert len(model.requests) == 2


async def test_a_retried_stream_that_says_something_else_is_shown_in_full(
    open_provider: Open,
) -> None:
    with ScriptedModel([break_after("Hello"), reply("Goodbye")]) as model:
        answer, chunks = await ask(open_provider(model.base_url))
    assert answer.text == "Goodbye"
    assert "".join(chunks) == "HelloGoodbye"


async def test_a_stream_that_breaks_twice_ends_the_turn(open_provider: Open) -> None:
    model = ScriptedModel([break_after("a"), break_after("b"), reply("never")])
    with model, pytest.raises(ProviderError) as caught:
        await ask(open_provider(model.base_url))
    assert "broke off twice" in caught.value.message
    assert len(model.requests) == 2


async def test_running_out_of_script_fails_loudly_and_is_not_retried(
    open_provider: Open,
) -> None:
    with ScriptedModel([]) as model, pytest.raises(ProviderError) as caught:
        await ask(open_provider(model.base_url))
    assert "script exhausted" in caught.value.message
    assert len(model.requests) == 1


# Replies that make no sense end the turn with a sentence, and are not retried


LOGIN_PAGE = (
    "<!DOCTYPE html><html><head><title>Sign in · Acme SSO</title></head>"
    "<body><form>user <input name=u></form></body></html>"
)


async def test_a_login_page_answered_with_200_is_named_a_web_page(open_provider: Open) -> None:
    message, model = await refusal(open_provider, page(LOGIN_PAGE), reply("never"))
    assert f"{model.base_url}/chat/completions answered 200 with a web page" in message
    assert "'Sign in · Acme SSO'" in message
    assert "lspAgent.baseUrl" in message
    assert "/v1" in message
    assert "broke off" not in message
    assert len(model.requests) == 1


async def test_an_empty_stream_is_tried_once_more_then_said(open_provider: Open) -> None:
    message, model = await refusal(open_provider, empty_stream(), empty_stream(), reply("never"))
    assert "answered twice with an empty stream" in message
    assert "server's log" in message
    assert len(model.requests) == 2


async def test_an_empty_stream_once_is_retried_and_the_turn_goes_on(open_provider: Open) -> None:
    with ScriptedModel([empty_stream(), reply("Fine.")]) as model:
        answer, _ = await ask(open_provider(model.base_url))
    assert answer.text == "Fine."


async def test_a_stream_without_choices_is_not_taken_for_an_empty_answer(
    open_provider: Open,
) -> None:
    other_api = [{"type": "response.output_text.delta", "delta": "Hi"}] * 3
    message, model = await refusal(open_provider, raw_stream(*other_api))
    assert "streamed 3 events, none of them a chat-completion chunk with `choices`" in message
    assert "response.output_text.delta" in message  # the first one is quoted
    assert "lspAgent.provider" in message
    assert len(model.requests) == 1


async def test_a_delta_that_is_a_string_is_said_plainly(open_provider: Open) -> None:
    message, _ = await refusal(open_provider, raw_stream(chunk("Hello"), chunk({}, "stop")))
    assert "sent a chunk whose `delta` is 'Hello', not an object" in message
    assert "internal" not in message


async def test_a_tool_call_index_that_is_not_a_number_runs_no_call(open_provider: Open) -> None:
    def call(index: Any, **fields: Any) -> dict[str, Any]:
        return chunk({"tool_calls": [{"index": index, **fields}]})

    stream = raw_stream(
        call("0", id="a", type="function", function={"name": "read_file", "arguments": ""}),
        call("1", id="b", type="function", function={"name": "search", "arguments": ""}),
        call("0", function={"arguments": '{"path": "a.py"}'}),
        call("1", function={"arguments": '{"pattern": "x"}'}),
        chunk({}, "tool_calls"),
    )
    message, _ = await refusal(open_provider, stream, tools=[READ_FILE, SEARCH])
    assert "tool-call delta whose index is '0', not a whole number" in message


async def test_a_tool_call_without_a_name_is_kept_under_a_name_that_says_so(
    open_provider: Open,
) -> None:
    """The model is told of it as the call's result (the turn goes on); the stored call needs a
    name for the endpoint to take the session's later requests."""
    nameless = chunk({"tool_calls": [{"index": 0, "id": "a", "function": {"arguments": "{}"}}]})
    stream = raw_stream(nameless, chunk({}, "tool_calls"))
    with ScriptedModel([stream]) as model:
        answer, _ = await ask(open_provider(model.base_url), tools=[READ_FILE])
    assert [(c.id, c.name, c.arguments) for c in answer.tool_calls] == [("a", NAMELESS_TOOL, "{}")]


async def test_json_that_is_not_a_completion_is_quoted(open_provider: Open) -> None:
    status = page('{"status": "ok"}', content_type="application/json")
    message, _ = await refusal(open_provider, status)
    assert "answered 200 with JSON that is not a chat completion" in message
    assert '"status": "ok"' in message


async def test_a_body_that_is_no_event_stream_is_quoted(open_provider: Open) -> None:
    message, _ = await refusal(open_provider, page("upstream says hi", content_type="text/plain"))
    assert "bytes that are not an event stream (upstream says hi)" in message


# Text that cannot be encoded is repaired where it enters


async def test_an_emoji_split_across_two_chunks_arrives_whole(open_provider: Open) -> None:
    stream = raw_stream(*text_chunks("Done ", "\ud83d", "\ude00", " and dusted."))
    with ScriptedModel([stream]) as model:
        answer, chunks = await ask(open_provider(model.base_url))
    assert answer.text == "Done \U0001f600 and dusted."
    assert "".join(chunks) == answer.text
    for text in chunks:
        text.encode()  # every piece the editor is shown can be encoded
    assert b"\\ud83d" in model.bodies[0] or len(model.bodies) == 1  # the split was sent as is


async def test_a_truly_lone_surrogate_is_replaced_and_noted(
    open_provider: Open, caplog: pytest.LogCaptureFixture
) -> None:
    stream = raw_stream(*text_chunks("a", "\ud83d", "b", "\ude00"))
    with ScriptedModel([stream]) as model, caplog.at_level("WARNING"):
        answer, chunks = await ask(open_provider(model.base_url))
    assert answer.text == "a\ufffdb\ufffd"
    assert "".join(chunks) == answer.text
    assert "2 lone UTF-16 surrogate(s)" in caplog.text


async def test_an_emoji_split_across_tool_call_chunks_arrives_whole(open_provider: Open) -> None:
    def part(arguments: str, **fields: Any) -> dict[str, Any]:
        return chunk({"tool_calls": [{"index": 0, **fields, "function": {"arguments": arguments}}]})

    first = chunk(
        {"tool_calls": [{"index": 0, "id": "a", "function": {"name": "search", "arguments": ""}}]}
    )
    stream = raw_stream(
        first,
        part('{"pattern": "\ud83d'),
        part('\ude00"}'),
        chunk({}, "tool_calls"),
    )
    with ScriptedModel([stream]) as model:
        answer, _ = await ask(open_provider(model.base_url), tools=[SEARCH])
    (call,) = answer.tool_calls
    assert json.loads(call.arguments) == {"pattern": "\U0001f600"}


async def test_a_huge_delta_reaches_the_editor_in_slices(open_provider: Open) -> None:
    with ScriptedModel([flood(300_000, 300_000)]) as model:
        answer, chunks = await ask(open_provider(model.base_url))
    assert len(answer.text) == 300_000
    assert "".join(chunks) == answer.text
    assert max(len(text) for text in chunks) <= TEXT_SLICE
    assert len(chunks) >= 300_000 // TEXT_SLICE


# Faults that end the turn with a sentence


async def test_an_answer_larger_than_any_reply_is_cut_off_with_one_sentence(
    open_provider: Open,
) -> None:
    # Both dialects read their streams through HTTPProvider._read_events.
    with ScriptedModel([flood(3_000_000, 1000), reply("never reached")]) as model:
        provider = open_provider(model.base_url, max_reply_bytes=1 << 20)
        with pytest.raises(ProviderError) as raised:
            await ask(provider)
        assert len(model.requests) == 1  # not retried: the next answer would be no better
    message = str(raised.value)
    assert "was cut off" in message
    assert "larger than 1 MiB" in message
    assert BASE_URL_SETTING in message


async def test_an_endpoint_nobody_listens_on_names_the_url_and_the_setting(
    open_provider: Open,
) -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    with pytest.raises(ProviderError) as caught:
        await ask(open_provider(url))
    message = caught.value.message
    assert caught.value.status is None
    assert f"cannot reach the model endpoint at {url} (could not connect to" in message
    assert "connection refused" in message
    assert "lspAgent.baseUrl" in message
    assert "LSP_AGENT_BASE_URL" in message


async def test_a_base_url_without_scheme_gets_a_sentence(open_provider: Open) -> None:
    with pytest.raises(ProviderError) as caught:
        await ask(open_provider("localhost:11434/v1"))
    assert "not valid" in caught.value.message
    assert "lspAgent.baseUrl" in caught.value.message


async def test_a_wrong_api_key_is_refused_without_ever_showing_it(open_provider: Open) -> None:
    secret = "sk-wrong-secret-1234567890"
    with ScriptedModel([reply("never")], api_key="sk-right") as model:
        provider = open_provider(model.base_url, api_key=secret)
        with pytest.raises(ProviderError) as caught:
            await ask(provider)
    assert any(secret in rejection for rejection in model.rejections)  # the server quoted it
    assert caught.value.status == 401
    assert f"the endpoint {model.base_url} refused the API key" in caught.value.message
    assert "lspAgent.apiKey" in caught.value.message
    assert "LSP_AGENT_API_KEY" in caught.value.message
    for text in (caught.value.message, str(caught.value), repr(caught.value), repr(provider)):
        assert secret not in text
    assert len(model.requests) == 1


async def test_the_api_key_travels_only_in_the_authorization_header(open_provider: Open) -> None:
    with ScriptedModel([reply("ok")], api_key="sk-right") as model:
        provider = open_provider(model.base_url, api_key="sk-right")
        answer, _ = await ask(provider)
    assert answer.text == "ok"
    assert model.headers[0]["authorization"] == "Bearer sk-right"
    assert "sk-right" not in json.dumps(model.requests[0])
    assert "sk-right" not in repr(provider)


async def test_a_key_with_a_line_break_is_said_at_once_and_never_shown(
    open_provider: Open,
) -> None:
    secret = "sk-pasted-1234567890\nsecond-line"
    with ScriptedModel([reply("never")]) as model:
        provider = open_provider(model.base_url, api_key=secret)
        with pytest.raises(ProviderError) as caught:
            await ask(provider)
        assert model.requests == []  # nothing sent, nothing retried
    assert "cannot be sent" in caught.value.message
    assert "'authorization'" in caught.value.message
    assert "lspAgent.apiKey" in caught.value.message
    assert "sk-pasted" not in caught.value.message


async def test_a_proxy_that_refuses_the_tunnel_names_the_proxy_settings(
    open_provider: Open, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An https endpoint behind a proxy from the environment; the proxy answers 407."""
    tunnels: list[bytes] = []

    async def proxy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        tunnels.append(await reader.readuntil(b"\r\n\r\n"))
        writer.write(b"HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 0\r\n\r\n")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(proxy, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    monkeypatch.setenv("HTTPS_PROXY", f"http://user:hunter2@127.0.0.1:{port}")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    provider = open_provider("https://models.example.com/v1")
    async with server:
        with pytest.raises(ProviderError) as caught:
            await ask(provider)
        with pytest.raises(ProviderError) as listing:  # what `lsp-agent doctor` asks
            await provider.list_models()
    assert len(tunnels) == 2, "each went through the proxy once, not retried"
    assert tunnels[0].startswith(b"CONNECT models.example.com:443 HTTP/1.1")
    for message in (caught.value.message, listing.value.message):
        assert "407" in message
        assert "HTTPS_PROXY" in message
        assert "hunter2" not in message


async def test_a_certificate_we_do_not_trust_is_named_with_what_to_do(
    open_provider: Open, tmp_path: Path
) -> None:
    """An https endpoint with a self-signed certificate (as a company's inspecting proxy shows)."""
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-keyout",
            "key.pem",
            "-out",
            "cert.pem",
            "-days",
            "2",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
        ],
        cwd=tmp_path,
        check=True,
        capture_output=True,
    )
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(tmp_path / "cert.pem", tmp_path / "key.pem")

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.close()  # never reached: the client refuses the certificate first

    server = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=tls)
    port = server.sockets[0].getsockname()[1]
    async with server:
        with pytest.raises(ProviderError) as caught:
            await ask(open_provider(f"https://127.0.0.1:{port}/v1"))
    message = caught.value.message
    assert "certificate" in message
    assert "SSL_CERT_FILE" in message
    assert "lspAgent.baseUrl" in message


async def test_a_body_larger_than_a_proxy_accepts_names_the_limit_and_the_setting(
    open_provider: Open,
) -> None:
    """nginx in front of the model answers 413 as soon as it has read the head, then reads the
    rest of the body before it closes (its lingering close), as it does with 1 MB by default."""
    heads: list[bytes] = []

    async def nginx(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        heads.append(head)
        page = b"<html><head><title>413 Request Entity Too Large</title></head></html>"
        writer.write(
            b"HTTP/1.1 413 Request Entity Too Large\r\nContent-Type: text/html\r\n"
            b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(page), page)
        )
        await writer.drain()
        length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
        await reader.readexactly(length)
        writer.close()

    server = await asyncio.start_server(nginx, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    long_ask = [*ASK, {"role": "user", "content": "x" * 2_000_000}]
    async with server:
        with pytest.raises(ProviderError) as caught:
            await ask(open_provider(f"http://127.0.0.1:{port}/v1"), long_ask)
    assert len(heads) == 1  # not retried
    message = caught.value.message
    assert caught.value.status == 413
    assert "(2.0 MB)" in message
    assert "413 Request Entity Too Large" in message
    assert "client_max_body_size" in message
    assert "lspAgent.contextWindow" in message


def test_a_certificate_bundle_that_cannot_be_read_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = tmp_path / "corporate-ca.pem"
    monkeypatch.setenv("SSL_CERT_FILE", str(missing))
    tls_context.cache_clear()
    try:
        with pytest.raises(ProviderError) as caught:
            make_provider("openai", "https://models.example.com/v1", "test-model", None)
    finally:
        tls_context.cache_clear()
    assert f"SSL_CERT_FILE={missing}" in caught.value.message
    assert "cannot be read" in caught.value.message


def test_doctor_names_a_certificate_bundle_that_cannot_be_read(tmp_path: Path) -> None:
    """`lsp-agent doctor` goes through all its checks and says it on the endpoint's line."""
    missing = tmp_path / "corporate-ca.pem"
    (tmp_path / "home").mkdir()
    env = {**server_env(tmp_path / "state", tmp_path / "home"), "SSL_CERT_FILE": str(missing)}
    done = subprocess.run(
        [sys.executable, "-m", "lsp_agent", "doctor", "--json"],
        env={**env, "LSP_AGENT_BASE_URL": "https://models.example.com/v1"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    checks = {check["name"]: check for check in json.loads(done.stdout)["checks"]}
    assert checks["endpoint"]["status"] == "bad"
    assert f"SSL_CERT_FILE={missing}" in checks["endpoint"]["detail"]


def test_the_system_store_and_certifi_are_both_trusted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    tls_context.cache_clear()
    try:
        context = tls_context()
    finally:
        tls_context.cache_clear()
    bundled = ssl.create_default_context(cafile=certifi.where())
    system = ssl.create_default_context()
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert context.check_hostname
    count = context.cert_store_stats()["x509_ca"]
    assert count >= bundled.cert_store_stats()["x509_ca"]
    assert count >= system.cert_store_stats()["x509_ca"]


async def test_an_unknown_model_lists_the_available_ones(open_provider: Open) -> None:
    model = ScriptedModel([reply("never")], models=("llama3", "qwen2.5-coder", "mistral"))
    with model, pytest.raises(ProviderError) as caught:
        await ask(open_provider(model.base_url, model="gpt-5"))
    message = caught.value.message
    assert f"model 'gpt-5' is not available at {model.base_url}" in message
    assert "lspAgent.model" in message
    assert "LSP_AGENT_MODEL" in message
    assert "available: llama3, qwen2.5-coder, mistral" in message


async def test_model_not_found_as_a_400_is_recognised(open_provider: Open) -> None:
    llama_cpp_python = error(
        400,
        {
            "error": {
                "message": "The model `big.gguf` does not exist",
                "type": "invalid_request_error",
                "param": None,
                "code": "model_not_found",
            }
        },
    )
    model = ScriptedModel([llama_cpp_python], models=("test-model", "small.gguf"))
    with model, pytest.raises(ProviderError) as caught:
        await ask(open_provider(model.base_url))
    assert "available: test-model, small.gguf" in caught.value.message


async def test_a_base_url_missing_v1_says_to_check_the_url(open_provider: Open) -> None:
    with ScriptedModel([reply("never")]) as model, pytest.raises(ProviderError) as caught:
        await ask(open_provider(model.base_url.removesuffix("/v1")))
    assert caught.value.status == 404
    assert "lspAgent.baseUrl" in caught.value.message


async def test_a_prompt_over_the_context_window_names_the_setting(open_provider: Open) -> None:
    too_long = error(
        400,
        {
            "error": {
                "message": "This model's maximum context length is 8192 tokens.",
                "code": "context_length_exceeded",
            }
        },
    )
    with ScriptedModel([too_long]) as model, pytest.raises(ProviderError) as caught:
        await ask(open_provider(model.base_url))
    assert "lspAgent.contextWindow" in caught.value.message
    assert "8192" in caught.value.message


async def test_other_client_errors_are_not_retried(open_provider: Open) -> None:
    model = ScriptedModel([error(400, {"error": {"message": "bad temperature"}})])
    with model, pytest.raises(ProviderError) as caught:
        await ask(open_provider(model.base_url))
    assert caught.value.status == 400
    assert "bad temperature" in caught.value.message
    assert len(model.requests) == 1


def test_an_unknown_provider_names_the_setting() -> None:
    with pytest.raises(ProviderError, match="LSP_AGENT_PROVIDER"):
        make_provider("gemini", "http://localhost", "m", None)


# What goes out


async def test_null_assistant_content_is_never_sent(open_provider: Open) -> None:
    history: list[dict[str, Any]] = [
        *ASK,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path": "a.py"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "print('a')"},
    ]
    with ScriptedModel([reply("done")]) as model:
        answer, _ = await ask(open_provider(model.base_url), history, [READ_FILE])
    assert answer.text == "done"
    assert model.requests[0]["messages"][2]["content"] == ""
    assert history[2]["content"] is None  # the caller's history is left alone


async def test_the_fake_refuses_null_content_like_llama_cpp_python() -> None:
    body = {
        "model": "test-model",
        "messages": [
            {"role": "user", "content": "hi"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                ],
            },
            {"role": "tool", "tool_call_id": "c", "content": "x"},
        ],
    }
    with ScriptedModel([reply("never")]) as model:
        async with httpx.AsyncClient() as client:
            answer = await client.post(f"{model.base_url}/chat/completions", json=body)
    assert answer.status_code == 500
    assert model.remaining == 1


@pytest.mark.parametrize(
    ("messages", "fragment"),
    [
        ([{"role": "tool", "tool_call_id": "x", "content": "?"}], "preceeding message"),
        (
            [
                {"role": "user", "content": "hi"},
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [
                        {"id": "c", "type": "function", "function": {"name": "f", "arguments": ""}}
                    ],
                },
                {"role": "user", "content": "and?"},
            ],
            "did not have response messages: c",
        ),
    ],
)
async def test_the_fake_refuses_tool_messages_out_of_order(
    messages: list[dict[str, Any]], fragment: str
) -> None:
    with ScriptedModel([reply("never")]) as model:
        async with httpx.AsyncClient() as client:
            answer = await client.post(
                f"{model.base_url}/chat/completions",
                json={"model": "test-model", "messages": messages},
            )
            missing_model = await client.post(
                f"{model.base_url}/chat/completions", json={"messages": messages}
            )
    assert answer.status_code == 400
    assert fragment in answer.json()["error"]["message"]
    assert missing_model.status_code == 400


async def test_models_are_listed(open_provider: Open) -> None:
    with ScriptedModel(models=("a", "b")) as model:
        assert await open_provider(model.base_url).list_models() == ["a", "b"]


# The llama-cpp-python refusal


async def test_a_server_that_cannot_stream_with_tools_gets_plain_requests_from_then_on(
    open_provider: Open,
) -> None:
    script = [
        refuse_stream_with_tools(),
        tool_call("read_file", {"path": "a.py"}, "call_1", text="Reading a.py."),
        reply("It prints a."),
        reply("Hello", chunks=2),
    ]
    with ScriptedModel(script) as model:
        provider = open_provider(model.base_url)
        first, first_chunks = await ask(provider, tools=[READ_FILE])
        history = [
            *ASK,
            first.message(),
            {"role": "tool", "tool_call_id": "call_1", "content": "print('a')"},
        ]
        second, second_chunks = await ask(provider, history, [READ_FILE])
        _, plain_chunks = await ask(provider)
    assert first.tool_calls[0].name == "read_file"
    assert first_chunks == ["Reading a.py."]
    assert second.text == "It prints a."
    assert second_chunks == ["It prints a."]
    assert [request["stream"] for request in model.requests] == [True, False, False, True]
    assert "stream_options" not in model.requests[1]
    # Without tools, streaming still works (how many pieces depends on the network reads).
    assert "".join(plain_chunks) == "Hello"
    assert second.usage.estimated is False


# Models that cannot call tools


def openai_error(status: int, message: str, kind: str = "invalid_request_error") -> Error:
    """An error in the OpenAI shape, as Ollama, llama.cpp and vLLM send it."""
    return error(status, {"error": {"message": message, "type": kind, "param": None, "code": None}})


async def test_an_ollama_model_without_tools_is_named_and_a_model_that_can_is_suggested(
    open_provider: Open,
) -> None:
    ollama = error(400, {"error": "registry.ollama.ai/library/gemma3:4b does not support tools"})
    with ScriptedModel([ollama], models=("gemma3:4b",)) as model:
        provider = open_provider(model.base_url, model="gemma3:4b")
        with pytest.raises(ProviderError) as caught:
            await ask(provider, tools=[READ_FILE])
    message = caught.value.message
    assert caught.value.status == 400
    assert message.startswith(f"model 'gemma3:4b' at {model.base_url} cannot call tools")
    assert "does not support tools" in message  # what the server said
    assert "qwen2.5-coder:7b or llama3.1" in message
    assert "ollama pull qwen2.5-coder:7b" in message
    assert "lspAgent.model" in message
    assert len(model.requests) == 1  # not retried, and not taken for a streaming refusal
    assert model.requests[0]["stream"] is True


async def test_llama_server_without_jinja_is_told_to_restart_with_it_not_retried(
    open_provider: Open,
) -> None:
    # llama.cpp answers 500, a status that is otherwise worth retrying.
    no_jinja = openai_error(500, "tools param requires --jinja flag", "server_error")
    with ScriptedModel([no_jinja, reply("never")]) as model, pytest.raises(ProviderError) as caught:
        await ask(open_provider(model.base_url), tools=[READ_FILE])
    message = caught.value.message
    assert message.startswith(f"model 'test-model' at {model.base_url} cannot call tools")
    assert "restart llama-server with --jinja" in message
    assert "qwen2.5-coder:7b" in message
    assert len(model.requests) == 1


async def test_vllm_without_tool_parsing_is_told_which_flags_to_start_with(
    open_provider: Open,
) -> None:
    vllm = openai_error(
        400,
        '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set',
    )
    with ScriptedModel([vllm]) as model, pytest.raises(ProviderError) as caught:
        await ask(open_provider(model.base_url), tools=[READ_FILE])
    message = caught.value.message
    assert "'test-model'" in message
    assert "cannot call tools" in message
    assert "restart vLLM with --enable-auto-tool-choice" in message
    assert "--tool-call-parser" in message
    assert "hermes" in message


@pytest.mark.parametrize(
    ("status", "said"),
    [
        (400, "tools is not supported in this model. For a list of supported models, refer to…"),
        (404, "Unrecognized request argument supplied: tools"),
        (404, "No endpoints found that support tool use."),
        (400, "This model does not support function calling"),
    ],
)
async def test_other_servers_refusing_tools_get_the_same_advice(
    open_provider: Open, status: int, said: str
) -> None:
    with (
        ScriptedModel([openai_error(status, said)]) as model,
        pytest.raises(ProviderError) as caught,
    ):
        await ask(open_provider(model.base_url), tools=[READ_FILE])
    message = caught.value.message
    assert caught.value.status == status
    assert message.startswith(f"model 'test-model' at {model.base_url} cannot call tools")
    assert "set lspAgent.model or LSP_AGENT_MODEL to a model that can call tools" in message
    assert "qwen2.5-coder:7b or llama3.1" in message
    assert len(model.requests) == 1  # neither retried nor taken for a missing model


async def test_a_streaming_fallback_that_also_fails_for_tools_gives_the_same_advice(
    open_provider: Open,
) -> None:
    script = [refuse_stream_with_tools(), openai_error(400, "mistral does not support tools")]
    with (
        ScriptedModel(script, models=("mistral",)) as model,
        pytest.raises(ProviderError) as caught,
    ):
        await ask(open_provider(model.base_url, model="mistral"), tools=[READ_FILE])
    assert [request["stream"] for request in model.requests] == [True, False]
    assert caught.value.message.startswith(f"model 'mistral' at {model.base_url} cannot call tools")


async def test_stream_in_the_model_name_does_not_make_a_tools_refusal_a_streaming_one(
    open_provider: Open,
) -> None:
    said = openai_error(400, "registry.ollama.ai/library/upstream-coder:1b does not support tools")
    with (
        ScriptedModel([said], models=("upstream-coder:1b",)) as model,
        pytest.raises(ProviderError) as caught,
    ):
        await ask(open_provider(model.base_url, model="upstream-coder:1b"), tools=[READ_FILE])
    assert "cannot call tools" in caught.value.message
    assert len(model.requests) == 1


async def test_a_400_about_tool_messages_is_not_taken_for_a_model_without_tools(
    open_provider: Open,
) -> None:
    said = openai_error(400, "Invalid parameter: messages with role 'tool' must follow tool_calls")
    with ScriptedModel([said]) as model, pytest.raises(ProviderError) as caught:
        await ask(open_provider(model.base_url), tools=[READ_FILE])
    assert "cannot call tools" not in caught.value.message
    assert "rejected the request (400" in caught.value.message


async def test_an_anthropic_style_endpoint_refusing_tools_names_the_model(
    open_provider: Open,
) -> None:
    said = error(
        400,
        {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": "qwen3:0.6b does not support tools",
            },
        },
    )
    with ScriptedAnthropic([said], models=("qwen3:0.6b",)) as model:
        provider = open_provider(model.base_url, "qwen3:0.6b", None, "anthropic")
        with pytest.raises(ProviderError) as caught:
            await ask(provider, tools=[READ_FILE])
    assert caught.value.message.startswith(f"model 'qwen3:0.6b' at {model.base_url}")
    assert "cannot call tools" in caught.value.message
    assert "qwen2.5-coder:7b" in caught.value.message


# Cancellation


async def test_cancelling_the_turn_closes_the_stream(open_provider: Open) -> None:
    with ScriptedModel([hang_after("Thinking about")]) as model:
        provider = open_provider(model.base_url)
        started = asyncio.Event()
        task = asyncio.create_task(provider.complete(ASK, [], lambda _: started.set()))
        await asyncio.wait_for(started.wait(), 5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert await asyncio.to_thread(model.client_disconnected.wait, 2)


# Anthropic


def test_anthropic_request_takes_system_as_a_cached_parameter() -> None:
    request = to_anthropic(ASK, [])
    assert request["system"] == [
        {"type": "text", "text": "You are a test.", "cache_control": {"type": "ephemeral"}}
    ]
    assert [message["role"] for message in request["messages"]] == ["user"]
    assert "tools" not in request


def test_anthropic_request_turns_tool_calls_into_blocks_and_merges_results() -> None:
    history: list[dict[str, Any]] = [
        *ASK,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "t1",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path": "a.py"}'},
                },
                {"id": "t2", "type": "function", "function": {"name": "search", "arguments": "{"}},
            ],
        },
        {"role": "tool", "tool_call_id": "t1", "content": "print('a')"},
        {"role": "tool", "tool_call_id": "t2", "content": "no matches"},
        {"role": "user", "content": "<context>reminder</context>"},
    ]
    request = to_anthropic(history, [READ_FILE])
    messages = request["messages"]
    assert [message["role"] for message in messages] == ["user", "assistant", "user"]
    assert messages[1]["content"] == [
        {"type": "tool_use", "id": "t1", "name": "read_file", "input": {"path": "a.py"}},
        {"type": "tool_use", "id": "t2", "name": "search", "input": {}},  # malformed → {}
    ]
    last = messages[2]["content"]
    assert [block["type"] for block in last] == ["tool_result", "tool_result", "text"]
    assert last[0]["tool_use_id"] == "t1"
    assert last[0]["content"] == "print('a')"
    # Breakpoints: the system prompt, the end of the stored history, the reminder.
    assert "cache_control" not in last[0]
    assert last[1]["cache_control"] == {"type": "ephemeral"}
    assert last[2]["cache_control"] == {"type": "ephemeral"}
    marked = [
        block for message in messages for block in message["content"] if "cache_control" in block
    ]
    assert len(marked) + len(request["system"]) <= 4
    assert request["tools"] == [
        {
            "name": "read_file",
            "description": "Read a file.",
            "input_schema": READ_FILE["function"]["parameters"],
        }
    ]
    assert history[2]["content"] is None  # pure: the input is untouched


async def test_anthropic_streams_text_and_tool_calls_with_cache_usage(open_provider: Open) -> None:
    script = [
        reply("Looking.", prompt_tokens=2000, cached_tokens=1500),
        tool_call("read_file", {"path": "a.py"}, "toolu_1", text="Reading."),
        reply("Done.", usage=False),
    ]
    with ScriptedAnthropic(script, models=("claude-test",), api_key="ak-secret") as model:
        provider = open_provider(model.base_url, "claude-test", "ak-secret", "anthropic")
        first, chunks = await ask(provider)
        assert "".join(chunks) == first.text == "Looking."
        assert first.usage == Usage(2000, 2, 1500, False)
        assert first.finish_reason == "stop"

        second, _ = await ask(provider, tools=[READ_FILE])
        assert second.text == "Reading."
        assert second.tool_calls[0].id == "toolu_1"
        assert json.loads(second.tool_calls[0].arguments) == {"path": "a.py"}
        assert second.finish_reason == "tool_calls"

        history = [
            *ASK,
            second.message(),
            {"role": "tool", "tool_call_id": "toolu_1", "content": "print('a')"},
            {"role": "user", "content": "<context>reminder</context>"},
        ]
        third, _ = await ask(provider, history, [READ_FILE])
        assert third.text == "Done."
        assert third.usage.estimated is True
    assert model.rejections == []
    headers = model.headers[0]
    assert headers["x-api-key"] == "ak-secret"
    assert headers["anthropic-version"]
    assert "authorization" not in headers
    assert model.requests[0]["max_tokens"] > 0


async def test_anthropic_wrong_key_names_the_settings(open_provider: Open) -> None:
    with ScriptedAnthropic([reply("never")], models=("claude-test",), api_key="right") as model:
        provider = open_provider(model.base_url, "claude-test", "wrong-key-xyz", "anthropic")
        with pytest.raises(ProviderError) as caught:
            await ask(provider)
    assert caught.value.status == 401
    assert "ANTHROPIC_API_KEY" in caught.value.message
    assert "wrong-key-xyz" not in caught.value.message


async def test_anthropic_overload_is_retried(open_provider: Open) -> None:
    with ScriptedAnthropic([error(529), reply("ok")], models=("claude-test",)) as model:
        provider = open_provider(model.base_url + "/v1", "claude-test", None, "anthropic")
        answer, _ = await ask(provider)
    assert answer.text == "ok"
    assert len(model.requests) == 2


async def test_anthropic_answered_by_a_web_page_names_the_base_url(open_provider: Open) -> None:
    with ScriptedAnthropic([page(LOGIN_PAGE)], models=("claude-test",)) as model:
        provider = open_provider(model.base_url, "claude-test", None, "anthropic")
        with pytest.raises(ProviderError) as caught:
            await ask(provider)
    assert "answered 200 with a web page titled 'Sign in · Acme SSO'" in caught.value.message
    assert "https://api.anthropic.com" in caught.value.message


async def test_anthropic_events_with_an_odd_index_run_no_call(open_provider: Open) -> None:
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": {"id": "m", "usage": {"input_tokens": 1}}},
        {
            "type": "content_block_start",
            "index": "one",
            "content_block": {"type": "tool_use", "id": "t", "name": "read_file", "input": {}},
        },
        {"type": "message_stop"},
    ]
    with ScriptedAnthropic([raw_stream(*events)], models=("claude-test",)) as model:
        provider = open_provider(model.base_url, "claude-test", None, "anthropic")
        with pytest.raises(ProviderError) as caught:
            await ask(provider, tools=[READ_FILE])
    assert "content-block event whose index is 'one', not a whole number" in caught.value.message


async def test_anthropic_stream_in_another_dialect_is_said_plainly(open_provider: Open) -> None:
    with ScriptedAnthropic(
        [raw_stream(chunk({"content": "Hi"}))], models=("claude-test",)
    ) as model:
        provider = open_provider(model.base_url, "claude-test", None, "anthropic")
        with pytest.raises(ProviderError) as caught:
            await ask(provider)
    assert "streamed 1 event, none of them a Messages API event" in caught.value.message


def test_make_provider_builds_the_named_kind() -> None:
    assert isinstance(make_provider("openai", "http://h/v1", "m", None), OpenAIProvider)
    assert isinstance(make_provider("Anthropic", "http://h", "m", None), AnthropicProvider)


def test_retry_after_is_read_as_seconds_milliseconds_or_a_date() -> None:
    now = time.time()
    assert retry_after_seconds({"retry-after": "2"}) == 2.0
    assert retry_after_seconds({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    in_ten = retry_after_seconds({"retry-after": formatdate(now + 10, usegmt=True)}, now=now)
    assert in_ten is not None
    assert 9 <= in_ten <= 11
    assert retry_after_seconds({"retry-after": "soon"}) is None
    assert retry_after_seconds({}) is None
