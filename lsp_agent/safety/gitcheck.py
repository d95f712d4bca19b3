"""`git`, judged: the read-only subcommands, their options, and where their output comes from.

Allowed unasked: status, diff, log, show, blame, grep, ls-files, ls-tree, rev-parse, rev-list,
branch and tag (listing), describe, shortlog, reflog, stash list/show, merge-base, show-ref,
for-each-ref, name-rev, count-objects, worktree list, version — each with its known options
only. Refused outright: `-c`, `--git-dir`, `--work-tree`, `--exec-path`, `--output`,
`--ext-diff`, `--no-index`, `--untracked` and the like. git must run in the workspace's own
repository: a nested one has a config of its own, which may run programs.

What git prints from history is judged too. `git show REV:PATH` reads PATH, judged like any
path. The commands that print file content for paths they were not given one by one
(`git show REV`, `git log -p`, `git diff`, `git grep`, pickaxe searches) run unasked only when
the repository's index and history hold no secret-named file, which `RepositoryFacts` asks git
once per state of the repository's refs.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from lsp_agent.git import run_sync
from lsp_agent.safety import options as opt
from lsp_agent.safety.options import Parsed, Spec, spec
from lsp_agent.safety.paths import Ask, Places, Situation, path_concern
from lsp_agent.safety.protected import SECRET_NAMES, common_dir, git_dir

FACTS_TIMEOUT_S = 5.0
"""How long git may take to say whether a secret is in the repository's history."""

_GLOBAL_FLAGS = frozenset(
    {"--no-pager", "-P", "--no-optional-locks", "--literal-pathspecs", "--glob-pathspecs",
     "--noglob-pathspecs", "--icase-pathspecs", "--no-replace-objects"}
)  # fmt: skip

_DIFF = (
    "-p:patch -u:patch --patch:patch -s:no_patch --no-patch:no_patch -U= --unified= --raw "
    "--patch-with-raw:patch --patch-with-stat:patch --stat=? --stat-width= --stat-name-width= "
    "--stat-count= --stat-graph-width= --compact-summary --numstat --shortstat --dirstat=? "
    "--cumulative --dirstat-by-file=? --summary --name-only --name-status --submodule! -z "
    "--color=? --no-color --color-moved=? --no-color-moved --color-moved-ws= "
    "--no-color-moved-ws --word-diff=? --word-diff-regex= --color-words=? --no-renames "
    "--rename-empty --no-rename-empty --check --ws-error-highlight= --full-index --binary "
    "--abbrev=? -B=? --break-rewrites=? -M=? --find-renames=? -C=? --find-copies=? "
    "--find-copies-harder -D --irreversible-delete -l= --diff-filter= -S=:pickaxe "
    "-G=:pickaxe --find-object= --pickaxe-all --pickaxe-regex -O@ --skip-to= --rotate-to= "
    "-R --relative=? --no-relative -a --text --ignore-cr-at-eol --ignore-space-at-eol -b "
    "--ignore-space-change -w --ignore-all-space --ignore-blank-lines --ignore-matching-lines= "
    "-I= --inter-hunk-context= -W:patch --function-context:patch --exit-code --quiet "
    "--no-ext-diff --textconv --no-textconv --ignore-submodules=? --src-prefix= "
    "--dst-prefix= --no-prefix --default-prefix --line-prefix= --ita-invisible-in-index "
    "--ita-visible-in-index --minimal --patience --histogram --anchored= --diff-algorithm= "
    "--indent-heuristic --no-indent-heuristic --output! --ext-diff! --output-indicator-new= "
    "--output-indicator-old= --output-indicator-context= "
)
_REVISIONS = (
    "-n= --max-count= --skip= --since= --after= --since-as-filter= --until= --before= "
    "--author= --committer= --grep-reflog= --grep= --all-match --invert-grep -i "
    "--regexp-ignore-case --basic-regexp -E --extended-regexp -F --fixed-strings -P "
    "--perl-regexp --remove-empty --merges --no-merges --min-parents= --max-parents= "
    "--no-min-parents --no-max-parents --first-parent --exclude-first-parent-only --not --all "
    "--branches=? --tags=? --remotes=? --glob= --exclude= --exclude-hidden= --reflog "
    "--alternate-refs --single-worktree --ignore-missing --bisect --cherry-mark --cherry-pick "
    "--left-only --right-only --cherry -g --walk-reflogs --merge --boundary "
    "--simplify-by-decoration --full-history --dense --sparse --simplify-merges "
    "--ancestry-path=? --show-pulls --date-order --author-date-order --topo-order --reverse "
    "--no-walk=? --do-walk --format= --pretty=? --oneline --abbrev-commit "
    "--no-abbrev-commit --encoding= --expand-tabs=? --no-expand-tabs --notes=? --no-notes "
    "--show-notes=? --standard-notes --no-standard-notes --show-signature --relative-date "
    "--date= --parents --children --left-right --graph --show-linear-break=? "
    "--decorate=? --no-decorate --decorate-refs= --decorate-refs-exclude= "
    "--clear-decorations --source --use-mailmap --mailmap --no-mailmap --no-use-mailmap "
    "--full-diff --log-size -L=:patch --follow -m -c:patch --cc:patch --dd:patch "
    "--diff-merges= --no-diff-merges --combined-all-paths --remerge-diff:patch -t -r "
    "--no-abbrev --stdin "
)
_OK = " -h --help"


