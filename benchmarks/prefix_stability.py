"""Benchmark: how much of each request begins the next one, over bodies the server sent (≥ 0.99).

A scripted session of 50 model calls runs through `lsp-agent serve`, driven by a real LSP client
(`tests/editor.py`) against the scripted endpoint on loopback, which keeps every request body
as it arrived. The model's calls run the real tools on a real workspace: `read_file` on files of
2–20 KB, `bash` printing command outputs of up to 60 KB (capped on arrival to `toolOutputCap`,
spilled, in the real sandbox), `search` with ripgrep, `edit_file` through the editor's
`workspace/applyEdit`; several calls per turn. When the layers compact, the endpoint writes the
hand-off note (~3 KB) like a model would.

For each consecutive pair of the session's requests it measures the share of request N's bytes
(its body up to the trailing reminder, which is never stored) that are an exact prefix of request
N+1's body, and reports the mean over pairs where no layer rewrote the history, over pairs
without a compaction, over all pairs, and each cache-breaking event (strip / drop / compact, read
from the transcript) with its own pair's share. Tokens are bytes ÷ 3.8 (a tokenizer a little off
the 3.5 the estimates assume, as a real one is); a request's cached tokens are the bytes it
shares with the one before it, as a prefix cache would serve them.

With `--mcp`, a third session mixes in calls of an MCP server's tool (`tests/mcp_story_server.py`
over stdio, allowed by a rule): the session's tool list then holds the server's tools, fixed
when its first turn started the server.

Usage: .venv/bin/python benchmarks/prefix_stability.py [--calls N] [--window TOKENS] [--seed N]
       [--mcp]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import keyword
import random
import statistics
import subprocess
import sys
import tempfile
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lsp_agent.context.tokens import Message
from lsp_agent.session.store import SessionStore
from tests.editor import start_editor
from tests.fake_model import ScriptedModel, Step, reply, tool_call

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
    """What a served session sent, read from the endpoint's records and the transcript."""

    bodies: list[bytes] = field(default_factory=list)
    """Each request of the session as the endpoint received it, in order (not compactions)."""
    cuts: list[int] = field(default_factory=list)
    """For each body, where its trailing reminder begins."""
    events_before: list[list[dict[str, Any]]] = field(default_factory=list)
    """For each request, the layer events (transcript records) decided since the previous one."""
    compactions: list[bytes] = field(default_factory=list)
    """The bodies of the compaction calls (the hand-off notes' requests)."""

    @property
    def tokens(self) -> list[int]:
        """Each request's prompt tokens (simulated tokenizer), reminder included."""
        return [tokens_of(len(body)) for body in self.bodies]

    @property
    def cached(self) -> list[int]:
        """Of those, the tokens the previous request's bytes cover as a prefix."""
        previous = [b"", *self.bodies[:-1]]
        return [
            tokens_of(common_prefix(before, body)) if before else 0
            for before, body in zip(previous, self.bodies, strict=True)
        ]

    @property
    def compaction_tokens(self) -> int:
        """Tokens of the compaction calls, all uncached."""
        return sum(tokens_of(len(body)) for body in self.compactions)


def tokens_of(size: int) -> int:
    return int(size / BYTES_PER_TOKEN)


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


def reminder_cut(body: bytes) -> int:
    """Where the request's last message, the reminder, begins in its body."""
    reminder = json.loads(body)["messages"][-1]
    encoded = json.dumps(reminder, ensure_ascii=False, separators=(",", ":")).encode()
    at = body.rfind(encoded)
    if at < 0:
        raise ValueError("the reminder is not where it should be in the body")
    return at


