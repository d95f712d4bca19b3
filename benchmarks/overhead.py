"""Benchmark: the server's own time per model call, through `lsp-agent serve` (target ≤ 7 ms at 1M).

For each history size (10k, 100k and 1M tokens by default, bytes ÷ 3.5) it stores a session of
that size with the package's transcript store (the scripted session of `prefix_stability.py`:
files of 2–20 KB, command outputs, searches, edits), starts `lsp-agent serve` under a real LSP
client (`tests/editor.py`), and asks on that session while the scripted endpoint on loopback
answers `--calls` calls of the `todo` tool and then an answer.

The figure is, for every call after the first, the time from the last byte of the endpoint's
reply to the arrival of the next request, as the endpoint sees it (its head: a large body is
written after it); and beside it the server's CPU time over the same span (all its threads,
read from /proc just before the reply's last write and when the next request arrives), which a
busy machine inflates less than the wall-clock figure, and its CPU time per call with the reading
of the reply included. It covers what the server does between two model calls: the end of the
SSE parse, the reply and the tool result stored (transcript writes), the tool itself (`todo`: no
I/O), the events and notifications sent to the editor, the context layers' guard, which skills
the history still holds loaded (the workspace has one, as many have), the reminder
(git branch, plan, file changes), and the request encoded and sent (the kernel's copy of the body
onto the loopback counts as the server's CPU). It leaves out the first request of a turn
(resuming the session reads its transcript), the time tools with I/O take, and the model's own
time.

By default the endpoint writes each reply's deltas all at once, so the server reads the whole
reply after its last byte; `--pace-ms N` writes them N ms apart, as a model streams, and the
server reads them as they come.

Two views of each history: sent whole, and with the old tool results sent as stubs (a stored
strip decision, as after `stripAt`), where the layers give every stub as a new message.

`--server-path DIR` runs the server from another checkout (e.g. the code before a change), with
the same stored sessions and the same client. `--dialect anthropic` has the server speak
Anthropic's Messages API to a scripted endpoint of that dialect (the request is converted to
Anthropic's content blocks) instead of the OpenAI-compatible one.

Usage: .venv/bin/python benchmarks/overhead.py [--tokens 10000,100000,1000000] [--calls N]
       [--pace-ms N] [--server-path DIR] [--dialect openai|anthropic]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import itertools
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))

from prefix_stability import Script

from lsp_agent.agent.prompt import system_prompt
from lsp_agent.context.layers import ContextEvent
from lsp_agent.context.tokens import Message, request_bytes
from lsp_agent.context.view import ContextState
from lsp_agent.messages import estimate_tokens
from lsp_agent.model.encoding import RequestEncoder
from lsp_agent.session.store import SessionStore
from tests.editor import start_editor
from tests.fake_model import ScriptedAnthropic, ScriptedModel, Step, reply, tool_call

PLAN = {"items": [{"text": "Measure the overhead", "status": "in_progress"}]}
TIME_TO_FIRST_TOKEN = 0.3
"""What a hosted model commonly takes before its first token: the scale the figure is read on."""


def history_of(root: Path, tokens: int, seed: int = 3) -> list[Message]:
    """A stored history of about `tokens` tokens, from the scripted session."""
    rng = random.Random(seed)
    script = Script(rng, 10**9, cap=10_000)
    history: list[Message] = [{"role": "system", "content": system_prompt(root)}]
    size = request_bytes(history)
    while estimate_tokens(size) < tokens:
        turn = [script.prompt()]
        for _ in range(script.calls_in_turn()):
            assistant, results = script.tool_step()
            turn += [assistant, *results]
            if estimate_tokens(size + request_bytes(turn)) >= tokens:
                break
        else:
            turn.append(script.answer())
        history += turn
        size += request_bytes(turn)
    return history


def store_session(root: Path, state: Path, history: list[Message], stubbed: bool) -> str:
    """Write `history` as a stored session; `stubbed` adds a strip decision over it."""
    transcript = SessionStore(root, state).create()
    turn = 0
    for message in history:
        if message["role"] == "user":
            turn += 1
        transcript.append({"type": "message", "turn": turn, "message": message})
    if stubbed:
        strip = ContextState(strip_before=len(history) - 4, decided_at=len(history))
        event = ContextEvent("strip", 0, 0, strip, "end_of_turn")
        transcript.append(event.record())
    transcript.close()
    return transcript.session_id


def workspace(base: Path) -> tuple[Path, Path, Path]:
    root, state, home = base / "project", base / "state", base / "home"
    for path in (root, state, home):
        path.mkdir()
    (root / "README.md").write_text("a project\n")
    # A skill, as many workspaces have: the server then checks before each call which skills
    # the history still holds loaded.
    skill = root / ".agents" / "skills" / "release" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text("---\ndescription: cut a release\n---\nBump the version, tag, push.\n")
    git = ["git", "-C", str(root), "-c", "user.name=b", "-c", "user.email=b@example.com"]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "start"], check=True)
    return root, state, home


async def measure(
    tokens: int, calls: int, stubbed: bool, pace: float, dialect: str
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="lsp-agent-overhead-") as temp:
        root, state, home = workspace(Path(temp))
        history = history_of(root, tokens)
        session = store_session(root, state, history, stubbed)
        endpoint = ScriptedAnthropic if dialect == "anthropic" else ScriptedModel
        with endpoint() as model:
            settings = {
                "provider": dialect,
                "baseUrl": model.base_url,
                "model": "test-model",
                "contextWindow": max(4 * tokens, 128_000),  # no layer decides during the run
                "maxTurns": calls + 1,
            }
            editor = await start_editor(
                root, "visual-studio-code", settings, state_dir=state, home=home
            )
            try:
                pid = editor.client._server.pid  # type: ignore[union-attr]
                cpu: list[float] = []

                def sampled(step: Step) -> Callable[[dict[str, Any]], Step]:
                    def answer(_: dict[str, Any]) -> Step:
                        cpu.append(cpu_seconds(pid))
                        return step

                    return answer

                replied: list[float] = []
                model.before_last_write = lambda: replied.append(cpu_seconds(pid))
                steps = [tool_call("todo", PLAN, delay=pace) for _ in range(calls)]
                steps.append(reply("Measured."))
                model.add(*[sampled(step) for step in steps])
                result = await editor.ask("go on", session=session)
                assert result.status == "completed", result
            finally:
                await editor.client.shutdown_session()
                await editor.client.stop()
        timings = model.timings
        gaps = [
            after.received - before.answered
            for before, after in itertools.pairwise(timings)
            if before.answered is not None
        ]
        sent = json.loads(model.bodies[-1])["messages"]
        return {
            "cpu": [after - before for before, after in itertools.pairwise(cpu)],
            # The answer to request i ends before request i + 1 arrives.
            "cpu_after": [
                arrived - ended for ended, arrived in zip(replied, cpu[1:], strict=False)
            ],
            "messages": len(history),
            "tokens": estimate_tokens(request_bytes(history)),
            "body": len(model.bodies[-1]),
            "sent": len(sent),
            "gaps": gaps,
        }


def cpu_seconds(pid: int) -> float:
    """CPU time a process has had, all threads, from the scheduler's nanosecond counters."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            total += int((task / "schedstat").read_text().split()[0])
    return total / 1e9