def _git_spec(notation: str, **kwargs: object) -> Spec:
    """git's own option parser: no abbreviations accepted here; short options joined
    (`status -sb`, `shortlog -sn`) as git's parse-options takes them."""
    kwargs.setdefault("abbreviations", False)
    return spec(notation + _OK, **kwargs)


SUBCOMMANDS: dict[str, Spec] = {
    "status": _git_spec(
        "-s --short -b --branch --show-stash --porcelain=? --long -v --verbose -u=? "
        "--untracked-files=? --ignore-submodules=? --ignored=? -z --column=? --no-column "
        "--ahead-behind --no-ahead-behind --renames --no-renames --find-renames=?"
    ),
    "diff": _git_spec(
        _DIFF + "--cached --staged --merge-base --no-index! -1 -2 -3 -0 --base --ours --theirs",
        refused_why="writes a file, runs a program or compares files outside the repository",
    ),
    "log": _git_spec(_DIFF + _REVISIONS, numbers=True),
    "show": _git_spec(_DIFF + _REVISIONS, numbers=True),
    "reflog": _git_spec(_DIFF + _REVISIONS, numbers=True),
    "rev-list": _git_spec(
        _REVISIONS + " --count --objects --objects-edge --no-object-names --timestamp "
        "--header --quiet --max-age= --min-age=",
        numbers=True,
    ),
    "shortlog": _git_spec(
        _REVISIONS + " -n --numbered -s --summary -e --email -c --committer --format=? "
        "--group= -w=?",
        numbers=True,
    ),
    "blame": _git_spec(
        "-b --root --show-stats -L= -l -t -S@ --reverse= --first-parent -p --porcelain "
        "--line-porcelain --incremental --encoding= --contents@ --date= --progress "
        "--no-progress -M=? -C=? --ignore-rev= --ignore-revs-file@ --color-lines "
        "--color-by-age --minimal -c --score-debug -f --show-name -n --show-number -s -e "
        "--show-email -w --abbrev=?"
    ),
    "grep": _git_spec(
        "--cached --no-index! --untracked! --no-exclude-standard! --exclude-standard "
        "--recurse-submodules! -a --text --textconv --no-textconv -i --ignore-case -I "
        "--max-depth= -r --recursive --no-recursive -w --word-regexp -v --invert-match -h -H "
        "--full-name -E --extended-regexp -G --basic-regexp -P --perl-regexp -F "
        "--fixed-strings -n --line-number --column -l --files-with-matches --name-only -L "
        "--files-without-match -O! --open-files-in-pager! -z --null -o --only-matching -c "
        "--count --color=? --no-color --break --heading -p --show-function -A= -B= -C= "
        "--after-context= --before-context= --context= -W --function-context -m= "
        "--max-count= --threads= -f@:pattern -e=:pattern --and --or --not --all-match -q "
        "--quiet",
        numbers=True,
        refused_why="reads files git does not track or runs a program",
    ),
    "ls-files": _git_spec(
        "-c --cached -d --deleted -m --modified -o --others -i --ignored -s --stage -u "
        "--unmerged -k --killed --directory --no-empty-directory --eol --deduplicate -x= "
        "--exclude= -X@ --exclude-from@ --exclude-per-directory= --exclude-standard "
        "--error-unmatch --with-tree= -t -v -f --full-name --recurse-submodules --abbrev=? "
        "--debug --sparse --format= -z"
    ),
    "ls-tree": _git_spec(
        "-d -r -t -l --long -z --name-only --name-status --object-only --full-name "
        "--full-tree --abbrev=? --format="
    ),
    "rev-parse": _git_spec(
        "--abbrev-ref=? --short=? --verify -q --quiet --symbolic --symbolic-full-name "
        "--show-toplevel --show-prefix --show-cdup --git-dir --absolute-git-dir "
        "--git-common-dir --is-inside-git-dir --is-inside-work-tree --is-bare-repository "
        "--is-shallow-repository --show-superproject-working-tree --show-object-format=? "
        "--show-ref-format --all --branches=? --tags=? --remotes=? --glob= --exclude= "
        "--disambiguate= --since= --after= --until= --before= --default= --revs-only "
        "--no-revs --flags --no-flags --sq --not --local-env-vars --git-path= "
        "--shared-index-path --end-of-options --prefix= --path-format="
    ),
    "branch": _git_spec(
        "-a --all -r --remotes -v -vv --verbose -l:list --list:list --show-current --merged=? "
        "--no-merged=? --contains=? --no-contains=? --points-at= --sort= --format= --color=? "
        "--no-color --column=? --no-column -i --ignore-case --abbrev= --no-abbrev"
    ),
    "tag": _git_spec(
        "-l:list --list:list -n=? --sort= --format= --contains=? --no-contains=? --merged=? "
        "--no-merged=? --points-at= --column=? --no-column -i --ignore-case --color=?"
    ),
    "describe": _git_spec(
        "--tags --all --long --abbrev= --always --dirty=? --broken=? --match= --exclude= "
        "--contains --first-parent --exact-match --candidates= --debug"
    ),
    "merge-base": _git_spec("-a --all --octopus --independent --is-ancestor --fork-point"),
    "show-ref": _git_spec(
        "--head --heads --branches --tags -d --dereference -s --hash=? --verify --abbrev=? -q "
        "--quiet --exists"
    ),
    "for-each-ref": _git_spec(
        "--count= --sort= --format= --color=? --shell --perl --python --tcl --points-at= "
        "--merged=? --no-merged=? --contains=? --no-contains=? --ignore-case --omit-empty "
        "--exclude= --include-root-refs"
    ),
    "name-rev": _git_spec(
        "--tags --refs= --exclude= --all --annotate-stdin --name-only --no-undefined --always"
    ),
    "count-objects": _git_spec("-v --verbose -H --human-readable"),
    "version": _git_spec("--build-options"),
}
_CONTENT_ALWAYS = frozenset({"diff", "grep"})


