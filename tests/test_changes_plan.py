"""Where the watches go: the walk that cuts a tree into areas around the folders never watched.

Plain folders on disk, no watcher: each story builds a tree and reads the plan.
"""

from __future__ import annotations

from pathlib import Path

from lsp_agent.changes.plan import Area, kept_folders, plan

SKIPPED = {".git", "node_modules", "__pycache__", "build"}


def skip(rel: str) -> bool:
    return rel.rpartition("/")[2] in SKIPPED


def folders(root: Path, *rels: str) -> None:
    for rel in rels:
        (root / rel).mkdir(parents=True, exist_ok=True)


def summary(areas: list[Area]) -> list[tuple[str, bool, int]]:
    return [(area.rel, area.recursive, len(area.dirs)) for area in areas]


def test_a_tree_without_skipped_folders_is_one_recursive_watch(tmp_path: Path) -> None:
    folders(tmp_path, "src/pkg/sub", "docs", "tests")

    areas = plan(tmp_path, "", skip)

    assert summary(areas) == [("", True, 6)]
    assert set(areas[0].dirs) == {"", "src", "src/pkg", "src/pkg/sub", "docs", "tests"}


def test_a_folder_with_node_modules_below_is_watched_alone_and_its_other_folders_recursively(
    tmp_path: Path,
) -> None:
    folders(tmp_path, ".git/objects/ab", "src/pkg", "web/node_modules/react/lib", "web/app/ui")
    (tmp_path / "README.md").write_text("x\n")

    areas = plan(tmp_path, "", skip)

    assert summary(areas) == [
        ("", False, 1),
        ("src", True, 2),
        ("web", False, 1),
        ("web/app", True, 2),
    ]
    assert areas[0].children == ("src", "web")
    assert areas[2].children == ("web/app",)
    assert not any(".git" in d or "node_modules" in d for area in areas for d in area.dirs)


def test_an_empty_skipped_folder_stays_inside_a_recursive_watch(tmp_path: Path) -> None:
    # A __pycache__ in every package: one thread for the tree, one inotify watch each.
    folders(tmp_path, "pkg/__pycache__", "pkg/a/__pycache__", "pkg/b/__pycache__")
    (tmp_path / "pkg" / "__pycache__" / "x.pyc").write_bytes(b"\0")

    areas = plan(tmp_path, "", skip)

    assert summary(areas) == [("", True, 7)]
    assert "pkg/a/__pycache__" in areas[0].dirs


def test_a_skipped_folder_that_gains_a_folder_cuts_the_tree(tmp_path: Path) -> None:
    folders(tmp_path, "pkg/a/__pycache__", "pkg/b")
    assert summary(plan(tmp_path, "", skip)) == [("", True, 5)]

    folders(tmp_path, "pkg/a/__pycache__/deeper")

    assert summary(plan(tmp_path, "", skip)) == [
        ("", False, 1),
        ("pkg", False, 1),
        ("pkg/a", False, 1),
        ("pkg/b", True, 1),
    ]


def test_links_are_neither_followed_nor_counted(tmp_path: Path) -> None:
    folders(tmp_path, "src", "elsewhere/node_modules/x")
    (tmp_path / "src" / "link").symlink_to(tmp_path / "elsewhere", target_is_directory=True)

    areas = plan(tmp_path, "src", skip)

    assert summary(areas) == [("src", True, 1)]


def test_a_walk_stopped_midway_plans_nothing(tmp_path: Path) -> None:
    folders(tmp_path, *(f"d{i}/e" for i in range(20)))
    asked: list[bool] = []

    def stopped() -> bool:
        asked.append(True)
        return len(asked) > 3

    assert plan(tmp_path, "", skip, stopped) == []
    assert len(asked) == 4
    assert plan(tmp_path, "missing", skip) == []


def test_kept_folders_leave_out_skipped_ones_and_links(tmp_path: Path) -> None:
    folders(tmp_path, "a", "b", "build", "node_modules")
    (tmp_path / "c").symlink_to(tmp_path / "a", target_is_directory=True)

    assert sorted(kept_folders(tmp_path, "", skip)) == ["a", "b"]