@dataclass
class ServedScript:
    """The model's side of the session: per turn a plan of calls then an answer, and a
    hand-off note whenever the server asks for one."""

    rng: random.Random
    files: dict[str, list[str]]
    """The workspace's source files and their lines, as the model knows them."""
    logs: list[str]
    """Files whose `cat` prints a command's output."""
    mcp: bool = False
    """Mix in calls of the story server's `echo` tool."""
    plan: deque[Step] = field(default_factory=deque)
    edited: set[tuple[str, int]] = field(default_factory=set)
    read: set[str] = field(default_factory=set)

    def turn(self, calls: int) -> str:
        """Plan the next turn: `calls` model calls, the last one the answer; returns the prompt."""
        for _ in range(calls - 1):
            self.plan.append(self._tool())
        words = " ".join(self.rng.choice(WORDS) for _ in range(self.rng.randint(40, 250)))
        self.plan.append(reply(f"Done: {words}."))
        words = " ".join(self.rng.choice(WORDS) for _ in range(self.rng.randint(10, 60)))
        return f"Please {words}."

    def answer(self, body: dict[str, Any]) -> Step:
        """The step for one request of the server's: a note for a compaction, else the plan."""
        first = body["messages"][0].get("content", "")
        if isinstance(first, str) and first.startswith(COMPACTION_PROMPT_START):
            return reply(NOTE)
        return self.plan.popleft()

    def _tool(self) -> Step:
        if self.mcp and self.rng.random() < 0.25:
            words = " ".join(self.rng.choice(WORDS) for _ in range(self.rng.randint(50, 2_000)))
            return tool_call("mcp__story__echo", {"text": words})
        roll = self.rng.random()
        unread = [path for path in self.files if path not in self.read]
        if roll < 0.45 or not self.read:
            path = self.rng.choice(unread or list(self.files))
            self.read.add(path)
            return tool_call("read_file", {"path": path})
        if roll < 0.7:
            return tool_call("bash", {"command": f"cat {self.rng.choice(self.logs)}"})
        if roll < 0.85:
            word = self.rng.choice(WORDS)
            return tool_call("search", {"pattern": f"{word}_\\d+ = "})
        path = self.rng.choice(sorted(self.read))
        lines = self.files[path]
        free = [n for n in range(min(len(lines), 200)) if (path, n) not in self.edited]
        number = self.rng.choice(free)
        self.edited.add((path, number))
        old = lines[number]
        return tool_call("edit_file", {"path": path, "old": old, "new": old + "  # checked"})


COMPACTION_PROMPT_START = "You are compacting"
NOTE = (
    "## Goal\nThe user asked: 'make the parser fast'.\n## What happened\n"
    + "\n".join(f"- step {n}: {' '.join(WORDS)}" for n in range(30))
    + "\n## Files\nsrc/parser.py\n## State\nhalf done\n## Next\nrun the tests"
)


def make_workspace(base: Path, rng: random.Random) -> tuple[Path, dict[str, list[str]], list[str]]:
    """A git repository with source files of 2–20 KB and command outputs of up to 60 KB."""
    root = base / "project"
    (root / "src").mkdir(parents=True)
    (root / "logs").mkdir()
    files: dict[str, list[str]] = {}
    for index in range(40):
        path = f"src/{rng.choice(WORDS)}_{index}.py"
        lines = source_lines(rng, rng.randint(2_000, 20_000), index)
        (root / path).write_text("\n".join(lines) + "\n")
        files[path] = lines
    logs = []
    for index in range(20):
        size = int(min(60_000, rng.expovariate(1 / 9_000)) + 300)
        path = f"logs/run_{index}.txt"
        (root / path).write_text(code_text(rng, size) + "\n")
        logs.append(path)
    git = ["git", "-C", str(root), "-c", "user.name=b", "-c", "user.email=b@example.com"]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "start"], check=True)
    return root, files, logs


def source_lines(rng: random.Random, size: int, file: int) -> list[str]:
    """About `size` chars of Python, each line unique (an edit names it exactly)."""
    lines: list[str] = []
    total = 0
    names = [word for word in WORDS if not keyword.iskeyword(word)]
    while total < size:
        words = " + ".join(rng.choice(names) for _ in range(rng.randint(1, 6)))
        line = f"{rng.choice(names)}_{file}_{len(lines)} = {words}"
        lines.append(line)
        total += len(line) + 1
    return lines


STORY = Path(__file__).resolve().parents[1] / "tests" / "mcp_story_server.py"


async def serve_session(
    calls: int, settings: dict[str, Any], seed: int, *, mcp: bool = False
) -> Outcome:
    """Run `calls` model calls through `lsp-agent serve` with `settings`; what was sent."""
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory(prefix="lsp-agent-prefix-") as temp:
        base = Path(temp)
        root, files, logs = make_workspace(base, rng)
        state, home = base / "state", base / "home"
        state.mkdir()
        home.mkdir()
        if mcp:
            story = {"command": sys.executable, "args": [str(STORY), str(base / "marks")]}
            allowed = {"tool": "mcp__story__echo", "decision": "allow"}
            settings = {**settings, "mcpServers": {"story": story}, "permissions": [allowed]}
        script = ServedScript(rng, files, logs, mcp=mcp)
        with ScriptedModel() as model:
            every = {"baseUrl": model.base_url, "model": "test-model", **settings}
            editor = await start_editor(
                root, "visual-studio-code", every, state_dir=state, home=home
            )
            editor.answer = lambda _: "Allow"  # when no sandbox runs, every command asks
            try:
                session = (await editor.command("lspAgent.newSession", {})).session
                made = 0
                while made < calls:
                    turn = min(rng.randint(2, 8), calls - made)
                    prompt = script.turn(turn)
                    model.add(*[script.answer for _ in range(turn + 4)])
                    result = await editor.ask(prompt, session=session)
                    if result.status != "completed":
                        raise SystemExit(f"the turn ended {result.status}: {result.error}")
                    made += turn
            finally:
                await editor.client.shutdown_session()
                await editor.client.stop()
        records = SessionStore(root, state).open(session).records()
        return outcome_of(model, records)