def judge_git(args: list[str], places: Places, situation: Situation) -> str:
    """Why `git ARGS` may run unasked; raises `Ask` (or `options.Refusal`) otherwise."""
    rest = list(args)
    cwds = set(situation.cwds)
    while rest and rest[0].startswith("-"):
        option = rest.pop(0)
        if option == "--version" and not rest:
            return "a version query"
        if option == "-C" and rest:
            folder = rest.pop(0)
            path_concern(folder, places, Situation(cwds), verb="runs in")
            cwds = {(Path(folder) if os.path.isabs(folder) else cwd / folder) for cwd in cwds}
            continue
        if option not in _GLOBAL_FLAGS:
            raise Ask(f"git {option} can change what git runs, reads or where it writes")
    if not rest:
        raise Ask("git without a subcommand")
    subcommand, sub_args = rest[0], rest[1:]
    if subcommand in ("stash", "worktree"):
        return _two_level(subcommand, sub_args, places, Situation(cwds))
    program = SUBCOMMANDS.get(subcommand)
    if program is None:
        raise Ask(
            f"git {subcommand} is not one of the read-only git commands (status, diff, log, "
            "show, blame, grep, ls-files, rev-parse, branch, tag …)"
        )
    _own_repository(places, cwds)
    parsed = opt.parse(f"git {subcommand}", program, sub_args)
    inner = Situation(cwds)
    for value in parsed.paths():
        path_concern(value, places, inner)
    positionals = parsed.positionals
    if subcommand in ("branch", "tag") and positionals and "list" not in parsed.tags:
        raise Ask(f"git {subcommand} with a name creates, renames or deletes one")
    if subcommand == "grep" and "pattern" not in parsed.tags:
        if not positionals:
            raise Ask("git grep without a pattern")
        positionals = positionals[1:]
    for value in positionals:
        path_concern(_path_part(value), places, inner)
    if _prints_content(subcommand, parsed, positionals):
        _history_clean(places)
    return "read-only git command"


def _two_level(subcommand: str, args: list[str], places: Places, situation: Situation) -> str:
    if not args:
        raise Ask(f"git {subcommand} without an action changes the repository")
    action = args[0]
    if (
        subcommand == "worktree"
        and action == "list"
        and all(a in ("--porcelain", "-v", "--verbose", "-z") for a in args[1:])
    ):
        _own_repository(places, situation.cwds)
        return "read-only git command"
    if subcommand == "stash" and action == "list" and len(args) <= 1:
        _own_repository(places, situation.cwds)
        return "read-only git command"
    if subcommand == "stash" and action == "show":
        _own_repository(places, situation.cwds)
        opt.parse("git stash show", SUBCOMMANDS["diff"], args[1:])
        _history_clean(places)
        return "read-only git command"
    raise Ask(f"git {subcommand} {action} changes the repository or is not known to be read-only")


