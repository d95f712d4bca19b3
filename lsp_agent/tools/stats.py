"""Edit statistics: how often the model's edits land, how often at the first try, why they fail.

Every call of an edit tool (`edit_file`, `write_file`, `apply_patch`) is one `EditAttempt`: the
files it touched, whether the change landed, and otherwise the failure's reason (the `ToolError`
reason, or `rejected`/`stale` from the editor's answer). A session's `EditStats` counts them;
`combined` adds up several sessions for the overall figures. `to_json` is the shape shown by
`lspAgent.status` and recorded in the transcript; `EditAttempt.event` is the transcript event of
one attempt, and `EditStats.from_events` rebuilds a session's figures from those events.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

EDIT_TOOLS = frozenset({"edit_file", "write_file", "apply_patch"})
"""The tools whose calls count as edit attempts."""

REASONS: dict[str, str] = {
    "not_found": "old text or a hunk's lines not in the file, or no such file",
    "ambiguous": "old text or a hunk matches several places",
    "stale": "the file changed since the model read it (or while the editor applied)",
    "unread": "the file was never read in this session",
    "syntax": "the change would introduce a syntax error",
    "rejected": "the user rejected the edit in the editor",
    "exists": "write_file or an added file on an existing one",
    "overlap": "two hunks of one patch change the same lines",
    "bad_patch": "the patch text could not be read",
    "no_change": "the edit would change nothing",
    "empty_old": "edit_file with an empty old",
    "path": "a path outside the workspace, protected or read-only",
    "bad_arguments": "the call's arguments were malformed",
    "locked": "the tool belongs to a skill that was not loaded",
    "unsupported": "the editor cannot do it (e.g. delete files)",
    "editor": "the editor failed to apply it, or takes no edits at all",
    "denied": "a permission rule or the user refused the tool call",
}
"""The usual failure reasons and what they mean; any other reason is counted under its name."""


@dataclass(frozen=True)
class EditAttempt:
    """One call of an edit tool and how it ended."""

    tool: str
    paths: tuple[str, ...]
    """Workspace-relative files the call touched or tried to (may be empty if unknown)."""
    ok: bool
    """True when the change landed (applied in the editor or written)."""
    reason: str | None = None
    """For a failure: why (`REASONS`); None for a success."""

    def event(self) -> dict[str, Any]:
        """The transcript event for this attempt."""
        event: dict[str, Any] = {
            "type": "event",
            "kind": "edit",
            "tool": self.tool,
            "paths": list(self.paths),
            "ok": self.ok,
        }
        if not self.ok:
            event["reason"] = self.reason or "error"
        return event

    @classmethod
    def from_event(cls, event: Mapping[str, Any]) -> EditAttempt | None:
        """The attempt an `edit` transcript event records; None for any other event."""
        if event.get("type") != "event" or event.get("kind") != "edit":
            return None
        tool, paths, ok = event.get("tool"), event.get("paths"), event.get("ok")
        if not isinstance(tool, str) or not isinstance(ok, bool) or not isinstance(paths, list):
            return None
        reason = event.get("reason")
        return cls(
            tool,
            tuple(str(path) for path in paths),
            ok,
            None if ok else (reason if isinstance(reason, str) else "error"),
        )


@dataclass
class ToolFigures:
    """One tool's attempts and successes."""

    attempts: int = 0
    succeeded: int = 0


@dataclass
class EditStats:
    """Edit attempts of one session (or, `combined`, of several)."""

    attempts: int = 0
    succeeded: int = 0
    first_try: int = 0
    """Successes with no failed attempt on any of their files since those files last changed."""
    failures: dict[str, int] = field(default_factory=dict)
    """Failed attempts by reason."""
    by_tool: dict[str, ToolFigures] = field(default_factory=dict)
    _retrying: set[str] = field(default_factory=set, init=False, repr=False, compare=False)
    """Files whose last attempt failed: the next success on them is not a first try."""

    @property
    def failed(self) -> int:
        return self.attempts - self.succeeded

    def record(self, attempt: EditAttempt) -> None:
        """Count one attempt."""
        self.attempts += 1
        figures = self.by_tool.setdefault(attempt.tool, ToolFigures())
        figures.attempts += 1
        paths = set(attempt.paths)
        if attempt.ok:
            self.succeeded += 1
            figures.succeeded += 1
            if not paths & self._retrying:
                self.first_try += 1
            self._retrying -= paths
        else:
            reason = attempt.reason or "error"
            self.failures[reason] = self.failures.get(reason, 0) + 1
            self._retrying |= paths

    def to_json(self) -> dict[str, Any]:
        """The figures for `lspAgent.status` and the transcript.

        `successRate` = succeeded / attempts; `firstTryRate` = firstTry / succeeded, the share
        of landed edits that needed no retry (both null before any attempt / success).
        """
        return {
            "attempts": self.attempts,
            "succeeded": self.succeeded,
            "failed": self.failed,
            "firstTry": self.first_try,
            "successRate": _rate(self.succeeded, self.attempts),
            "firstTryRate": _rate(self.first_try, self.succeeded),
            "failures": dict(sorted(self.failures.items(), key=lambda item: (-item[1], item[0]))),
            "byTool": {
                tool: {"attempts": figures.attempts, "succeeded": figures.succeeded}
                for tool, figures in sorted(self.by_tool.items())
            },
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> EditStats:
        """Figures written by `to_json` (files awaiting a retry are not part of them)."""
        stats = cls(
            attempts=_count(data.get("attempts")),
            succeeded=_count(data.get("succeeded")),
            first_try=_count(data.get("firstTry")),
        )
        failures = data.get("failures")
        if isinstance(failures, Mapping):
            stats.failures = {str(k): _count(v) for k, v in failures.items()}
        tools = data.get("byTool")
        if isinstance(tools, Mapping):
            for tool, figures in tools.items():
                if isinstance(figures, Mapping):
                    stats.by_tool[str(tool)] = ToolFigures(
                        _count(figures.get("attempts")), _count(figures.get("succeeded"))
                    )
        return stats

    @classmethod
    def from_events(cls, events: Iterable[Mapping[str, Any]]) -> EditStats:
        """A session's figures rebuilt from its transcript events."""
        stats = cls()
        for event in events:
            attempt = EditAttempt.from_event(event)
            if attempt is not None:
                stats.record(attempt)
        return stats


def combined(all_stats: Iterable[EditStats]) -> EditStats:
    """The sum of several sessions' figures: the overall statistics."""
    total = EditStats()
    for stats in all_stats:
        total.attempts += stats.attempts
        total.succeeded += stats.succeeded
        total.first_try += stats.first_try
        for reason, count in stats.failures.items():
            total.failures[reason] = total.failures.get(reason, 0) + count
        for tool, figures in stats.by_tool.items():
            into = total.by_tool.setdefault(tool, ToolFigures())
            into.attempts += figures.attempts
            into.succeeded += figures.succeeded
    return total


def _rate(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0
