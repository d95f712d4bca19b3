"""Print a pip constraints file that pins every runtime dependency to the lowest version
`pyproject.toml` declares (`name>=X` → `name==X`).

`scripts/test.sh` installs the package with it into a second virtualenv and runs the server's
tests there too, so a declared lower bound that the code no longer works with fails CI, not a
user's install. A dependency declared without a lower bound is an error: it would leave the
oldest release anyone could get untested.

Usage: python3 scripts/lower_bounds.py [pyproject.toml] > constraints.txt
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*(.*?)\s*(;.*)?$")
RUNTIME_EXTRAS = ("mcp",)
"""Extras whose packages the server imports (pinned too)."""

LOWER = re.compile(r">=\s*([0-9][A-Za-z0-9.+!-]*)")


def lower_bounds(pyproject: Path) -> list[str]:
    """`name==version` for each runtime dependency, at its declared lower bound."""
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    pins = []
    # The runtime dependencies, and those of the extras a user installs to run the server
    # (not `test`, the tests' own tools).
    extras = project.get("optional-dependencies", {})
    runtime = [*project["dependencies"], *(r for name in RUNTIME_EXTRAS for r in extras[name])]
    for requirement in runtime:
        match = REQUIREMENT.match(requirement)
        if match is None:
            raise SystemExit(f"cannot read the requirement {requirement!r}")
        name, _, specifiers, _ = match.groups()
        lower = LOWER.search(specifiers or "")
        if lower is None:
            raise SystemExit(
                f"{name} has no lower bound (name>=X): declare the oldest it works with"
            )
        pins.append(f"{name}=={lower.group(1)}")
    return pins


def main() -> None:
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parents[1] / "pyproject.toml"
    print("\n".join(lower_bounds(path)))


if __name__ == "__main__":
    main()