def _path_part(value: str) -> str:
    """The path a positional names: `REV:PATH` reads PATH; a revision or a plain path is
    judged as a path (git tells them apart at run time, the judge cannot)."""
    if ":" in value:
        return value.split(":", 1)[1]
    return value


def _prints_content(subcommand: str, parsed: Parsed, positionals: list[str]) -> bool:
    if subcommand in _CONTENT_ALWAYS or "pickaxe" in parsed.tags:
        return True
    if subcommand == "show":
        if positionals and all(":" in value for value in positionals):
            return False  # REV:PATH only: the paths were judged one by one
        return "no_patch" not in parsed.tags or "patch" in parsed.tags
    return "patch" in parsed.tags


def _own_repository(places: Places, cwds: set[Path]) -> None:
    """Raise `Ask` when git would run in a repository nested in the workspace."""
    own = git_dir(places.root)
    for cwd in cwds:
        found = git_dir(cwd.resolve()) if cwd.exists() else own
        if found is not None and (own is None or found[0] != own[0]):
            where = found[0]
            shown = where.relative_to(places.root) if where.is_relative_to(places.root) else where
            raise Ask(
                f"git would run in the nested repository {shown}, whose own config may run programs"
            )


def _history_clean(places: Places) -> None:
    if places.history is None:
        raise Ask("git prints file content, and lsp-agent cannot check the repository for secrets")
    secrets = places.history()
    if secrets is None:
        raise Ask(
            "git prints file content, and lsp-agent could not check the repository's history "
            "for secret files in time"
        )
    if secrets:
        raise Ask(
            "git prints file content, and the repository's index or history holds a "
            "secret-named file (.env or the like)"
        )


_SECRET_FOLDERS = frozenset({".docker", ".aws", ".ssh", ".gnupg", ".kube"})
_TEMPLATES = (".env.example", ".env.sample", ".env.template", ".env.dist", ".env.defaults")
SECRET_PATHSPECS = (
    ":(glob,icase)**/.env*",
    *(
        f":(glob,icase)**/{name}" + ("/**" if name in _SECRET_FOLDERS else "")
        for name in sorted(SECRET_NAMES - {".git"})
    ),
    # Templates committed on purpose (`.env.example`) are what everyone with the repository
    # reads: a secret found only there does not make every git diff a question.
    *(f":(exclude,glob,icase)**/{name}" for name in _TEMPLATES),
)
"""git pathspecs matching every secret name at any depth."""


class RepositoryFacts:
    """Whether the workspace's repository holds a secret-named file, in its index or anywhere
    in its history (every ref and reflog), asked of git once per state of the repository."""

    def __init__(self, root: Path) -> None:
        self.root = root
        """The workspace."""
        self._answers: dict[tuple[object, ...], bool | None] = {}
        """Answers by the state of the repository's index, refs and reflogs (None: git did
        not answer in time, which is not asked again until the state changes)."""
        self._lock = threading.Lock()

    def secrets(self) -> bool | None:
        """True when a secret-named file is tracked or in history, False when none is, None
        when git could not say in time."""
        found = git_dir(self.root)
        if found is None:
            return False
        top, folder = found
        key = _state(folder)
        with self._lock:
            if key in self._answers:
                return self._answers[key]
        answer = self._ask_git(top)
        with self._lock:
            self._answers[key] = answer
        return answer

    def _ask_git(self, top: Path) -> bool | None:
        # Through the server's one git runner: nothing the repository's config names runs.
        queries = [
            ["ls-files", "-z", "--", *SECRET_PATHSPECS],
            ["rev-list", "--all", "--reflog", "-n", "1", "--", *SECRET_PATHSPECS],
        ]
        for query in queries:
            done = run_sync(
                top,
                "-c",
                "log.showSignature=false",
                *query,
                timeout=FACTS_TIMEOUT_S,
                pathspec_magic=True,
            )
            if done is None or done.code != 0:
                return None
            if done.out.strip():
                return True
        return False


def _state(folder: Path) -> tuple[object, ...]:
    """What changes when the index, a ref or a reflog changes."""
    shared = common_dir(folder)
    stamps: list[object] = []
    for path in (folder / "index", folder / "HEAD", folder / "logs" / "HEAD",
                 shared / "packed-refs"):  # fmt: skip
        try:
            info = path.stat()
            stamps.append((str(path), info.st_mtime_ns, info.st_size))
        except OSError:
            stamps.append((str(path), None))
    for tree in (shared / "refs", shared / "logs" / "refs"):
        for directory, _, names in os.walk(tree):
            for name in names:
                try:
                    info = os.stat(os.path.join(directory, name))
                except OSError:
                    continue
                stamps.append((directory, name, info.st_mtime_ns, info.st_size))
    return tuple(stamps)