def quartiles(values: list[float]) -> str:
    """The first and third quartiles, in milliseconds: how wide the spread of a median is."""
    first, _, third = statistics.quantiles(values, n=4)
    return f"{first * 1000:.2f}–{third * 1000:.2f}"


def describe(label: str, found: dict[str, Any]) -> str:
    gaps = sorted(found["gaps"])
    p95 = gaps[min(len(gaps) - 1, int(len(gaps) * 0.95))]
    return (
        f"{label:<26} {found['tokens']:>9,} tokens {found['messages']:>5} messages, "
        f"body {found['body'] / 1e6:5.2f} MB: "
        f"median {statistics.median(gaps) * 1000:6.2f} ms   p95 {p95 * 1000:6.2f} ms; "
        f"server CPU from the last byte median {statistics.median(found['cpu_after']) * 1000:5.2f}"
        f" ms (quartiles {quartiles(found['cpu_after'])}), "
        f"per call with the reply read {statistics.median(found['cpu']) * 1000:5.2f} ms "
        f"({len(gaps)} calls)"
    )


async def main_async(sizes: list[int], calls: int, pace: float, dialect: str) -> None:
    paced = f"deltas {pace * 1000:g} ms apart" if pace else "each reply's deltas all at once"
    print(
        "end of the model's reply → next request, through lsp-agent serve (target ≤ 7 ms at 1M "
        f"sent whole, and ≤ 1.5 × the 10k figure); {paced}; {dialect} dialect"
    )
    whole: dict[int, float] = {}
    for tokens in sizes:
        for stubbed in (False, True):
            found = await measure(tokens, calls, stubbed, pace, dialect)
            label = f"{tokens // 1000}k, " + ("old results stubbed" if stubbed else "sent whole")
            print(describe(label, found), flush=True)
            if not stubbed:
                whole[tokens] = statistics.median(found["gaps"])
    smallest, largest = min(whole), max(whole)
    print(
        f"sent whole: {largest // 1000}k is {whole[largest] / whole[smallest]:.2f} × "
        f"{smallest // 1000}k; the median at {largest // 1000}k is "
        f"{whole[largest] / TIME_TO_FIRST_TOKEN:.1%} of a {TIME_TO_FIRST_TOKEN * 1000:.0f} ms "
        "time to first token"
    )
    print("\nthe request's messages alone, in this process (median of 30, after 5 to warm up)")
    for tokens in sizes:
        print(await encoding(tokens), flush=True)


