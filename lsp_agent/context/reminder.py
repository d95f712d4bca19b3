"""The reminder: a user message appended to each request, never stored.

It carries what changes between requests (the time, the git branch) so the system prompt and
the stored history stay byte-identical from one request to the next: the prefix cache hits.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timezone
from pathlib import Path


async def git_branch(root: Path) -> str | None:
    """The checked-out branch, "(detached)", or None outside a git repository."""
    try:
        process = await asyncio.create_subprocess_exec(
            "git",
            "-C",
            str(root),
            "rev-parse",
            "--abbrev-ref",
            "HEAD",
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            stdin=asyncio.subprocess.DEVNULL,
        )
    except OSError:
        return None
    out, _ = await process.communicate()
    if process.returncode != 0:
        return None
    name = out.decode("utf-8", "replace").strip()
    return "(detached)" if name == "HEAD" else name


def render(root: Path, branch: str | None, now: datetime | None = None) -> str:
    """The reminder text. Minute resolution: finer would only churn the tail of the request."""
    moment = (now or datetime.now(timezone.utc)).strftime("%Y-%m-%d %H:%M %Z").strip()
    lines = [
        "<context>",
        f"time: {moment}",
        f"git branch: {branch}" if branch else "git: not a git repository",
        f"workspace root: {root}",
        "</context>",
    ]
    return "\n".join(lines)


async def reminder_message(root: Path) -> dict[str, str]:
    """The user message that ends every request."""
    return {"role": "user", "content": render(root, await git_branch(root))}
