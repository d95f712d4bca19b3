"""Benchmark: how much of each request begins the next one (DESIGN §8 target: ≥ 0.99).

A scripted session of 50 model calls runs through the context machinery exactly as the loop
does: `before_call`, `build_request` + reminder, the call, the reply and tool results stored,
`end_of_turn` at each turn's end. Tool outputs are realistic in size: files of 2–20 KB, command
outputs up to 60 KB (capped on arrival to `toolOutputCap` chars, head and tail inline, as layer 1
does), searches and edit results. No LSP and no HTTP: the model's replies are scripted in
process, and so is the compaction model (an in-process fake that writes a ~3 KB note).

For each consecutive pair of requests it measures the share of request N's bytes (its messages
without the trailing reminder, serialized as sent) that are an exact prefix of request N+1, and
reports the mean over pairs where no layer rewrote the history, the mean over all pairs, and the
cache-breaking events (strip / drop / compact) with their own shares.

Usage: .venv/bin/python benchmarks/prefix_stability.py [--calls N] [--window TOKENS] [--seed N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lsp_agent.config import Settings
from lsp_agent.context.history import (
    ContextEvent,
    ContextState,
    before_call,
    build_request,
    end_of_turn,
)
from lsp_agent.context.reminder import render
from lsp_agent.context.tokens import Message, TokenMeter, request_bytes
from lsp_agent.messages import Reply, Usage

BYTES_PER_TOKEN = 3.8
"""The simulated tokenizer: a little off the 3.5 the estimates assume, as a real one is."""

WORDS = [
    "def",
    "class",
    "return",
    "self",
    "value",
    "parse",
    "token",
    "index",
    "cache",
    "store",
    "event",
    "queue",
    "render",
]


class NoteWriter:
    """The compaction model, in process: a hand-off note of about 3 KB, instantly."""

    name = "openai"
    model = "in-process-fake"
    base_url = "memory://"

    def __init__(self) -> None:
        self.calls = 0

    async def complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], on_text: Any
    ) -> Reply:
        self.calls += 1
        body = "\n".join(f"- step {n}: {' '.join(WORDS)}" for n in range(30))
        note = (
            f"## Goal\nThe user asked: 'make the parser fast'.\n## What happened\n{body}\n"
            "## Files\nsrc/parser.py\n## State\nhalf done\n## Next\nrun the tests"
        )
        return Reply(note, (), Usage(0, 0, None, True), "stop")

    async def list_models(self) -> list[str]:
        return [self.model]

    async def aclose(self) -> None:
        pass


def code_text(rng: random.Random, size: int) -> str:
    """About `size` chars of numbered source lines, as read_file returns them."""
    lines: list[str] = []
    total = 0
    number = 1
    while total < size:
        line = f"{number:6}\t    " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 9)))
        lines.append(line)
        total += len(line) + 1
        number += 1
    return "\n".join(lines)


def cap(text: str, limit: int) -> str:
    """Layer 1 as the toolbox applies it: head and tail inline, a note about the spill file."""
    if len(text) <= limit:
        return text
    head, tail = text[: limit * 3 // 4], text[-limit // 4 :]
    note = (
        f"[… {len(text) - len(head) - len(tail):,} of {len(text):,} chars cut here. The whole "
        "output is in /tmp/lsp-agent-spill/1.txt: page it with bash (head -n, tail -n, "
        "sed -n '200,300p', grep -n). It is deleted when this turn ends.]"
    )
    return f"{head}\n{note}\n{tail}"


def untrusted(text: str, source: str) -> str:
    return f'<untrusted source="{source}">\n{text}\n</untrusted>'


@dataclass
class Script:
    """The session the model plays: per turn a prompt, then calls, then an answer."""

    rng: random.Random
    calls_left: int
    cap: int | None
    """Layer 1's `toolOutputCap`; None when the layers are off."""
    ids: int = 0

    def prompt(self) -> Message:
        words = " ".join(self.rng.choice(WORDS) for _ in range(self.rng.randint(10, 60)))
        return {"role": "user", "content": f"Please {words}."}

    def calls_in_turn(self) -> int:
        return self.rng.randint(2, 8)

    def tool_step(self) -> tuple[Message, list[Message]]:
        """An assistant message with one or two tool calls, and their results."""
        calls, results = [], []
        for _ in range(1 if self.rng.random() < 0.8 else 2):
            self.ids += 1
            name, arguments, output = self._tool()
            calls.append(
                {
                    "id": f"call_{self.ids}",
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps(arguments)},
                }
            )
            results.append({"role": "tool", "tool_call_id": f"call_{self.ids}", "content": output})
        text = "" if self.rng.random() < 0.6 else "Let me check " + self.rng.choice(WORDS) + "."
        return {"role": "assistant", "content": text, "tool_calls": calls}, results

    def answer(self) -> Message:
        words = " ".join(self.rng.choice(WORDS) for _ in range(self.rng.randint(40, 250)))
        return {"role": "assistant", "content": f"Done: {words}."}

    def _tool(self) -> tuple[str, dict[str, Any], str]:
        roll = self.rng.random()
        if roll < 0.45:
            path = f"src/{self.rng.choice(WORDS)}_{self.rng.randint(1, 99)}.py"
            text = code_text(self.rng, self.rng.randint(2_000, 20_000))
            return "read_file", {"path": path}, untrusted(self._capped(text), path)
        if roll < 0.7:
            size = int(min(60_000, self.rng.expovariate(1 / 9_000)) + 300)
            text = code_text(self.rng, size)
            return "bash", {"command": "pytest -q"}, untrusted(self._capped(text), "bash")
        if roll < 0.85:
            text = code_text(self.rng, self.rng.randint(500, 5_000))
            return "search", {"pattern": "def \\w+"}, untrusted(self._capped(text), "search")
        old, new = code_text(self.rng, 200), code_text(self.rng, 240)
        return "edit_file", {"path": "src/a.py", "old": old, "new": new}, "applied"

    def _capped(self, text: str) -> str:
        return text if self.cap is None else cap(text, self.cap)