async def encoding(tokens: int) -> str:
    """The messages of each next request encoded whole with json.dumps, and by the encoder
    (which has seen the previous request), at a history of `tokens`."""
    history = history_of(Path(tempfile.gettempdir()), tokens)
    encoder = RequestEncoder()
    whole, cached = [], []
    for call in range(35):
        request = [*history, {"role": "user", "content": f"<context>call {call}</context>"}]
        start = time.perf_counter()
        json.dumps(request, ensure_ascii=False, separators=(",", ":")).encode()
        middle = time.perf_counter()
        b"".join(await encoder.messages(request))
        end = time.perf_counter()
        if call >= 5:
            whole.append(middle - start)
            cached.append(end - middle)
        history.append({"role": "assistant", "content": f"answer {call}"})
    return (
        f"{tokens // 1000}k: json.dumps of the whole {statistics.median(whole) * 1000:6.2f} ms, "
        f"encoder with its cache (joined) {statistics.median(cached) * 1000:5.2f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", default="10000,100000,1000000")
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--server-path", type=Path, default=None)
    parser.add_argument(
        "--pace-ms",
        type=float,
        default=0.0,
        help="milliseconds between the deltas of each reply, as a model writes them (default: "
        "all at once, so the server reads the whole reply after its last byte)",
    )
    parser.add_argument("--dialect", choices=("openai", "anthropic"), default="openai")
    args = parser.parse_args()
    if args.server_path is not None:
        # The server is a child process: it imports lsp_agent from there first, once its working
        # directory (the first place `python -m` looks) holds no other copy.
        os.environ["PYTHONPATH"] = str(args.server_path.resolve())
        os.chdir(tempfile.gettempdir())
        print(f"server code from {args.server_path}")
    sizes = [int(size) for size in args.tokens.split(",")]
    # This process is the instrument (the client and the endpoint's clock): a collection of its
    # own garbage (each megabyte request it parses) must not land between two timestamps.
    gc.disable()
    asyncio.run(main_async(sizes, args.calls, args.pace_ms / 1000, args.dialect))


if __name__ == "__main__":
    main()
