"""Benchmark: prompt tokens sent over a long session, managed versus unmanaged (target ≤ 0.5×).

The same scripted 200-call session as `prefix_stability.py` (files of 2–20 KB, command outputs up
to 60 KB, searches, edits; several calls per turn) runs twice through the context machinery:

- managed: default settings (128k window, cap on arrival at 10 000 chars, strip at 0.5, drop and
  compact at 0.85 down to 0.35);
- unmanaged: every layer off (no cap either) and an unlimited window.

It prints the prompt tokens summed over all calls (simulated tokenizer, ~3.8 bytes a token) for
both, their ratio, and the uncached part (what the prefix cache could not serve). The compaction
model, when needed, is an in-process fake that writes a ~3 KB note.

Usage: .venv/bin/python benchmarks/tokens_sent.py [--calls N] [--seed N]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))

from prefix_stability import Outcome, simulate

from lsp_agent.config import Settings


def describe(label: str, outcome: Outcome) -> None:
    total, cached = sum(outcome.tokens), sum(outcome.cached)
    print(
        f"  {label:<10} {total:>13,} tokens sent, {total - cached:>12,} uncached, "
        f"largest request {max(outcome.tokens):>9,}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    print("scripted in-process session; compaction by an in-process fake model (no HTTP)")
    print(f"{args.calls} model calls\n")
    managed = asyncio.run(simulate(args.calls, Settings(), args.seed))
    unmanaged = asyncio.run(simulate(args.calls, None, args.seed))
    describe("managed", managed)
    describe("unmanaged", unmanaged)
    events = [event for found in managed.events_before for event in found]
    counts = {
        name: sum(e.strategy == name for e in events) for name in ("strip", "drop", "compact")
    }
    print("  managed events: " + ", ".join(f"{name} {count}" for name, count in counts.items()))
    ratio = sum(managed.tokens) / sum(unmanaged.tokens)
    uncached = (sum(managed.tokens) - sum(managed.cached)) / (
        sum(unmanaged.tokens) - sum(unmanaged.cached)
    )
    print(f"\ntokens sent, managed / unmanaged: {ratio:.3f}×  (target ≤ 0.5×)")
    print(f"uncached tokens, managed / unmanaged: {uncached:.3f}×")


if __name__ == "__main__":
    main()
