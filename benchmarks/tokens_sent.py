"""Benchmark: prompt tokens a long session sends, managed versus unmanaged (target ≤ 0.5×).

The same scripted 200-call session as `prefix_stability.py` (files of 2–20 KB, command outputs
of up to 60 KB, searches, edits; several calls per turn) runs twice through `lsp-agent serve`,
and the tokens are counted on the request bodies the scripted endpoint received:

- managed: the default settings (128k window, cap on arrival at 10 000 chars, strip at 0.5,
  drop and compact at 0.85 down to 0.35);
- unmanaged: every layer off (`toolOutputCap` and `contextWindow` out of reach).

For each it prints the prompt tokens summed over all calls (bytes ÷ 3.8), the uncached part (what
a prefix cache could not serve: the bytes a request does not share with the one before it) and
the cache share; the compaction calls the managed session made count in full, as uncached.

Usage: .venv/bin/python benchmarks/tokens_sent.py [--calls N] [--seed N]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))

from prefix_stability import Outcome, serve_session

UNMANAGED = {"contextWindow": 1_000_000_000, "toolOutputCap": 1_000_000_000}


def totals(outcome: Outcome) -> tuple[int, int]:
    """Tokens sent and, of those, uncached; compaction calls included (uncached)."""
    sent = sum(outcome.tokens) + outcome.compaction_tokens
    uncached = sent - sum(outcome.cached)
    return sent, uncached


def describe(label: str, outcome: Outcome) -> None:
    sent, uncached = totals(outcome)
    print(
        f"  {label:<10} {sent:>13,} tokens sent, {uncached:>12,} uncached "
        f"(cache share {1 - uncached / sent:.1%}), largest request {max(outcome.tokens):>9,}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    print("scripted session through lsp-agent serve; bodies as the endpoint received them")
    print(f"{args.calls} model calls\n")
    managed = asyncio.run(serve_session(args.calls, {}, args.seed))
    unmanaged = asyncio.run(serve_session(args.calls, UNMANAGED, args.seed))
    describe("managed", managed)
    describe("unmanaged", unmanaged)
    events = [event for found in managed.events_before for event in found]
    counts = {
        name: sum(e["strategy"] == name for e in events) for name in ("strip", "drop", "compact")
    }
    print("  managed events: " + ", ".join(f"{name} {count}" for name, count in counts.items()))
    (sent_m, uncached_m), (sent_u, uncached_u) = totals(managed), totals(unmanaged)
    print(f"\ntokens sent, managed / unmanaged: {sent_m / sent_u:.3f}×  (target ≤ 0.5×)")
    print(f"uncached tokens, managed / unmanaged: {uncached_m / uncached_u:.3f}×")


if __name__ == "__main__":
    main()