def outcome_of(model: ScriptedModel, records: list[dict[str, Any]]) -> Outcome:
    """Split the endpoint's bodies into the session's requests and the compactions, and hang
    each layer event of the transcript before the request it preceded."""
    outcome = Outcome()
    for body, parsed in zip(model.bodies, model.requests, strict=True):
        first = parsed["messages"][0].get("content", "")
        if isinstance(first, str) and first.startswith(COMPACTION_PROMPT_START):
            outcome.compactions.append(body)
        else:
            outcome.bodies.append(body)
            outcome.cuts.append(reminder_cut(body))
    calls = 0
    pending: list[dict[str, Any]] = []
    outcome.events_before = [[] for _ in outcome.bodies]
    for record in records:
        if record.get("type") != "event":
            continue
        if record.get("kind") == "usage":
            outcome.events_before[calls] = pending
            pending = []
            calls += 1
        elif record.get("kind") == "compaction":
            pending.append(record)
    return outcome


def shares(outcome: Outcome) -> list[tuple[float, list[dict[str, Any]]]]:
    """For each consecutive pair: the share of N's bytes that begin N+1, and the events between."""
    found = []
    for index in range(len(outcome.bodies) - 1):
        before, after = outcome.bodies[index], outcome.bodies[index + 1]
        cut = outcome.cuts[index]
        share = common_prefix(before[:cut], after) / cut
        found.append((share, outcome.events_before[index + 1]))
    return found


def report(outcome: Outcome, label: str) -> None:
    pairs = shares(outcome)
    clean = [share for share, events in pairs if not events]
    no_compact = [
        share for share, events in pairs if all(e["strategy"] != "compact" for e in events)
    ]
    events = [event for _, found in pairs for event in found]
    print(f"{label}: {len(outcome.bodies)} model calls, {len(pairs)} consecutive pairs")
    print(
        f"  prefix share, pairs without any rewrite   {statistics.mean(clean):.5f}"
        f"  ({len(clean)} pairs; target ≥ 0.99)"
    )
    if no_compact:
        print(
            f"  prefix share, pairs without layer 4      {statistics.mean(no_compact):.5f}"
            f"  ({len(no_compact)} pairs, strip/drop pairs included)"
        )
    print(f"  prefix share, all pairs                   {statistics.mean(s for s, _ in pairs):.5f}")
    counts = {
        name: sum(e["strategy"] == name for e in events) for name in ("strip", "drop", "compact")
    }
    print(
        f"  cache-breaking events: {len(events)} ("
        + ", ".join(f"{name} {count}" for name, count in counts.items())
        + ")"
    )
    tokens, cached = outcome.tokens, outcome.cached
    for index, (share, found) in enumerate(pairs):
        reread = tokens[index + 1] - cached[index + 1]
        for event in found:
            print(
                f"    before call {index + 2}: {event['strategy']} at {event['point']}, "
                f"{event['before']:,} → {event['after']:,} tokens; pair share {share:.3f}, "
                f"{reread:,} tokens read uncached once"
            )
    results = [m for m in json.loads(outcome.bodies[-1])["messages"] if m["role"] == "tool"]
    failed = [m for m in results if str(m.get("content", "")).startswith("error")]
    print(f"  tool results in the last request: {len(results)}, of which errors: {len(failed)}")
    total, hit = sum(tokens), sum(cached)
    print(
        f"  prompt tokens sent {total:,}: {total - hit:,} uncached, {hit:,} served from the "
        f"prefix cache ({hit / total:.1%}); largest request {max(tokens):,}; compaction calls "
        f"{len(outcome.compactions)} ({outcome.compaction_tokens:,} tokens)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--window", type=int, default=128_000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--mcp", action="store_true", help="also a session with MCP tool calls")
    args = parser.parse_args()
    print("scripted session through lsp-agent serve; bodies as the endpoint received them\n")
    window = {"contextWindow": args.window}
    report(asyncio.run(serve_session(args.calls, window, args.seed)), f"window {args.window:,}")
    print()
    tight = {"contextWindow": 32_000}
    report(asyncio.run(serve_session(args.calls, tight, args.seed)), "same session, window 32,000")
    if args.mcp:
        print()
        served = asyncio.run(serve_session(args.calls, window, args.seed, mcp=True))
        report(served, f"a session with MCP tool calls, window {args.window:,}")


if __name__ == "__main__":
    main()
