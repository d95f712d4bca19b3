"""Benchmark: the harness's own work per model call with a 100k-token history (target ≤ 10 ms).

Builds a stored history of about 100 000 tokens (bytes ÷ 3.5) from the scripted session of
`prefix_stability.py`, then times, per model call, what the loop does besides waiting for the
model: `before_call` (the compactAt guard), `build_request` with the reminder (`<context>` with
the branch, `<todos>`, `<file_changes>` from the git-status fallback, already compared this turn),
and the meter's bookkeeping for the reply and a tool result. Median and p95 over many calls, for
a history sent whole and for one whose old tool results are stubs.

It also times the decisions that run once per turn, for information: `end_of_turn` when nothing
is needed (the common case), `end_of_turn` deciding a strip over the whole 100k history, and the
git-status fallback's snapshot and comparison on the given repository.

Usage: .venv/bin/python benchmarks/overhead.py [--repo DIR] [--tokens N] [--runs N]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))

from prefix_stability import NoteWriter, Script, code_text

from lsp_agent.config import Settings
from lsp_agent.context.history import ContextState, before_call, build_request, end_of_turn
from lsp_agent.context.reminder import GitStatusChanges, reminder_message
from lsp_agent.context.tokens import Message, TokenMeter, request_bytes
from lsp_agent.messages import Usage
from lsp_agent.tools.todo import TodoItem

PLAN = [
    TodoItem("Reproduce the failure", "done"),
    TodoItem("Fix the tokenizer", "in_progress"),
    TodoItem("Run the whole suite", "pending"),
]


def history_of(tokens: int, seed: int = 3) -> list[Message]:
    """A stored history of about `tokens` tokens, from the scripted session."""
    rng = random.Random(seed)
    script = Script(rng, 10_000, cap=10_000)
    history: list[Message] = [{"role": "system", "content": "You are lsp-agent. " + "x" * 6000}]
    meter = TokenMeter()
    while meter.estimate(history) < tokens:
        history.append(script.prompt())
        for _ in range(script.calls_in_turn()):
            assistant, results = script.tool_step()
            history += [assistant, *results]
        history.append(script.answer())
    return history


def stats(samples: list[float]) -> str:
    ordered = sorted(samples)
    p95 = ordered[int(len(ordered) * 0.95) - 1]
    return f"median {statistics.median(samples) * 1000:7.3f} ms   p95 {p95 * 1000:7.3f} ms"


async def timed(action: Callable[[], Awaitable[object]], runs: int) -> list[float]:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        await action()
        samples.append(time.perf_counter() - start)
    return samples


async def measure(repo: Path, tokens: int, runs: int) -> None:
    history = history_of(tokens)
    settings = Settings()  # 128k window: 100k is past stripAt, below compactAt
    writer = NoteWriter()
    changes = GitStatusChanges(repo)
    await changes.snapshot()
    await changes.changes()  # the turn's comparison, done at its first call
    rng = random.Random(1)
    reply = {"role": "assistant", "content": "", "tool_calls": []}
    result = {"role": "tool", "tool_call_id": "x", "content": code_text(rng, 8000)}
    stripped, _ = await end_of_turn(history, ContextState(), settings, writer, TokenMeter())
    size = TokenMeter().estimate(history)
    print(f"stored history: {len(history)} messages, {size:,} tokens (bytes ÷ 3.5)")
    print(f"repository for the reminder: {repo}\n")

    for label, state in (("sent whole", ContextState()), ("old results stubbed", stripped)):
        meter = TokenMeter()
        view_bytes = request_bytes(build_request(history, state))
        meter.rebase(view_bytes)

        async def one_call(
            state: ContextState = state, meter: TokenMeter = meter, view_bytes: int = view_bytes
        ) -> None:
            state, _ = await before_call(history, state, settings, writer, meter)
            reminder = await reminder_message(
                repo, todos=PLAN, file_changes=await changes.changes()
            )
            build_request(history, state, reminder)
            meter.measured(Usage(size, 100, size - 500, False))
            meter.added(reply)
            meter.added(result)
            meter.rebase(
                view_bytes
            )  # the history stays at its size from one timed call to the next

        samples = await timed(one_call, runs)
        print(f"per model call, {label:<20} {stats(samples)}   (target: median ≤ 10 ms)")

    print()
    roomy = Settings(context_window=400_000)
    meter = TokenMeter()
    meter.rebase(request_bytes(history))
    quiet = await timed(lambda: end_of_turn(history, ContextState(), roomy, writer, meter), runs)
    print(f"end_of_turn, nothing to do          {stats(quiet)}")
    deciding = await timed(
        lambda: end_of_turn(history, ContextState(), settings, writer, TokenMeter()),
        max(runs // 10, 5),
    )
    print(f"end_of_turn, deciding a strip       {stats(deciding)}")
    status = await timed(lambda: _status_round(changes), max(runs // 10, 5))
    print(f"git status snapshot + comparison    {stats(status)}   (once per turn)")


async def _status_round(changes: GitStatusChanges) -> None:
    await changes.snapshot()
    await changes.changes()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument("--tokens", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=300)
    args = parser.parse_args()
    asyncio.run(measure(args.repo.resolve(), args.tokens, args.runs))


if __name__ == "__main__":
    main()
