"""A scripted model endpoint on loopback for tests: real HTTP, real SSE, picky like real servers.

`ScriptedModel` speaks OpenAI's `/v1/chat/completions` (streamed and not) and `/v1/models`;
`ScriptedAnthropic` speaks Anthropic's `/v1/messages`. Each runs a `ThreadingHTTPServer` in a
background thread of the test process, so sync tests, async tests and a server running in another
process can all reach it. Each request takes the next step of the script::

    with ScriptedModel([tool_call("read_file", {"path": "a.py"}), reply("Done.")]) as model:
        provider = make_provider("openai", model.base_url, "test-model", None)
        first = await provider.complete(messages, tools, on_text)   # the tool call
        ...
        assert model.requests[1]["messages"][-1]["role"] == "tool"

Like the servers that bite in real life, the fake refuses what they refuse: an assistant message
with tool calls and null content (HTTP 500, as llama-cpp-python), tool messages that answer no
pending call or calls left unanswered (400, OpenAI's wording), a missing or unknown model, a wrong
API key. Running out of script answers 500 "script exhausted" with `x-should-retry: false`, so a
test that makes one call too many fails at once and says why.

Faults a real endpoint commits are steps too: `page` (an HTML login page with 200), `raw_stream`
(SSE payloads sent exactly as given: chunks without `choices`, a string `delta`, a tool-call
index that is not an integer, an emoji escape split across two chunks), `empty_stream`, `flood`
(megabytes of text in tiny deltas or in one). Every completion request is kept as sent
(`bodies`, the raw bytes) with its `timings` (when it arrived, when its answer's last byte left),
for benchmarks that measure what the client does between two requests.
"""

from __future__ import annotations

import contextlib
import json
import select
import socket
import sys
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, NoReturn, TypeAlias

Body = dict[str, Any]


@dataclass(frozen=True, kw_only=True)
class Step:
    """What the fake does with one request; the usage fields apply to replies."""

    usage: bool = True
    """False: report no usage, like servers that ignore `stream_options.include_usage`."""
    prompt_tokens: int | None = None
    """Reported prompt tokens; default: the serialised messages and tools ÷ 4."""
    cached_tokens: int | None = None
    """Reported cached tokens; default: the bytes this request shares with the previous one ÷ 4."""


@dataclass(frozen=True)
class Call:
    """One tool call the model makes."""

    name: str
    arguments: str
    id: str | None = None


@dataclass(frozen=True)
class Reply(Step):
    """Stream `text` as `chunks` deltas (`delay` seconds apart)."""

    text: str
    chunks: int = 3
    delay: float = 0.0


@dataclass(frozen=True)
class ToolCalls(Step):
    """Optional text, then tool calls streamed the way OpenAI does, interleaved by index."""

    calls: tuple[Call, ...]
    text: str = ""
    chunks: int = 3
    """How many deltas each call's arguments are split over."""
    interleave: bool = True
    """Mix the calls' argument deltas (a parallel-calls stream); False sends them one by one."""
    delay: float = 0.0
    """Seconds between deltas, as a model writes them (0: all at once)."""


@dataclass(frozen=True)
class Error(Step):
    """Answer an HTTP error: `body` a dict (JSON) or str; None gives the API's usual shape."""

    status: int
    body: Body | str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class HangAfter(Step):
    """Stream `text`, then block until the client disconnects or `release()` is called."""

    text: str


@dataclass(frozen=True)
class BreakAfter(Step):
    """Stream `text`, then drop the connection mid-body (a stream that breaks mid-reply)."""

    text: str


@dataclass(frozen=True)
class Disconnect(Step):
    """Close the connection without answering at all."""


@dataclass(frozen=True)
class RefuseStreamWithTools(Step):
    """From here on, act as llama-cpp-python: refuse `stream: true` with tools (HTTP 500).

    The step itself takes no request: refused requests consume nothing, and a non-streamed one
    gets the next step as a plain JSON completion.
    """


@dataclass(frozen=True)
class Raw(Step):
    """Stream these SSE data payloads as they are: a dict as its JSON, a string verbatim."""

    events: tuple[Body | str, ...]
    done: bool = True
    """End with `data: [DONE]` (OpenAI); False ends the stream without it."""


@dataclass(frozen=True)
class Page(Step):
    """Answer `status` with `body` as `content_type`: a login page, a web UI's index."""

    body: str
    status: int = 200
    content_type: str = "text/html; charset=utf-8"


@dataclass(frozen=True)
class Flood(Step):
    """Stream `size` characters of text in deltas of `chunk` characters (one delta when
    `chunk` >= `size`). The stream's bytes are made when the step is, so that while it is
    sent the fake only writes (and leaves the test process's other threads alone)."""

    size: int
    chunk: int
    stream: tuple[bytes, ...] = ()
    """The SSE body in writes of about 64 KB."""


@dataclass
class Timing:
    """When one completion request arrived and when the last byte of its answer was sent
    (`time.perf_counter()` of the test process)."""

    received: float
    """The request line and headers were read (its body not yet)."""
    peer: tuple[str, int] = ("", 0)
    """The client's address and port: one per connection it opened."""
    answered: float | None = None
    """Just before the answer's last write (its last bytes); None until then."""