@dataclass
class Outcome:
    """What a simulated session sent."""

    requests: list[bytes] = field(default_factory=list)
    """Each request's messages without the reminder, serialized as sent."""
    tokens: list[int] = field(default_factory=list)
    """Each request's prompt tokens (simulated tokenizer), reminder included."""
    cached: list[int] = field(default_factory=list)
    """Of those, the tokens the previous request's prefix covers."""
    events_before: list[list[ContextEvent]] = field(default_factory=list)
    """For each request, the layer events decided since the previous one."""
    compactions: int = 0


def serialize(messages: Sequence[Message]) -> bytes:
    return json.dumps(list(messages), ensure_ascii=False).encode()


def common_prefix(a: bytes, b: bytes) -> int:
    """Length of the longest common prefix (binary search over slices compared in C)."""
    low, high = 0, min(len(a), len(b))
    view_a, view_b = memoryview(a), memoryview(b)
    while low < high:
        middle = (low + high + 1) // 2
        if view_a[:middle] == view_b[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


async def simulate(calls: int, settings: Settings | None, seed: int) -> Outcome:
    """Run `calls` model calls; `settings` None means every layer off and an unlimited window."""
    rng = random.Random(seed)
    script = Script(rng, calls, settings.tool_output_cap if settings is not None else None)
    writer = NoteWriter()
    history: list[Message] = [
        {"role": "system", "content": "You are lsp-agent. " + code_text(rng, 6000)},
    ]
    meter = TokenMeter()
    state = ContextState()
    outcome = Outcome()
    pending: list[ContextEvent] = []
    previous_sent = b""
    root = Path("/workspace")

    def store(message: Message) -> None:
        history.append(message)
        meter.added(message)

    meter.rebase(request_bytes(history))
    made = 0
    while made < calls:
        store(script.prompt())
        turn_calls = min(script.calls_in_turn(), calls - made)
        for step in range(turn_calls):
            if settings is not None:
                state, events = await before_call(history, state, settings, writer, meter)
                pending += events
            view = build_request(history, state)
            reminder = {"role": "user", "content": render(root, "main")}
            sent = serialize([*view, reminder])
            prompt = int(len(sent) / BYTES_PER_TOKEN) + 1
            cached = int(common_prefix(previous_sent, sent) / BYTES_PER_TOKEN)
            previous_sent = sent
            outcome.requests.append(serialize(view))
            outcome.tokens.append(prompt)
            outcome.cached.append(cached)
            outcome.events_before.append(pending)
            pending = []
            meter.measured(Usage(prompt, 50, cached, False))
            made += 1
            if step == turn_calls - 1:
                store(script.answer())
                break
            assistant, results = script.tool_step()
            store(assistant)
            for result in results:
                store(result)
        if settings is not None:
            state, events = await end_of_turn(history, state, settings, writer, meter)
            pending += events
    outcome.compactions = writer.calls
    return outcome


def shares(outcome: Outcome) -> list[tuple[float, list[ContextEvent]]]:
    """For each consecutive pair: the share of N's bytes that begin N+1, and the events between."""
    found = []
    for index in range(len(outcome.requests) - 1):
        before, after = outcome.requests[index], outcome.requests[index + 1]
        found.append((common_prefix(before, after) / len(before), outcome.events_before[index + 1]))
    return found


def report(outcome: Outcome, label: str) -> None:
    pairs = shares(outcome)
    clean = [share for share, events in pairs if not events]
    no_compact = [share for share, events in pairs if all(e.strategy != "compact" for e in events)]
    events = [event for _, found in pairs for event in found]
    print(f"{label}: {len(outcome.requests)} model calls, {len(pairs)} consecutive pairs")
    print(
        f"  prefix share, pairs without any rewrite   {statistics.mean(clean):.5f}"
        f"  ({len(clean)} pairs; target ≥ 0.99)"
    )
    print(
        f"  prefix share, pairs without layer 4      {statistics.mean(no_compact):.5f}"
        f"  ({len(no_compact)} pairs, strip/drop pairs included)"
    )
    print(f"  prefix share, all pairs                   {statistics.mean(s for s, _ in pairs):.5f}")
    print(f"  cache-breaking events: {len(events)}", end="")
    counts = {
        name: sum(e.strategy == name for e in events) for name in ("strip", "drop", "compact")
    }
    print(" (" + ", ".join(f"{name} {count}" for name, count in counts.items()) + ")")
    for index, (share, found) in enumerate(pairs):
        reread = outcome.tokens[index + 1] - outcome.cached[index + 1]
        for event in found:
            print(
                f"    before call {index + 2}: {event.strategy} at {event.point}, "
                f"{event.before:,} → {event.after:,} tokens; pair share {share:.3f}, "
                f"{reread:,} tokens read uncached once"
            )
    total, cached = sum(outcome.tokens), sum(outcome.cached)
    print(
        f"  prompt tokens sent {total:,}, of which served from the prefix cache {cached:,} "
        f"({cached / total:.1%}); largest request {max(outcome.tokens):,} (simulated tokenizer)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--window", type=int, default=128_000)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    print("scripted in-process session; compaction by an in-process fake model (no HTTP)\n")
    settings = Settings(context_window=args.window)
    report(asyncio.run(simulate(args.calls, settings, args.seed)), f"window {args.window:,}")
    tight = Settings(context_window=32_000)
    print()
    report(asyncio.run(simulate(args.calls, tight, args.seed)), "same session, window 32,000")


if __name__ == "__main__":
    main()