StepLike: TypeAlias = Step | Callable[[Body], "StepLike"]
"""A step, or a function of the request body that returns one (to answer what was sent)."""

STREAM_WITH_TOOLS_REFUSED = "Automatic streaming tool choice is not supported"
"""What llama-cpp-python's `chatml-function-calling` handler raises (answered as HTTP 500)."""


def reply(text: str, chunks: int = 3, *, delay: float = 0.0, **usage: Any) -> Reply:
    """Stream `text` in `chunks` deltas; usage keywords: `usage`, `prompt_tokens`, …"""
    return Reply(text=text, chunks=chunks, delay=delay, **usage)


def tool_call(
    name: str,
    args: Mapping[str, Any] | str,
    id: str | None = None,
    *,
    text: str = "",
    chunks: int = 3,
    delay: float = 0.0,
    **usage: Any,
) -> ToolCalls:
    """One tool call (`args` a dict, or raw text to send malformed JSON), after optional text;
    `delay` seconds between deltas."""
    return ToolCalls(calls=(_call(name, args, id),), text=text, chunks=chunks, delay=delay, **usage)


def tool_calls(
    calls: Sequence[ToolCalls | tuple[Any, ...]],
    *,
    text: str = "",
    chunks: int = 3,
    interleave: bool = True,
    **usage: Any,
) -> ToolCalls:
    """Several calls in one reply: each a `tool_call(...)` or a tuple `(name, args[, id])`."""
    flat: list[Call] = []
    for item in calls:
        if isinstance(item, ToolCalls):
            flat.extend(item.calls)
        else:
            flat.append(_call(*item))
    return ToolCalls(calls=tuple(flat), text=text, chunks=chunks, interleave=interleave, **usage)


def error(
    status: int, body: Body | str | None = None, headers: Mapping[str, str] | None = None
) -> Error:
    """An HTTP error, e.g. `error(429, headers={"Retry-After": "1"})`."""
    return Error(status=status, body=body, headers=dict(headers or {}))


def hang_after(text: str) -> HangAfter:
    """Stream `text`, then wait for the client to go away (cancellation tests)."""
    return HangAfter(text=text)


def break_after(text: str) -> BreakAfter:
    """Stream `text`, then drop the connection before the reply is complete."""
    return BreakAfter(text=text)


def disconnect() -> Disconnect:
    """Drop the connection before answering anything."""
    return Disconnect()


def refuse_stream_with_tools() -> RefuseStreamWithTools:
    """Switch to llama-cpp-python's behaviour: streamed requests with tools get HTTP 500."""
    return RefuseStreamWithTools()


def raw_stream(*events: Body | str, done: bool = True) -> Raw:
    """Stream exactly these payloads (then `[DONE]` unless `done=False`)."""
    return Raw(events=tuple(events), done=done)


def empty_stream() -> Raw:
    """A 200 event stream that ends without a single event."""
    return Raw(events=(), done=False)


def page(body: str, status: int = 200, content_type: str = "text/html; charset=utf-8") -> Page:
    """Answer with a page that is not a completion, e.g. a proxy's login page with 200."""
    return Page(body=body, status=status, content_type=content_type)


def flood(size: int, delta_chars: int) -> Flood:
    """Stream `size` characters of answer in deltas of `delta_chars` characters."""
    text = flood_text(size)
    step = max(delta_chars, 1)

    def payloads() -> Iterator[str]:
        yield json.dumps(chunk({"role": "assistant", "content": ""}))
        for start in range(0, len(text), step):
            yield json.dumps(chunk({"content": text[start : start + step]}))
        yield json.dumps(chunk({}, "stop"))
        yield "[DONE]"

    return Flood(size=size, chunk=delta_chars, stream=tuple(_batches(payloads())))


def chunk(delta: Any, finish: str | None = None, **fields: Any) -> Body:
    """An OpenAI stream chunk with one choice carrying `delta` (for `raw_stream`)."""
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "test-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        **fields,
    }


def text_chunks(*pieces: str, finish: str = "stop") -> list[Body]:
    """The chunks of an answer made of exactly these deltas, then the finishing chunk.

    A piece may be a lone surrogate: `json.dumps` writes it as its `\\udXXX` escape, the way
    an endpoint sends an emoji it split between two chunks."""
    return [*(chunk({"content": piece}) for piece in pieces), chunk({}, finish)]


def told(model: ScriptedModel, tool: str) -> str:
    """What the model was told the last time `tool` ran."""
    for request in reversed(model.requests):
        calls = {
            call["id"]: call["function"]["name"]
            for message in request["messages"]
            for call in message.get("tool_calls") or []
        }
        for message in reversed(request["messages"]):
            if message["role"] == "tool" and calls.get(message["tool_call_id"]) == tool:
                return str(message["content"])
    raise AssertionError(f"the model was never told about {tool}")


def note(request: Body) -> str:
    """The `<file_changes>` block of a request's reminder, its last message ("" when none)."""
    text = str(request["messages"][-1]["content"])
    start = text.find("<file_changes>")
    return text[start:] if start >= 0 else ""


NOTE_POLLS = 40
"""Model calls a story may spend waiting for the watcher to have an event (each lists files)."""


def until_noted(words: str, then: StepLike) -> list[StepLike]:
    """Model steps that list the files until the note mentions `words`, then `then`: the note
    is rebuilt at every call, so this waits on the fact, not on time. The wait never reads a
    file: a read that comes before the watcher's event makes the agent's view current, and the
    note then rightly has nothing to say about that file."""

    def step(request: Body) -> StepLike:
        if words in note(request):
            return then
        return tool_call("list_files", {})

    return [step] * NOTE_POLLS


def _call(name: str, args: Mapping[str, Any] | str, id: str | None = None) -> Call:
    arguments = args if isinstance(args, str) else json.dumps(dict(args))
    return Call(name=name, arguments=arguments, id=id)


class _Rejection(Exception):
    """A request the fake refuses, as the real server would."""

    def __init__(self, status: int, body: Body, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(json.dumps(body))
        self.status = status
        self.body = body
        self.headers = dict(headers or {})


class _Dropped(Exception):
    """The client went away while we were answering."""


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    owner: _ScriptedEndpoint

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Clients closing keep-alive connections are normal, not worth a traceback."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Like the servers in front of real models (uvicorn, Go's net/http): a stream is many
    # small writes, and with Nagle's algorithm its last bytes would wait for the client's
    # delayed ACK (40 ms) on a kept-alive connection.
    disable_nagle_algorithm = True
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the test output is not the place for an access log."""

    def do_GET(self) -> None:
        self.server.owner._serve(self, "GET")

    def do_POST(self) -> None:
        self.server.owner._serve(self, "POST")


class _Exchange:
    """One request being answered: the writing primitives over the handler's socket."""

    def __init__(self, handler: _Handler, owner: _ScriptedEndpoint) -> None:
        self.handler = handler
        self.owner = owner
        self.timing = Timing(0.0)
        self.raw = b""
        """The body of the request being answered, as received."""

    def send_json(self, status: int, body: Body | str, headers: Mapping[str, str] = {}) -> None:
        if isinstance(body, str):
            data, kind = body.encode(), "text/plain; charset=utf-8"
        else:
            data, kind = json.dumps(body).encode(), "application/json"
        self.handler.send_response(status)
        self.handler.send_header("Content-Type", kind)
        self.handler.send_header("Content-Length", str(len(data)))
        for name, value in headers.items():
            self.handler.send_header(name, value)
        self.handler.end_headers()
        self._write_last(data)

    def start_stream(self) -> None:
        self.handler.send_response(200)
        self.handler.send_header("Content-Type", "text/event-stream")
        self.handler.send_header("Cache-Control", "no-cache")
        self.handler.send_header("Transfer-Encoding", "chunked")
        self.handler.end_headers()

    def event(self, data: Body | str, name: str | None = None) -> None:
        payload = data if isinstance(data, str) else json.dumps(data)
        text = (f"event: {name}\n" if name else "") + f"data: {payload}\n\n"
        raw = text.encode()
        self._write(b"%x\r\n%s\r\n" % (len(raw), raw))

    def events(self, payloads: Iterator[str]) -> None:
        """Many `data:` events, written in batches of about 64 KB (one chunk each)."""
        self.raw_chunks(_batches(payloads))

    def raw_chunks(self, chunks: Iterable[bytes]) -> None:
        """Stream bytes as they are, one HTTP chunk each."""
        for raw in chunks:
            self._write_chunk(raw)

    def send_page(self, status: int, body: str, content_type: str) -> None:
        data = body.encode()
        self.handler.send_response(status)
        self.handler.send_header("Content-Type", content_type)
        self.handler.send_header("Content-Length", str(len(data)))
        self.handler.end_headers()
        self._write_last(data)

    def end_stream(self) -> None:
        self._write_last(b"0\r\n\r\n")

    def _write_last(self, data: bytes) -> None:
        """The answer's last write. Its time is taken just before it: taken after, it would wait
        for this thread to get the interpreter back from the test's other threads, and could
        fall after the client's next request."""
        if self.owner.before_last_write is not None:
            self.owner.before_last_write()
        self.timing.answered = time.perf_counter()
        self._write(data)

    def _write_chunk(self, raw: bytes) -> None:
        self._write(b"%x\r\n%s\r\n" % (len(raw), raw))

    def drop(self) -> None:
        """Close the socket abruptly, mid-response or before any byte."""
        self.handler.close_connection = True
        with contextlib.suppress(OSError):
            self.handler.connection.shutdown(socket.SHUT_RDWR)

    def wait_for_release_or_disconnect(self) -> bool:
        """Block until `release()` (True) or the client closes the connection (False)."""
        sock = self.handler.connection
        while not self.owner._released.is_set():
            readable, _, _ = select.select([sock], [], [], 0.02)
            if not readable:
                continue
            try:
                peeked = sock.recv(1, socket.MSG_PEEK)
            except OSError:
                peeked = b""
            if not peeked:
                self.owner.client_disconnected.set()
                self.handler.close_connection = True
                return False
            time.sleep(0.02)
        return True

    def _write(self, data: bytes) -> None:
        try:
            self.handler.wfile.write(data)
            self.handler.wfile.flush()
        except OSError as exc:  # BrokenPipe, ConnectionReset
            self.owner.client_disconnected.set()
            self.handler.close_connection = True
            raise _Dropped from exc


class _ScriptedEndpoint:
    """The server machinery both dialects share: script, records, lifecycle."""

    def __init__(
        self,
        script: Sequence[StepLike] | None = None,
        *,
        models: Sequence[str] = ("test-model",),
        api_key: str | None = None,
    ) -> None:
        self.models = list(models)
        """The model names the endpoint serves; others get the API's model-not-found error."""
        self.api_key = api_key
        """When set, requests must carry it (else 401)."""
        self.client_disconnected = threading.Event()
        """Set when the server notices a client closed its connection mid-answer."""
        self.rejections: list[str] = []
        """Why the fake refused requests on its own (strictness, exhausted script)."""
        self.before_last_write: Callable[[], None] | None = None
        """Called just before each answer's last write (a benchmark samples the client's CPU
        time there)."""
        self._script: deque[StepLike] = deque(script or ())
        self._lock = threading.Lock()
        self._requests: list[Body] = []
        self._bodies: list[bytes] = []
        self._timings: list[Timing] = []
        self._headers: list[dict[str, str]] = []
        self._released = threading.Event()
        self._refusing_stream_with_tools = False
        self._previous_prompt = b""
        self._ids = 0
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.owner = self
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def requests(self) -> list[Body]:
        """Parsed bodies of every completion request received, in order."""
        with self._lock:
            return list(self._requests)

    @property
    def bodies(self) -> list[bytes]:
        """The raw bytes of those requests, exactly as the client sent them."""
        with self._lock:
            return list(self._bodies)

    @property
    def timings(self) -> list[Timing]:
        """When each of those requests arrived and was answered, in the same order."""
        with self._lock:
            return list(self._timings)

    @property
    def headers(self) -> list[dict[str, str]]:
        """Headers of those requests (names lowercased), in the same order."""
        with self._lock:
            return list(self._headers)

    @property
    def remaining(self) -> int:
        """Steps not used yet."""
        with self._lock:
            return len(self._script)

    def add(self, *steps: StepLike) -> None:
        """Append steps to the script."""
        with self._lock:
            self._script.extend(steps)

    def release(self) -> None:
        """Let every `hang_after` step finish its reply."""
        self._released.set()

    def start(self) -> None:
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"{type(self).__name__}:{self.port}",
            daemon=True,
        )
        self._thread.start()

    def close(self) -> None:
        self.release()
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> _ScriptedEndpoint:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _serve(self, handler: _Handler, method: str) -> None:
        exchange = _Exchange(handler, self)
        host, port = handler.client_address[:2]
        exchange.timing = Timing(time.perf_counter(), (str(host), int(port)))
        path = handler.path.split("?", 1)[0]
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length) if length else b""
        headers = {name.lower(): value for name, value in handler.headers.items()}
        try:
            try:
                self._route(exchange, method, path, raw, headers)
            except _Rejection as rejection:
                exchange.send_json(rejection.status, rejection.body, rejection.headers)
            except Exception as exc:  # a bug in a test's callable step, or in the fake
                self.rejections.append(traceback.format_exc())
                message = f"the scripted model failed: {type(exc).__name__}: {exc}"
                body = self._error_body(500, message)
                exchange.send_json(500, body, {"x-should-retry": "false"})
            if exchange.timing.answered is None:
                exchange.timing.answered = time.perf_counter()
        except _Dropped:
            pass

    def _route(
        self, exchange: _Exchange, method: str, path: str, raw: bytes, headers: dict[str, str]
    ) -> None:
        raise NotImplementedError

    def _parse(self, raw: bytes, headers: dict[str, str], exchange: _Exchange) -> Body:
        """Record the request, then parse it (an unparsable one is recorded as its text)."""
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        with self._lock:
            self._requests.append(
                body if isinstance(body, dict) else {"_raw": raw.decode("utf-8", "replace")}
            )
            self._bodies.append(raw)
            exchange.raw = raw
            self._timings.append(exchange.timing)
            self._headers.append(headers)
        if not isinstance(body, dict):
            self._reject(400, "We could not parse the JSON body of your request.")
        return body

    def _reject(self, status: int, message: str, **fields: Any) -> NoReturn:
        self.rejections.append(f"{status}: {message}")
        raise _Rejection(status, self._error_body(status, message, **fields))

    def _error_body(self, status: int, message: str, **fields: Any) -> Body:
        raise NotImplementedError

    def _next_step(self, body: Body) -> Step | None:
        """The step for this request, or None when the request is refused before any step."""
        while True:
            with self._lock:
                head = self._script[0] if self._script else None
                if isinstance(head, RefuseStreamWithTools):
                    self._script.popleft()
                    self._refusing_stream_with_tools = True
                    continue
                if self._refusing_stream_with_tools and body.get("stream") and body.get("tools"):
                    return None
                if head is None:
                    break
                self._script.popleft()
            step = head
            while not isinstance(step, Step):
                step = step(body)
            if isinstance(step, RefuseStreamWithTools):
                with self._lock:
                    self._refusing_stream_with_tools = True
                continue
            return step
        count = len(self.requests)
        self.rejections.append(f"script exhausted at request {count}")
        raise _Rejection(
            500,
            self._error_body(
                500, f"script exhausted: request {count} found no step left in the test's script"
            ),
            # OpenAI's own header: clients that honour it fail at once instead of retrying.
            {"x-should-retry": "false"},
        )

    def _usage_numbers(self, step: Step, raw: bytes, completion: str) -> tuple[int, int, int]:
        """Prompt, cached and completion tokens: deterministic, and cache-like across requests
        (the bytes of the body this one shares with the previous one, ÷ 4)."""
        prompt_bytes = raw
        with self._lock:
            previous, self._previous_prompt = self._previous_prompt, prompt_bytes
        shared = common_prefix(previous, prompt_bytes)
        prompt = step.prompt_tokens if step.prompt_tokens is not None else len(prompt_bytes) // 4
        cached = step.cached_tokens if step.cached_tokens is not None else min(shared // 4, prompt)
        return prompt, cached, max(1, len(completion.encode()) // 4)

    def _call_id(self, call: Call) -> str:
        if call.id:
            return call.id
        with self._lock:
            self._ids += 1
            return f"call_{self._ids}"

    def _check_key(self, received: str | None) -> None:
        if self.api_key is None:
            return
        if received is None:
            self._reject(401, "You didn't provide an API key.", code="invalid_api_key")
        elif received != self.api_key:
            # Some servers quote the key they got: the client must keep it out of its messages.
            self._reject(401, f"Incorrect API key provided: {received}.", code="invalid_api_key")


class ScriptedModel(_ScriptedEndpoint):
    """A scripted OpenAI-compatible endpoint; `base_url` ends in `/v1`."""

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> ScriptedModel:
        self.start()
        return self

    def _error_body(self, status: int, message: str, **fields: Any) -> Body:
        kind = "invalid_request_error" if status < 500 else "server_error"
        return {"error": {"message": message, "type": kind, "param": None, "code": None, **fields}}

    def _route(
        self, exchange: _Exchange, method: str, path: str, raw: bytes, headers: dict[str, str]
    ) -> None:
        auth = headers.get("authorization")
        key = auth.removeprefix("Bearer ") if auth else None
        if method == "GET" and path == "/v1/models":
            self._check_key(key)
            data = [
                {"id": m, "object": "model", "created": 0, "owned_by": "test"} for m in self.models
            ]
            exchange.send_json(200, {"object": "list", "data": data})
        elif method == "POST" and path == "/v1/chat/completions":
            body = self._parse(raw, headers, exchange)
            self._check_key(key)
            self._validate(body)
            step = self._next_step(body)
            if step is None:
                self.rejections.append(f"500: {STREAM_WITH_TOOLS_REFUSED}")
                exchange.send_json(
                    500,
                    {
                        "error": {
                            "message": STREAM_WITH_TOOLS_REFUSED,
                            "type": "internal_server_error",
                            "param": None,
                            "code": None,
                        }
                    },
                )
                return
            self._answer(exchange, step, body)
        else:
            self._reject(404, f"Unknown request URL: {method} {path}.", code="unknown_url")

    def _validate(self, body: Body) -> None:
        model = body.get("model")
        if not model:
            self._reject(400, "you must provide a model parameter")
        if model not in self.models:
            self._reject(
                404, f"The model `{model}` does not exist", code="model_not_found", param="model"
            )
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            self._reject(400, f"{messages!r} is too short - 'messages'", param="messages")
        for i, message in enumerate(messages):
            if (
                isinstance(message, dict)
                and message.get("role") == "assistant"
                and message.get("tool_calls")
                and message.get("content") is None
            ):
                # llama-cpp-python's chat template concatenates the content: a null crashes it.
                self.rejections.append(f"500: messages[{i}] assistant content is null")
                raise _Rejection(
                    500,
                    {
                        "error": {
                            "message": 'can only concatenate str (not "NoneType") to str',
                            "type": "internal_server_error",
                            "param": None,
                            "code": None,
                        }
                    },
                )
        pending: set[str] | None = None
        for i, message in enumerate(messages):
            if not isinstance(message, dict):
                self._reject(400, f"Invalid type for 'messages[{i}]': expected an object.")
            role = message.get("role")
            if role == "tool":
                answered = message.get("tool_call_id")
                if pending is None or answered not in pending:
                    self._reject(
                        400,
                        f"Invalid parameter: messages with role 'tool' must be a response to a "
                        f"preceeding message with 'tool_calls'. (messages[{i}])",
                        param=f"messages.[{i}].role",
                    )
                assert pending is not None
                pending.discard(str(answered))
                if not isinstance(message.get("content"), (str, list)):
                    self._reject(400, f"Invalid value for 'messages[{i}].content'.")
                continue
            if pending:
                self._reject(
                    400,
                    "An assistant message with 'tool_calls' must be followed by tool messages "
                    "responding to each 'tool_call_id'. The following tool_call_ids did not have "
                    f"response messages: {', '.join(sorted(pending))}",
                    param="messages",
                )
            pending = None
            if role not in ("system", "developer", "user", "assistant"):
                self._reject(400, f"Invalid value: '{role}'. Supported values are: 'system', …")
            if role == "assistant" and message.get("tool_calls"):
                pending = set()
                for call in message["tool_calls"]:
                    function = call.get("function") if isinstance(call, dict) else None
                    if (
                        not isinstance(function, dict)
                        or not call.get("id")
                        or call.get("type") != "function"
                        or not function.get("name")
                        or not isinstance(function.get("arguments"), str)
                    ):
                        self._reject(400, f"Invalid 'messages[{i}].tool_calls': {call!r}")
                    pending.add(call["id"])
            elif role != "assistant" and not isinstance(message.get("content"), (str, list)):
                self._reject(
                    400,
                    f"Invalid value for 'messages[{i}].content': expected a string, got null.",
                )
        if pending:
            self._reject(
                400,
                "An assistant message with 'tool_calls' must be followed by tool messages "
                "responding to each 'tool_call_id'. The following tool_call_ids did not have "
                f"response messages: {', '.join(sorted(pending))}",
                param="messages",
            )
        tools = body.get("tools")
        if tools is not None:
            if not isinstance(tools, list) or not tools:
                self._reject(400, "[] is too short - 'tools'", param="tools")
            for j, tool in enumerate(tools):
                if (
                    not isinstance(tool, dict)
                    or tool.get("type") != "function"
                    or not (tool.get("function") or {}).get("name")
                ):
                    self._reject(400, f"Invalid 'tools[{j}]': {tool!r}", param="tools")

    def _answer(self, exchange: _Exchange, step: Step, body: Body) -> None:
        if isinstance(step, Error):
            body_out = step.body if step.body is not None else self._default_error(step.status)
            exchange.send_json(step.status, body_out, step.headers)
            return
        if isinstance(step, Disconnect):
            exchange.drop()
            return
        if isinstance(step, Page):
            exchange.send_page(step.status, step.body, step.content_type)
            return
        if isinstance(step, Raw):
            exchange.start_stream()
            payloads = [e if isinstance(e, str) else json.dumps(e) for e in step.events]
            exchange.events(iter([*payloads, "[DONE]"] if step.done else payloads))
            exchange.end_stream()
            return
        if isinstance(step, Flood):
            self._flood(exchange, step, body)
            return
        text, calls = _content(step)
        completion = text + "".join(call.name + call.arguments for call in calls)
        prompt, cached, completion_tokens = self._usage_numbers(step, exchange.raw, completion)
        usage = {
            "prompt_tokens": prompt,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt + completion_tokens,
            "prompt_tokens_details": {"cached_tokens": cached},
        }
        if body.get("stream"):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            self._stream(exchange, step, body, usage if include_usage and step.usage else None)
        else:
            self._complete(exchange, step, body, usage if step.usage else None)

    def _flood(self, exchange: _Exchange, step: Flood, body: Body) -> None:
        exchange.start_stream()
        exchange.raw_chunks(step.stream)
        exchange.end_stream()

    def _default_error(self, status: int) -> Body:
        messages = {
            401: ("Incorrect API key provided.", "invalid_api_key"),
            404: ("The model does not exist", "model_not_found"),
            429: ("Rate limit reached for requests", "rate_limit_exceeded"),
        }
        message, code = messages.get(status, (f"The server had an error ({status}).", None))
        return self._error_body(status, message, code=code)

    def _chunk(self, body: Body, delta: Body, finish: str | None = None) -> Body:
        return {
            "id": "chatcmpl-test",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": body.get("model"),
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    def _stream(self, exchange: _Exchange, step: Step, body: Body, usage: Body | None) -> None:
        exchange.start_stream()
        exchange.event(self._chunk(body, {"role": "assistant", "content": ""}))
        text, calls = _content(step)
        delay = step.delay if isinstance(step, (Reply, ToolCalls)) else 0.0
        chunks = step.chunks if isinstance(step, (Reply, ToolCalls)) else 2
        for piece in _split(text, chunks):
            exchange.event(self._chunk(body, {"content": piece}))
            if delay:
                time.sleep(delay)
        if isinstance(step, BreakAfter):
            exchange.drop()
            return
        if isinstance(step, HangAfter) and not exchange.wait_for_release_or_disconnect():
            return
        if isinstance(step, ToolCalls):
            for delta in self._call_deltas(step):
                exchange.event(self._chunk(body, {"tool_calls": [delta]}))
                if delay:
                    time.sleep(delay)
        exchange.event(self._chunk(body, {}, "tool_calls" if calls else "stop"))
        if usage is not None:
            final = self._chunk(body, {})
            final["choices"] = []
            final["usage"] = usage
            exchange.event(final)
        exchange.event("[DONE]")
        exchange.end_stream()

    def _call_deltas(self, step: ToolCalls) -> Iterator[Body]:
        pieces = [_split(call.arguments, step.chunks) for call in step.calls]
        ids = [self._call_id(call) for call in step.calls]

        def header(index: int) -> Body:
            call = step.calls[index]
            return {
                "index": index,
                "id": ids[index],
                "type": "function",
                "function": {"name": call.name, "arguments": ""},
            }

        def piece(index: int, k: int) -> Body:
            return {"index": index, "function": {"arguments": pieces[index][k]}}

        if not step.interleave:
            for index in range(len(step.calls)):
                yield header(index)
                for k in range(len(pieces[index])):
                    yield piece(index, k)
            return
        for k in range(max((len(p) for p in pieces), default=0) or 1):
            for index in range(len(step.calls)):
                if k == 0:
                    yield header(index)
                if k < len(pieces[index]):
                    yield piece(index, k)

    def _complete(self, exchange: _Exchange, step: Step, body: Body, usage: Body | None) -> None:
        if isinstance(step, BreakAfter):
            exchange.drop()
            return
        if isinstance(step, HangAfter) and not exchange.wait_for_release_or_disconnect():
            return
        text, calls = _content(step)
        message: Body = {"role": "assistant", "content": text or None}
        if calls:
            message["tool_calls"] = [
                {
                    "id": self._call_id(call) if call.id is None else call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
                for call in calls
            ]
        answer: Body = {
            "id": "chatcmpl-test",
            "object": "chat.completion",
            "created": 0,
            "model": body.get("model"),
            "choices": [
                {"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}
            ],
        }
        if usage is not None:
            answer["usage"] = usage
        exchange.send_json(200, answer)


class ScriptedAnthropic(_ScriptedEndpoint):
    """A scripted Anthropic Messages endpoint; `base_url` is the root, like the SDK's default."""

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> ScriptedAnthropic:
        self.start()
        return self

    def _error_body(self, status: int, message: str, **fields: Any) -> Body:
        kinds = {
            400: "invalid_request_error",
            401: "authentication_error",
            403: "permission_error",
            404: "not_found_error",
            429: "rate_limit_error",
            529: "overloaded_error",
        }
        return {
            "type": "error",
            "error": {"type": kinds.get(status, "api_error"), "message": message},
        }

    def _route(
        self, exchange: _Exchange, method: str, path: str, raw: bytes, headers: dict[str, str]
    ) -> None:
        if method == "GET" and path == "/v1/models":
            self._check_key(headers.get("x-api-key"))
            data = [{"type": "model", "id": m, "display_name": m} for m in self.models]
            exchange.send_json(200, {"data": data, "has_more": False})
        elif method == "POST" and path == "/v1/messages":
            body = self._parse(raw, headers, exchange)
            self._check_key(headers.get("x-api-key"))
            if not headers.get("anthropic-version"):
                self._reject(400, "anthropic-version: header is required")
            self._validate(body)
            step = self._next_step(body)
            assert step is not None
            self._answer(exchange, step, body)
        else:
            self._reject(404, f"Not found: {method} {path}")

    def _validate(self, body: Body) -> None:
        if not body.get("model"):
            self._reject(400, "model: Field required")
        if body["model"] not in self.models:
            self._reject(404, f"model: {body['model']}")
        if not isinstance(body.get("max_tokens"), int):
            self._reject(400, "max_tokens: Field required")
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            self._reject(400, "messages: at least one message is required")
        breakpoints = sum(
            1
            for block in _all_blocks(body)
            if isinstance(block, dict) and block.get("cache_control") is not None
        )
        if breakpoints > 4:
            self._reject(
                400,
                f"A maximum of 4 blocks with cache_control may be provided. Found {breakpoints}.",
            )
        tool_uses: list[str] = []
        for i, message in enumerate(messages):
            role = message.get("role")
            expected = "user" if i % 2 == 0 else "assistant"
            if role != expected:
                self._reject(400, f"messages.{i}.role: roles must alternate, starting with user")
            content = message.get("content")
            blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
            if not isinstance(blocks, list) or not blocks:
                self._reject(400, f"messages.{i}: all messages must have non-empty content")
            results = [str(b.get("tool_use_id")) for b in blocks if b.get("type") == "tool_result"]
            if tool_uses and sorted(results) != sorted(tool_uses):
                self._reject(
                    400,
                    f"messages.{i}: `tool_use` ids were found without `tool_result` blocks "
                    f"immediately after: {', '.join(sorted(set(tool_uses) - set(results)))}",
                )
            if results and not tool_uses:
                self._reject(
                    400, f"messages.{i}: unexpected `tool_use_id` found in `tool_result` blocks"
                )
            kinds = [b.get("type") for b in blocks]
            if results and kinds[: len(results)] != ["tool_result"] * len(results):
                self._reject(400, f"messages.{i}: tool_result blocks must come first")
            for j, block in enumerate(blocks):
                if block.get("type") == "text" and not str(block.get("text", "")).strip():
                    self._reject(400, f"messages.{i}.content.{j}: text blocks must be non-empty")
                if block.get("type") == "tool_use" and not isinstance(block.get("input"), dict):
                    self._reject(400, f"messages.{i}.content.{j}.input: must be an object")
            tool_uses = [b["id"] for b in blocks if b.get("type") == "tool_use"]
        if tool_uses:
            self._reject(400, "the last message has `tool_use` blocks without results")

    def _answer(self, exchange: _Exchange, step: Step, body: Body) -> None:
        if isinstance(step, Error):
            body_out = (
                step.body if step.body is not None else self._error_body(step.status, "error")
            )
            exchange.send_json(step.status, body_out, step.headers)
            return
        if isinstance(step, Disconnect):
            exchange.drop()
            return
        if isinstance(step, Page):
            exchange.send_page(step.status, step.body, step.content_type)
            return
        if isinstance(step, Raw):
            exchange.start_stream()
            for event in step.events:
                name = event.get("type") if isinstance(event, dict) else None
                exchange.event(event, str(name) if name else None)
            exchange.end_stream()
            return
        if not body.get("stream"):
            self._reject(400, "ScriptedAnthropic only streams: send stream: true")
        text, calls = _content(step)
        completion = text + "".join(call.name + call.arguments for call in calls)
        prompt, cached, output = self._usage_numbers(step, exchange.raw, completion)
        exchange.start_stream()
        message: Body = {
            "id": "msg_test",
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": [],
            "stop_reason": None,
        }
        if step.usage:
            message["usage"] = {
                "input_tokens": prompt - cached,
                "cache_read_input_tokens": cached,
                "cache_creation_input_tokens": 0,
                "output_tokens": 1,
            }
        exchange.event({"type": "message_start", "message": message}, "message_start")
        index = 0
        if text or not calls:
            start = {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            }
            exchange.event(start, "content_block_start")
            chunks = step.chunks if isinstance(step, (Reply, ToolCalls)) else 2
            for piece in _split(text, chunks):
                delta = {"type": "text_delta", "text": piece}
                exchange.event(
                    {"type": "content_block_delta", "index": 0, "delta": delta},
                    "content_block_delta",
                )
            if isinstance(step, BreakAfter):
                exchange.drop()
                return
            if isinstance(step, HangAfter) and not exchange.wait_for_release_or_disconnect():
                return
            exchange.event({"type": "content_block_stop", "index": 0}, "content_block_stop")
            index = 1
        for call in calls:
            block = {"type": "tool_use", "id": self._call_id(call), "name": call.name, "input": {}}
            exchange.event(
                {"type": "content_block_start", "index": index, "content_block": block},
                "content_block_start",
            )
            for piece in _split(call.arguments, step.chunks if isinstance(step, ToolCalls) else 1):
                delta = {"type": "input_json_delta", "partial_json": piece}
                exchange.event(
                    {"type": "content_block_delta", "index": index, "delta": delta},
                    "content_block_delta",
                )
            exchange.event({"type": "content_block_stop", "index": index}, "content_block_stop")
            index += 1
        stop = {"stop_reason": "tool_use" if calls else "end_turn", "stop_sequence": None}
        end: Body = {"type": "message_delta", "delta": stop}
        if step.usage:
            end["usage"] = {"output_tokens": output}
        exchange.event(end, "message_delta")
        exchange.event({"type": "message_stop"}, "message_stop")
        exchange.end_stream()


def common_prefix(a: bytes, b: bytes) -> int:
    """Length of the longest common prefix of two byte strings (slices compared in C)."""
    low, high = 0, min(len(a), len(b))
    view_a, view_b = memoryview(a), memoryview(b)
    while low < high:
        middle = (low + high + 1) // 2
        if view_a[:middle] == view_b[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def _batches(payloads: Iterable[str]) -> Iterator[bytes]:
    """`data:` events joined into writes of about 64 KB."""
    batch: list[bytes] = []
    size = 0
    for payload in payloads:
        raw = f"data: {payload}\n\n".encode()
        batch.append(raw)
        size += len(raw)
        if size >= 65536:
            yield b"".join(batch)
            batch, size = [], 0
    if batch:
        yield b"".join(batch)


def flood_text(size: int) -> str:
    """`size` characters of prose-like answer text."""
    line = "The quick brown fox jumps over the lazy dog; lorem ipsum dolor sit amet.\n"
    return (line * (size // len(line) + 1))[:size]


def _content(step: Step) -> tuple[str, tuple[Call, ...]]:
    """The text and tool calls a step answers with."""
    if isinstance(step, ToolCalls):
        return step.text, step.calls
    if isinstance(step, (Reply, HangAfter, BreakAfter)):
        return step.text, ()
    return "", ()


def _split(text: str, parts: int) -> list[str]:
    """`text` in up to `parts` non-empty pieces of near-equal length."""
    if not text:
        return []
    parts = max(1, min(parts, len(text)))
    size, extra = divmod(len(text), parts)
    pieces, start = [], 0
    for k in range(parts):
        end = start + size + (1 if k < extra else 0)
        pieces.append(text[start:end])
        start = end
    return pieces


def _all_blocks(body: Body) -> Iterator[Any]:
    """Every block that may carry `cache_control`: tools, system blocks, message blocks."""
    yield from body.get("tools") or []
    system = body.get("system")
    if isinstance(system, list):
        yield from system
    for message in body.get("messages") or []:
        if isinstance(message, dict) and isinstance(message.get("content"), list):
            yield from message["content"]
