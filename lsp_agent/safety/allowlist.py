"""The commands that may run without a question, and how each one's arguments are judged.

A command runs unasked only when every one of these holds:

- its program is on this closed list (`SPECS`, `git` subcommands, a few custom readers), found
  where the shell would find it and not in the workspace (where a command could have put it);
- every option is one the program is known to read without writing or running anything,
  matched by exact name after expanding an unambiguous GNU abbreviation (`options`);
- every path it reads — positional, an option's value, an attached short value, a glob's every
  match — resolves (symlinks followed) inside the workspace (or a spill folder), and is no
  secret (`protected.is_secret_name`);
- a recursive search would meet no secret (`grep -r` over a folder holding `.env` or `.git`),
  and git shows file content (`git log -p`, `git show`, `git diff`) only from a repository
  whose index and history hold no secret-named file.

Everything here is pure apart from looking at the workspace (resolving paths, expanding globs,
walking folders) and one cached git query; no command runs.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from lsp_agent.safety import options as opt
from lsp_agent.safety.options import Parsed, Refusal, Spec, spec
from lsp_agent.safety.protected import Scanner, _Folder, git_dir, secret_part, whitelists

HARMLESS_FILES = frozenset({"/dev/null", "/dev/stdin", "/dev/stdout", "/dev/stderr"})
MAX_GLOB_MATCHES = 5_000
BUILTINS = frozenset({"cd", "echo", "printf", "pwd", "test", "[", "true", "false", ":", "type",
                      "command"})  # fmt: skip
"""Shell builtins on the list: no program file is looked up for them."""


@dataclass(frozen=True)
class Places:
    """Where a command's paths are judged from, and what the judge may look at."""

    root: Path
    home: Path
    readable: tuple[Path, ...] = ()
    """Folders outside the workspace that may be read without asking (the spill files)."""
    scanner: Scanner | None = None
    """The workspace walk (recursive searches); None: every recursive search is asked."""
    history: Callable[[], bool | None] | None = None
    """Whether the repository's index or history holds a secret-named file (None: unknown)."""
    path: str = ""
    """The PATH commands run with, to find where a program name leads."""


@dataclass
class Situation:
    """What earlier commands of the same line changed."""

    cwds: set[Path]
    """The folders the command may be running in (a `cd` adds one)."""
    wrote: bool = False
    """An earlier command ran the project's code (pytest), which may have made files."""


class Ask(Exception):
    """The command must be asked; the message says why."""


def path_concern(value: str, places: Places, situation: Situation, verb: str = "reads") -> None:
    """Raise `Ask` when the path `value` (as the program gets it) is outside the workspace or a
    secret, from any of the folders the command may run in."""
    if value in HARMLESS_FILES or value == "-" or value == "":
        return
    if value.startswith(("/dev/tcp/", "/dev/udp/")):
        raise Ask(f"it {verb} {value}, a network connection")
    for cwd in situation.cwds:
        candidate = Path(value) if os.path.isabs(value) else cwd / value
        try:
            resolved = candidate.resolve(strict=False)
        except (OSError, RuntimeError, ValueError):
            raise Ask(f"it {verb} {value}, which cannot be resolved") from None
        lexical = Path(os.path.normpath(candidate))
        inside = resolved == places.root or resolved.is_relative_to(places.root)
        if not inside:
            if any(resolved.is_relative_to(folder) for folder in places.readable):
                continue
            raise Ask(f"it {verb} {value}, outside the workspace")
        parts = list(resolved.relative_to(places.root).parts)
        if lexical.is_relative_to(places.root):
            parts += lexical.relative_to(places.root).parts
        secret = secret_part(parts)
        if secret is not None:
            raise Ask(f"it {verb} {value}, which may hold secrets ({secret})")


def folder_concern(
    value: str,
    places: Places,
    situation: Situation,
    *,
    hidden: bool,
    follow: bool,
    exclude: Sequence[str] = (),
    exclude_dirs: Sequence[str] = (),
    only: Sequence[str] = (),
) -> None:
    """Raise `Ask` when searching `value` recursively would read a secret: a secret-named file
    or folder below it (hidden ones only when `hidden`), or, when `follow`, a symlink out of the
    workspace or to a secret. `exclude` and `exclude_dirs` are globs of names skipped; `only`,
    when given, are the globs of the only file names searched (folders are then skipped)."""
    path_concern(value, places, situation)
    if places.scanner is None:
        raise Ask("it searches folders recursively, which lsp-agent cannot check here")
    scanner = places.scanner
    found: list[str] = []

    def visit(where: str, seen: _Folder) -> bool:
        for name in seen.secrets:
            folder = name in seen.subfolders
            if only and (folder or not any(_name_matches(name, glob) for glob in only)):
                continue
            if not hidden and not only and name.startswith("."):
                continue
            skip = exclude_dirs if folder else exclude
            if any(fnmatch.fnmatchcase(name, glob) for glob in skip):
                continue
            found.append(os.path.relpath(os.path.join(where, name), places.root))
            return True
        if follow and seen.symlinks:
            path = Path(where)
            for name in seen.symlinks:
                shown = f"{(path / name).relative_to(places.root)} (a symlink)"
                try:
                    target = (path / name).resolve()
                except (OSError, RuntimeError):
                    found.append(shown)
                    return True
                if not target.is_relative_to(places.root) or secret_part(
                    target.relative_to(places.root).parts
                ):
                    found.append(shown)
                    return True
        return False

    for cwd in situation.cwds:
        top = (Path(value) if os.path.isabs(value) else cwd / value).resolve()
        if not top.is_dir():
            continue
        complete = scanner.walk(top, visit)
        if found:
            raise Ask(f"it searches {value} recursively, which holds {found[0]} (secrets)")
        if not complete:
            raise Ask(f"it searches {value} recursively, too large a tree to check for secrets")


def _name_matches(name: str, glob: str) -> bool:
    """Whether a file called `name` matches a search tool's glob (its last component)."""
    return fnmatch.fnmatchcase(name, glob.rsplit("/", 1)[-1])


def whitelisted(value: str, places: Places, situation: Situation) -> bool:
    """Whether an ignore file under (or above, up to the repository) `value` has `!` lines,
    which make ripgrep search hidden files."""
    if places.scanner is None:
        return True
    found = git_dir(places.root)
    candidates: list[Path] = []
    if found is not None:
        top, folder = found
        candidates.append(folder / "info" / "exclude")
        for parent in (places.root, *places.root.parents):
            candidates += [parent / name for name in (".gitignore", ".ignore", ".rgignore")]
            if parent == top:
                break
    if any(whitelists(path) for path in candidates if path.is_file()):
        return True
    hit = False

    def visit(path: str, seen: _Folder) -> bool:
        nonlocal hit
        hit = any(whitelists(Path(path, name)) for name in seen.ignore_files)
        return hit

    for cwd in situation.cwds:
        top_folder = (Path(value) if os.path.isabs(value) else cwd / value).resolve()
        if top_folder.is_dir() and (not places.scanner.walk(top_folder, visit) or hit):
            return True
    return False


# Globs: bash expands them before the command runs, and so does the judge.

_CLASS = re.compile(r"\[\[?[:=.]")


def expand(pattern: str, literal: str, situation: Situation) -> list[str]:
    """The words bash makes of a glob `pattern` (quoted characters backslash-escaped), in any of
    the folders the command may run in; `[literal]` when nothing matches. Raises `Ask` for a
    glob the judge does not follow or that could become an option."""
    if _CLASS.search(pattern):
        raise Ask("it uses a glob with a character class ([[:…:]]), which the judge does not read")
    words: list[str] = []
    for cwd in situation.cwds:
        matches = _glob(pattern, cwd)
        if len(matches) > MAX_GLOB_MATCHES:
            raise Ask(f"its glob {literal} matches too many files to check")
        words += matches
    if not words:
        if literal.startswith("-"):
            raise Ask(f"{literal} is an option spelled with a wildcard")
        return [literal]
    for word in words:
        if word.startswith("-"):
            raise Ask(f"its glob {literal} matches {word}, which the program takes for an option")
    return sorted(set(words))


def _glob(pattern: str, cwd: Path) -> list[str]:
    absolute = pattern.startswith("/")
    parts = [part for part in _split_unescaped(pattern) if part != ""]
    bases: list[tuple[str, Path]] = [("/" if absolute else "", Path("/") if absolute else cwd)]
    for index, part in enumerate(parts):
        last = index == len(parts) - 1
        following: list[tuple[str, Path]] = []
        for shown, folder in bases:
            if not _has_magic(part):
                literal = _unescape(part)
                path = folder / literal
                if last and not os.path.lexists(path):
                    continue
                following.append((shown + literal + ("" if last else "/"), path))
                continue
            regex = _pattern_regex(part)
            try:
                names = sorted(os.listdir(folder))
            except OSError:
                continue
            for name in names:
                # A leading dot is matched only by a dot written as such (bash's rule).
                if name.startswith(".") and not _unescape(part).startswith("."):
                    continue
                if regex.fullmatch(name) and (last or (folder / name).is_dir()):
                    following.append((shown + name + ("" if last else "/"), folder / name))
        bases = following
    trailing = pattern.endswith("/")
    return [shown + ("/" if trailing else "") for shown, _ in bases]


def _split_unescaped(pattern: str) -> list[str]:
    parts: list[str] = []
    current: list[str] = []
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if char == "\\" and index + 1 < len(pattern):
            current.append(pattern[index : index + 2])
            index += 2
            continue
        if char == "/":
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
        index += 1
    parts.append("".join(current))
    return parts


def _has_magic(part: str) -> bool:
    return bool(re.search(r"(?<!\\)[*?\[]", part))


def _unescape(part: str) -> str:
    return re.sub(r"\\(.)", r"\1", part)


def _pattern_regex(part: str) -> re.Pattern[str]:
    out: list[str] = []
    index = 0
    while index < len(part):
        char = part[index]
        if char == "\\" and index + 1 < len(part):
            out.append(re.escape(part[index + 1]))
            index += 2
            continue
        if char == "*":
            out.append(".*")
        elif char == "?":
            out.append(".")
        elif char == "[":
            negated = part[index + 1 : index + 2] in ("!", "^")
            end = part.find("]", index + 2 if negated else index + 1)
            if end < 0:
                out.append(re.escape("["))
            else:
                body = part[index + 1 : end]
                body = body[1:] if negated else body
                escaped = body.replace("\\", "\\\\").replace("^", "\\^").replace("[", "\\[")
                out.append(f"[{'^' if negated else ''}{escaped}]")
                index = end + 1
                continue
        else:
            out.append(re.escape(char))
        index += 1
    return re.compile("".join(out), re.DOTALL)


# The specs of the programs on the list.

_COMMON = "--help --version"
SPECS: dict[str, Spec] = {
    "ls": spec(
        "-a -A -b -B -c -C -d -D -f -F -g -G -h -H -i -k -l -L -m -n -N -o -p -q -Q -r -R -s -S "
        "-t -u -U -v -x -X -Z -1 -I= -T= -w= --all --almost-all --author --escape --block-size= "
        "--ignore-backups --color=? --colour=? --directory --dired --classify=? --file-type "
        "--format= --full-time --group-directories-first --no-group --human-readable --si "
        "--dereference-command-line --dereference-command-line-symlink-to-dir --hide= "
        "--hyperlink=? --indicator-style= --inode --ignore= --kibibytes --dereference "
        "--numeric-uid-gid --literal --hide-control-chars --show-control-chars --quote-name "
        "--quoting-style= --reverse --recursive --size --sort= --time= --time-style= --tabsize= "
        "--width= --context --zero " + _COMMON
    ),
    "cat": spec(
        "-A -b -e -E -n -s -t -T -u -v --show-all --number-nonblank --show-ends --number "
        "--squeeze-blank --show-tabs --show-nonprinting " + _COMMON
    ),
    "head": spec(
        "-c= -n= -q -v -z --bytes= --lines= --quiet --silent --verbose --zero-terminated "
        + _COMMON,
        numbers=True,
    ),
    "tail": spec(
        "-c= -n= -q -v -z -s= -f! -F! --bytes= --lines= --quiet --silent --verbose "
        "--zero-terminated --follow! --retry! --pid! --sleep-interval= --max-unchanged-stats= "
        + _COMMON,
        numbers=True,
        refused_why="waits for the file to grow, until the command times out",
    ),
    "wc": spec(
        "-c -m -l -L -w --bytes --chars --lines --max-line-length --words --total= "
        "--files0-from! " + _COMMON,
        refused_why="reads file names from a file, which lsp-agent cannot check",
    ),
    "grep": spec(
        "-E -F -G -P -e=:pattern -f@:pattern -i -y -v -w -x -c -o -q -s -b -H -h -n -T -Z -z "
        "-a -I -l -L -r:recursive -R:recursive_follow -U -A= -B= -C= -m= -d= -D= "
        "--extended-regexp --fixed-strings --basic-regexp --perl-regexp --regexp=:pattern "
        "--file@:pattern --ignore-case --no-ignore-case --word-regexp --line-regexp "
        "--null-data --no-messages --invert-match --max-count= --byte-offset --line-number "
        "--line-buffered --with-filename --no-filename --label= --only-matching --quiet "
        "--silent --binary-files= --text --directories= --devices= --recursive:recursive "
        "--dereference-recursive:recursive_follow --include=:include --exclude=:exclude "
        "--exclude-from@ --exclude-dir=:exclude_dir --files-without-match "
        "--files-with-matches --count --initial-tab --null --before-context= "
        "--after-context= --context= --group-separator= --no-group-separator --color=? "
        "--colour=? --binary " + _COMMON,
        numbers=True,
    ),
    "sort": spec(
        "-b -d -f -g -h -i -M -n -R -r -V -c -C -m -s -u -z -k= -t= -S= -o! -T! "
        "--ignore-leading-blanks --dictionary-order --ignore-case --general-numeric-sort "
        "--ignore-nonprinting --month-sort --human-numeric-sort --numeric-sort --random-sort "
        "--random-source@ --reverse --sort= --version-sort --batch-size= --check=? "
        "--compress-program! --debug --files0-from! --key= --merge --output! --stable "
        "--buffer-size= --field-separator= --temporary-directory! --parallel= --unique "
        "--zero-terminated " + _COMMON,
        refused_why="writes files or runs a program",
    ),
    "uniq": spec(
        "-c -d -D -f= -i -s= -u -z -w= --count --repeated --all-repeated=? --skip-fields= "
        "--group=? --ignore-case --skip-chars= --unique --zero-terminated --check-chars= " + _COMMON
    ),
    "cut": spec(
        "-b= -c= -d= -f= -n -s -z --bytes= --characters= --delimiter= --fields= --complement "
        "--only-delimited --output-delimiter= --zero-terminated " + _COMMON
    ),
    "tr": spec("-c -C -d -s -t --complement --delete --squeeze-repeats --truncate-set1 " + _COMMON),
    "diff": spec(
        "-i -E -Z -b -w -B -I= -a -r:recursive -N -x=:exclude -X@ -S= -q -s -c -C= -u -U= -e -n "
        "-y -W= -t -T -l! -p -F= -d -D= --normal --brief --report-identical-files --context=? "
        "--unified=? --ed --rcs --side-by-side --left-column --suppress-common-lines "
        "--show-c-function --show-function-line= --label= --expand-tabs --initial-tab "
        "--tabsize= --suppress-blank-empty --paginate! --recursive:recursive --no-dereference "
        "--new-file --unidirectional-new-file --ignore-file-name-case "
        "--no-ignore-file-name-case --exclude=:exclude --exclude-from@ --starting-file= "
        "--from-file@ --to-file@ --ignore-case --ignore-tab-expansion --ignore-trailing-space "
        "--ignore-space-change --ignore-all-space --ignore-blank-lines --ignore-matching-lines= "
        "--text --strip-trailing-cr --ifdef= --old-group-format= --new-group-format= "
        "--unchanged-group-format= --changed-group-format= --line-format= "
        "--old-line-format= --new-line-format= --unchanged-line-format= --minimal "
        "--horizon-lines= --speed-large-files --color=? --palette= --width= " + _COMMON,
        refused_why="runs a program",
    ),
    "cmp": spec(
        "-b -i= -l -n= -s --print-bytes --ignore-initial= --verbose --bytes= --quiet --silent "
        + _COMMON
    ),
    "comm": spec(
        "-1 -2 -3 -z --check-order --nocheck-order --output-delimiter= --total "
        "--zero-terminated " + _COMMON
    ),
    "nl": spec(
        "-b= -d= -f= -h= -i= -l= -n= -p -s= -v= -w= --body-numbering= --section-delimiter= "
        "--footer-numbering= --header-numbering= --line-increment= --join-blank-lines= "
        "--number-format= --no-renumber --number-separator= --starting-line-number= "
        "--number-width= " + _COMMON
    ),
    "tac": spec("-b -r -s= --before --regex --separator= " + _COMMON),
    "rev": spec("-0 --zero -h -V " + _COMMON),
    "od": spec(
        "-A= -j= -N= -S=? -t= -v -w=? -a -b -c -d -f -i -l -o -s -x --address-radix= "
        "--endian= --skip-bytes= --read-bytes= --strings=? --format= --output-duplicates "
        "--width=? --traditional " + _COMMON
    ),
    "strings": spec(
        "-a -d -f -n= -t= -e= -o -s= -w -U= -T= --all --data --print-file-name --bytes= "
        "--radix= --encoding= --include-all-whitespace --output-separator= --unicode= "
        "--target= " + _COMMON
    ),
    "basename": spec("-a -s= -z --multiple --suffix= --zero " + _COMMON),
    "dirname": spec("-z --zero " + _COMMON),
    "realpath": spec(
        "-e -m -L -P -q -s -z --canonicalize-existing --canonicalize-missing --logical "
        "--physical --quiet --relative-to@ --relative-base@ --strip --no-symlinks --zero " + _COMMON
    ),
    "readlink": spec(
        "-f -e -m -n -q -s -v -z --canonicalize --canonicalize-existing --canonicalize-missing "
        "--no-newline --quiet --silent --verbose --zero " + _COMMON
    ),
    "stat": spec(
        "-L -f -c= -t --dereference --file-system --cached= --format= --printf= --terse " + _COMMON
    ),
    "du": spec(
        "-0 -a -B= -b -c -D -d= -H -h -k -L -l -m -P -S -s -t= -x -X@ --null --all "
        "--apparent-size --block-size= --bytes --total --dereference-args --max-depth= "
        "--files0-from! --human-readable --inodes --dereference --count-links --no-dereference "
        "--separate-dirs --si --summarize --threshold= --time=? --time-style= "
        "--one-file-system --exclude-from@ --exclude= " + _COMMON,
        refused_why="reads file names from a file, which lsp-agent cannot check",
    ),
    "df": spec(
        "-a -B= -h -H -i -k -l -P -t= -T -x= --all --block-size= --human-readable --si "
        "--inodes --local --no-sync --output=? --portability --sync --total --type= "
        "--print-type --exclude-type= " + _COMMON
    ),
    "paste": spec("-d= -s -z --delimiters= --serial --zero-terminated " + _COMMON),
    "fold": spec("-b -s -w= --bytes --spaces --width= " + _COMMON),
    "expand": spec("-i -t= --initial --tabs= " + _COMMON),
    "unexpand": spec("-a -t= --all --first-only --tabs= " + _COMMON),
    "column": spec(
        "-t -s= -o= -c= -x -n -N= -l= -L -R= -H= -W= -O= -E= -d -e -J -r= -T= -i= -p= "
        "--table --separator= --output-separator= --output-width= --fillrows "
        "--table-columns= --table-columns-limit= --table-right= --table-truncate= "
        "--table-wrap= --table-hide= --table-order= --table-noextreme= --table-noheadings "
        "--table-header-repeat --table-name= --json --keep-empty-lines --tree= --tree-id= "
        "--tree-parent= -V -h " + _COMMON
    ),
    "md5sum": spec(
        "-b -t -z -l= -c! --binary --text --tag --zero --length= --check! --ignore-missing! "
        "--quiet! --status! --strict! --warn! " + _COMMON,
        refused_why="reads file names from a file, which lsp-agent cannot check",
    ),
    "file": spec(
        "-b -c -d -E -e= -F= -f! -h -i -k -l -L -m@ -N -n -0 -p! -P= -r -s -S -v -z -Z -C! "
        "--apple --brief --checking-printout --debug --exclude= --exclude-quiet= --extension "
        "--files-from! --separator= --mime --mime-type --mime-encoding --keep-going --list "
        "--dereference --magic-file@ --no-pad --no-buffer --print0 --preserve-date! "
        "--parameter= --raw --special-files --no-sandbox! --uncompress --uncompress-noreport "
        "--no-dereference --compile! " + _COMMON
    ),
    "date": spec(
        "-d= -f@ -I=? -r@ -R -s! -u --date= --debug --file@ --iso-8601=? --resolution "
        "--rfc-email --rfc-3339= --reference@ --set! --utc --universal " + _COMMON,
        refused_why="sets the clock",
    ),
    "seq": spec("-f= -s= -w --format= --separator= --equal-width " + _COMMON, permute=False),
    "uname": spec(
        "-a -s -n -r -v -m -p -i -o --all --kernel-name --nodename --kernel-release "
        "--kernel-version --machine --processor --hardware-platform --operating-system " + _COMMON
    ),
    "id": spec(
        "-a -Z -g -G -n -r -u -z --context --group --groups --name --real --user --zero " + _COMMON
    ),
    "printenv": spec("-0 --null " + _COMMON),
    "nproc": spec("--all --ignore= " + _COMMON),
    "whoami": spec(_COMMON),
    "hostname": spec(
        "-a -A -d -f -i -I -s -y --alias --all-fqdns --domain --fqdn --long --ip-address "
        "--all-ip-addresses --short --yp --nis -h -V -b! --boot! -F! --file! " + _COMMON
    ),
    "sleep": spec(_COMMON, permute=False),
    "xxd": spec(
        "-a -b -C -E -e -i -p -u -r! -R= -d -h -v -c= -g= -l= -n= -o= -s= -ps -autoskip "
        "-bits -capitalize -EBCDIC -include -plain -postscript -revert! -uppercase -version "
        "-help -cols= -groupsize= -len= -name= -seek=",
        abbreviations=False,
        clusters=False,
        refused_why="writes a file",
    ),
    "hexdump": spec(
        "-b -c -C -d -o -x -L=? -e= -f@ -n= -s= -v --one-byte-octal --one-byte-char "
        "--canonical --two-bytes-decimal --two-bytes-octal --two-bytes-hex --color=? "
        "--format= --format-file@ --length= --skip= --no-squeezing " + _COMMON
    ),
    "tree": spec(
        "-a -d -l -f -x -L= -R! -P= -I= -o! -i -q -N -Q -p -u -g -s -h -D -F -v -t -c -U -r "
        "-C -n -X -J -H= -T= --gitignore --gitfile@ --matchdirs --metafirst --ignore-case "
        "--noreport --charset= --filelimit= --dirsfirst --filesfirst --du --si --prune --sort= "
        "--timefmt= --info --infofile@ --fromfile! --fromtabfile! --nolinks --hintro! "
        "--houtro! " + _COMMON,
        abbreviations=False,
        clusters=False,
        refused_why="writes files",
    ),
}
for _alias in ("sha1sum", "sha224sum", "sha256sum", "sha384sum", "sha512sum", "b2sum"):
    SPECS[_alias] = SPECS["md5sum"]
SPECS["egrep"] = SPECS["grep"]
SPECS["fgrep"] = SPECS["grep"]

# Programs whose positional arguments are never files they read.
_TEXT_ONLY = frozenset(
    {"echo", "printf", "true", "false", ":", "sleep", "seq", "uname", "id", "whoami", "printenv",
     "nproc", "hostname", "basename", "dirname", "tr", "test", "[", "type", "which", "pwd"}
)  # fmt: skip
# Programs that take at most this many files (a second one would be an output).
_MAX_FILES = {"uniq": 1, "xxd": 1, "hostname": 0, "pwd": 0, "whoami": 0, "nproc": 0}
# Programs that only tell what they know about files (names, sizes, counts): allowed as the
# command `xargs` runs with names it reads from its input.
_RESPONSE_FILES = frozenset({"strings"})
"""Programs that read more arguments from `@FILE` (binutils)."""
METADATA_ONLY = frozenset({"wc", "ls", "stat", "du", "file", "basename", "dirname", "echo"})
VERSION_ONLY = frozenset(
    {"python", "python3", "node", "git", "rg", "ruff", "pytest", "cargo", "rustc", "go", "gcc",
     "cc", "clang", "make", "cmake", "java", "javac", "ruby", "perl", "pip", "pip3", "uv",
     "bwrap", "jq", "sed", "awk", "gawk", "grep", "find", "bash"}
)  # fmt: skip
"""Programs whose `--version` (and nothing else) may run unasked."""


def judge(words: list[str], places: Places, situation: Situation) -> str:
    """Why the simple command `words` (expanded) may run unasked; raises `Ask` otherwise."""
    name, args = words[0], words[1:]
    if "/" in name:
        raise Ask(f"{name} is a program given by path, not a command on the read-only list")
    if name == "cd":
        return _cd(args, places, situation)
    if len(args) == 1 and name in VERSION_ONLY and _version_flag(name, args[0]):
        _program_place(name, places, situation)
        return "a version query"
    check = _CUSTOM.get(name)
    if check is None and name not in SPECS and name not in _TEXT_ONLY:
        raise Ask(f"{name} is not on the list of read-only commands")
    if name not in BUILTINS:
        _program_place(name, places, situation)
    if check is not None:
        return check(name, args, places, situation)
    if name not in SPECS:
        return "read-only command"
    parsed = _parse(name, SPECS[name], args)
    for value in parsed.paths():
        path_concern(value, places, situation)
    files = parsed.positionals
    if name in _TEXT_ONLY:
        if len(files) > _MAX_FILES.get(name, len(files)):
            raise Ask(f"{name} takes no such arguments")
        return "read-only command"
    if name in ("grep", "egrep", "fgrep"):
        return _grep(name, parsed, places, situation)
    if name in _RESPONSE_FILES and any(value.startswith("@") for value in files):
        raise Ask(f"{name} reads more arguments from a file named after @")
    limit = _MAX_FILES.get(name)
    if limit is not None and len(files) > limit:
        raise Ask(f"{name} with {len(files)} file names writes the last one")
    if "recursive" in parsed.tags:
        excluded = parsed.values("exclude")
        for value in files or ["."]:
            folder_concern(value, places, situation, hidden=True, follow=True, exclude=excluded,
                           exclude_dirs=excluded)  # fmt: skip
    if name == "date":
        if len(files) > 1 or (files and not files[0].startswith("+")):
            raise Ask("date with a date argument sets the clock")
        return "read-only command"
    for value in files:
        path_concern(value, places, situation)
    return "read-only command"


def _version_flag(name: str, flag: str) -> bool:
    if flag == "--version":
        return True
    if flag in ("-V", "-VV"):
        return name in ("python", "python3", "ruff", "pytest", "rg", "jq")
    if flag == "version":
        return name in ("go", "ruff", "uv")
    if flag == "-version":
        return name in ("java", "javac")
    return flag == "-v" and name in ("perl", "node", "gcc", "clang", "cc")


def _parse(name: str, program: Spec, args: list[str]) -> Parsed:
    try:
        return opt.parse(name, program, args)
    except Refusal as refusal:
        raise Ask(str(refusal)) from None


def _program_place(name: str, places: Places, situation: Situation) -> None:
    """Where the shell finds `name`: a program the workspace holds could be anything."""
    for cwd in situation.cwds:
        for entry in places.path.split(os.pathsep):
            folder = Path(entry) if os.path.isabs(entry) else cwd / (entry or ".")
            candidate = folder / name
            if not (candidate.is_file() and os.access(candidate, os.X_OK)):
                continue
            try:
                resolved = candidate.resolve()
            except (OSError, RuntimeError):
                raise Ask(f"{name} cannot be located safely") from None
            inside = resolved.is_relative_to(places.root) or candidate.is_relative_to(places.root)
            if inside and not _in_protected_venv(candidate, places.root):
                raise Ask(f"{name} runs {candidate}, a program in the workspace")
            break


def _in_protected_venv(path: Path, root: Path) -> bool:
    for parent in path.parents:
        if parent == root or not parent.is_relative_to(root):
            return False
        if (parent / "pyvenv.cfg").is_file():
            return True
    return False


def _cd(args: list[str], places: Places, situation: Situation) -> str:
    if args[:1] == ["--"]:
        args = args[1:]
    if len(args) != 1 or args[0] == "-" or args[0].startswith("-"):
        raise Ask("cd without exactly one folder of the workspace goes elsewhere")
    path_concern(args[0], places, situation, verb="moves to")
    moved = set()
    for cwd in situation.cwds:
        target = Path(args[0]) if os.path.isabs(args[0]) else cwd / args[0]
        moved.add(target.resolve())
    situation.cwds |= moved
    return "moves within the workspace"


def _grep(name: str, parsed: Parsed, places: Places, situation: Situation) -> str:
    files = list(parsed.positionals)
    if "pattern" not in parsed.tags:
        if not files:
            raise Ask(f"{name} without a pattern")
        files = files[1:]  # the first positional is the pattern
    recursive = parsed.tags & {"recursive", "recursive_follow"}
    for option, value in parsed.options:
        if option.name in ("-d", "--directories") and value == "recurse":
            recursive = {"recursive"}
    if recursive:
        # With --include as well, the last glob that matches a name decides: an exclusion is
        # trusted only when nothing can include the name again.
        excluded = [] if parsed.values("include") else parsed.values("exclude")
        for value in files or ["."]:
            folder_concern(
                value,
                places,
                situation,
                hidden=True,
                follow="recursive_follow" in recursive,
                exclude=excluded,
                exclude_dirs=parsed.values("exclude_dir"),
            )
        return "read-only search"
    for value in files:
        path_concern(value, places, situation)
    return "read-only search"


# Programs judged by their own readers.

_RG = spec(
    "-e=:pattern -f@:pattern -i -s -S -F -x -w -v -c -l -n -N -o -q -b -H -I -p -0 -z -a -U "
    "-A= -B= -C= -m= -M= -j= -E= -r= -d= -t=:type -T= -g=:glob -L:follow -u:hidden -.:hidden "
    "--regexp=:pattern --file@:pattern --ignore-case --case-sensitive --smart-case "
    "--fixed-strings --line-regexp --word-regexp --invert-match --count --count-matches "
    "--files-with-matches --files-without-match --line-number --no-line-number "
    "--only-matching --quiet --byte-offset --with-filename --no-filename --no-heading "
    "--heading --pretty --null --null-data --text --multiline --multiline-dotall "
    "--after-context= --before-context= --context= --max-count= --max-columns= "
    "--max-columns-preview --max-depth= --maxdepth= --max-filesize= --threads= --encoding= "
    "--replace= --sort= --sortr= --type=:type --type-not= --glob=:glob --iglob=:glob "
    "--follow:follow --hidden:hidden --no-hidden --no-ignore:hidden --no-ignore-vcs:hidden "
    "--no-ignore-dot:hidden --no-ignore-global:hidden --no-ignore-parent:hidden "
    "--no-ignore-exclude:hidden --no-ignore-files:hidden --ignore-file@:hidden "
    "--unrestricted:hidden --files --type-list --color= --colors= --column --no-column "
    "--json --vimgrep --trim --crlf --no-config --no-messages --no-require-git "
    "--one-file-system --line-buffered --block-buffered --stats --debug --trace "
    "--passthru --include-zero --no-unicode --pcre2 --engine= --auto-hybrid-regex "
    "--field-context-separator= --field-match-separator= --context-separator= "
    "--no-context-separator --path-separator= --dfa-size-limit= --regex-size-limit= "
    "--binary --no-binary --ignore-file-case-insensitive --search-zip "
    "--pre! --pre-glob! --type-add! --type-clear! --hostname-bin! --hyperlink-format= "
    "--mmap --no-mmap --no-ignore-messages --no-pcre2-unicode --generate= "
    "--sort-files " + _COMMON,
    abbreviations=False,
    refused_why="runs programs or changes what ripgrep searches",
)


def _rg(name: str, args: list[str], places: Places, situation: Situation) -> str:
    parsed = _parse(name, _RG, args)
    for value in parsed.paths():
        path_concern(value, places, situation)
    files = list(parsed.positionals)
    listing = any(option.name in ("--files", "--type-list") for option, _ in parsed.options)
    if "pattern" not in parsed.tags and not listing:
        if not files:
            raise Ask("rg without a pattern")
        files = files[1:]
    globs = parsed.values("glob")
    # A later glob wins over an earlier one: exclusions are trusted only with no inclusion.
    exclusions = [glob[1:] for glob in globs if glob.startswith("!")]
    if any(not glob.startswith("!") for glob in globs):
        exclusions = []
    # A glob or a type given to ripgrep also selects hidden files; one that only selects source
    # files by their extension reaches no secret.
    narrow = [glob for glob in globs if not glob.startswith("!")]
    hidden = "hidden" in parsed.tags
    hidden = hidden or not all(_source_glob(glob) for glob in narrow)
    hidden = hidden or not all(kind in _SOURCE_TYPES for kind in parsed.values("type"))
    follow = "follow" in parsed.tags
    for value in files or ["."]:
        path_concern(value, places, situation)
        if listing:
            continue
        searches_hidden = hidden or whitelisted(value, places, situation)
        if searches_hidden or follow or narrow:
            folder_concern(
                value,
                places,
                situation,
                hidden=searches_hidden,
                follow=follow,
                exclude=exclusions,
                exclude_dirs=exclusions,
                only=() if searches_hidden else narrow,
            )
    return "read-only search"


_SOURCE_EXTENSIONS = frozenset(
    {"py", "pyi", "js", "jsx", "mjs", "cjs", "ts", "tsx", "go", "rs", "rb", "java", "kt", "c",
     "h", "cc", "cpp", "hpp", "cs", "swift", "php", "lua", "md", "rst", "html", "css", "scss",
     "vue", "svelte", "sql", "ex", "exs", "scala", "dart", "zig", "hs", "ml", "txt"}
)  # fmt: skip
_SOURCE_TYPES = frozenset(
    {"py", "js", "ts", "go", "rust", "ruby", "java", "kotlin", "c", "cpp", "cs", "swift", "php",
     "lua", "md", "markdown", "rst", "html", "css", "vue", "svelte", "sql", "elixir", "scala",
     "dart", "zig", "haskell", "ocaml"}
)  # fmt: skip
_SOURCE_GLOB = re.compile(r"(?:[\w.-]+/)*(?:\*\*/)?\*\.(\w+)")


def _source_glob(glob: str) -> bool:
    """Whether a ripgrep glob selects only source files by extension (`*.py`, `src/**/*.ts`)."""
    match = _SOURCE_GLOB.fullmatch(glob)
    return match is not None and match.group(1).lower() in _SOURCE_EXTENSIONS


_SED = spec(
    "-n:quiet -e=:script -f! -i! -E -r -s -u -z -l= --quiet:quiet --silent:quiet "
    "--expression=:script --file! --in-place! --follow-symlinks --line-length= --null-data "
    "--zero-terminated --posix --regexp-extended --separate --sandbox --unbuffered --debug "
    + _COMMON,
    refused_why="can edit files in place or run a script file",
)
_SED_ADDRESS = r"(?:\d+(?:~\d+)?|\$|/(?:[^/\\\n]|\\.)*/I?)"
_SED_PRINT = re.compile(
    rf"\s*(?:{_SED_ADDRESS}(?:\s*,\s*(?:{_SED_ADDRESS}|[+~]\d+))?\s*!?)?\s*[pl=]\s*"
)


def _sed(name: str, args: list[str], places: Places, situation: Situation) -> str:
    parsed = _parse(name, _SED, args)
    if "quiet" not in parsed.tags:
        raise Ask("sed is allowed only as sed -n (printing lines)")
    scripts = parsed.values("script")
    files = list(parsed.positionals)
    if not scripts:
        if not files:
            raise Ask("sed without a script")
        scripts, files = [files[0]], files[1:]
    for script in scripts:
        for command in script.replace("\n", ";").split(";"):
            if command.strip() and not _SED_PRINT.fullmatch(command):
                raise Ask(f"sed script {script!r} does more than print lines")
    for value in files:
        path_concern(value, places, situation)
    return "prints lines"


_AWK_SPECIAL = re.compile(r"\b(ARGV|ARGC|ENVIRON|PROCINFO|FILENAME)\b")
_AWK_UNSAFE = re.compile(r"\b(system|getline|close|fflush)\b|@|\||>(?!=)")


def _awk(name: str, args: list[str], places: Places, situation: Situation) -> str:
    program: str | None = None
    files: list[str] = []
    rest = list(args)
    while rest:
        arg = rest.pop(0)
        if program is None and arg in ("-F", "-v") and rest:
            value = rest.pop(0)
            if arg == "-v":
                _awk_assignment(value)
            continue
        if program is None and arg.startswith(("-F", "-v")) and len(arg) > 2:
            if arg.startswith("-v"):
                _awk_assignment(arg[2:])
            continue
        if program is None and arg == "--":
            continue
        if program is None and arg.startswith("-"):
            raise Ask(f"{name} {arg} is not an option lsp-agent knows to be read-only")
        if program is None:
            program = arg
            continue
        files.append(arg)
    if program is None:
        raise Ask(f"{name} without a program")
    code = re.sub(r'"(?:[^"\\\n]|\\.)*"', '""', program)
    if _AWK_UNSAFE.search(code.replace("||", " ")) or _AWK_SPECIAL.search(code):
        raise Ask(f"the {name} program may run commands, write files or read other files")
    for value in files:
        if re.match(r"[A-Za-z_][A-Za-z0-9_]*=", value):
            _awk_assignment(value)
            continue
        path_concern(value, places, situation)
    return "prints from files"


def _awk_assignment(value: str) -> None:
    name = value.split("=", 1)[0]
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) or _AWK_SPECIAL.fullmatch(name):
        raise Ask(f"awk assignment {value!r} changes what awk reads")


_JQ = spec(
    "-n -r -j -a -c -s -e -S -C -M -R -h -V --tab --indent= --seq --stream --stream-errors "
    "--null-input --raw-input --slurp --raw-output --raw-output0 --join-output "
    "--ascii-output --compact-output --color-output --monochrome-output --sort-keys "
    "--exit-status --unbuffered -f! --from-file! -L! --library-path! " + _COMMON,
    abbreviations=False,
    refused_why="reads a program or modules from files",
)


def _jq(name: str, args: list[str], places: Places, situation: Situation) -> str:
    plain: list[str] = []
    files: list[str] = []
    index = 0
    named_args = False
    while index < len(args):
        arg = args[index]
        if arg in ("--arg", "--argjson"):
            index += 3
            continue
        if arg in ("--slurpfile", "--rawfile"):
            if index + 2 >= len(args):
                raise Ask(f"jq {arg} is missing its values")
            files.append(args[index + 2])
            index += 3
            continue
        if arg in ("--args", "--jsonargs"):
            named_args = True
            index += 1
            continue
        if named_args and not arg.startswith("-") and any(not p.startswith("-") for p in plain):
            index += 1  # a value for $ARGS, not a file
            continue
        plain.append(arg)
        index += 1
    parsed = _parse(name, _JQ, plain)
    positionals = list(parsed.positionals)
    if not positionals:
        raise Ask("jq without a filter")
    program, inputs = positionals[0], positionals[1:]
    if re.search(r"\b(import|include|modulemeta|get_search_list|input_filename)\b", program):
        raise Ask("the jq filter reads modules or other files")
    for value in [*files, *inputs]:
        path_concern(value, places, situation)
    return "read-only command"


_FIND_FLAGS = frozenset(
    {"-depth", "-d", "-ignore_readdir_race", "-noignore_readdir_race", "-mount", "-xdev",
     "-noleaf", "-follow", "-daystart", "-print", "-print0", "-prune", "-quit", "-ls", "-true",
     "-false", "-empty", "-executable", "-readable", "-writable", "-nouser", "-nogroup",
     "-not", "!", "-a", "-and", "-o", "-or", "(", ")", ",", "-help", "--help", "-version",
     "--version"}
)  # fmt: skip
_FIND_VALUES = frozenset(
    {"-maxdepth", "-mindepth", "-name", "-iname", "-path", "-ipath", "-wholename",
     "-iwholename", "-regex", "-iregex", "-regextype", "-type", "-xtype", "-size", "-perm",
     "-user", "-group", "-uid", "-gid", "-links", "-inum", "-mtime", "-mmin", "-atime", "-amin",
     "-ctime", "-cmin", "-used", "-newer", "-anewer", "-cnewer", "-samefile", "-lname",
     "-ilname", "-fstype", "-printf", "-context"}
)  # fmt: skip
_FIND_REFUSED = frozenset(
    {"-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf",
     "-fls", "-files0-from"}
)  # fmt: skip


def _find(name: str, args: list[str], places: Places, situation: Situation) -> str:
    rest = list(args)
    while rest and rest[0] in ("-H", "-L", "-P"):
        rest.pop(0)
    if rest and (rest[0].startswith("-D") or rest[0].startswith("-O")):
        raise Ask(f"find {rest[0]} is not an option lsp-agent knows to be read-only")
    starts: list[str] = []
    while rest and not (rest[0].startswith("-") or rest[0] in ("(", ")", "!", ",")):
        starts.append(rest.pop(0))
    while rest:
        word = rest.pop(0)
        if word in _FIND_REFUSED:
            raise Ask(f"find {word} can write files or run programs")
        if word in _FIND_FLAGS:
            continue
        if word in _FIND_VALUES or re.fullmatch(r"-newer[aBcmt][aBcmt]", word):
            if not rest:
                raise Ask(f"find {word} is missing its value")
            rest.pop(0)
            continue
        raise Ask(f"find {word} is not a predicate lsp-agent knows to be read-only")
    for value in starts or ["."]:
        path_concern(value, places, situation, verb="lists")
    return "lists files"


_XARGS = spec(
    "-0 -d= -n= -L= -P= -r -s= -t -x -I= -a@ -E= -p! -o! -i=? -e=? -l=? --null --delimiter= "
    "--max-args= --max-lines= --max-procs= --no-run-if-empty --max-chars= --verbose --exit "
    "--replace=? --arg-file@ --eof=? --interactive! --open-tty! --process-slot-var= "
    "--show-limits " + _COMMON,
    permute=False,
    refused_why="talks to the terminal",
)


def _xargs(name: str, args: list[str], places: Places, situation: Situation) -> str:
    parsed = _parse(name, _XARGS, args)
    for value in parsed.paths():
        path_concern(value, places, situation)
    inner = parsed.positionals or ["echo"]
    if inner[0] not in METADATA_ONLY:
        raise Ask(
            f"xargs runs {inner[0]} on names it reads from its input, which cannot be checked "
            "(only commands that print names, sizes or counts are allowed)"
        )
    judge(inner, places, situation)
    return "counts or lists files named by its input"


_PYTEST = spec(
    "-q -v -x -s -l -r= -k= -m= -p=:plugin -W= -n= -h -V --quiet --verbose --verbosity= "
    "--exitfirst --maxfail= --tb= --showlocals --full-trace --capture= --lf --last-failed "
    "--ff --failed-first --nf --new-first --sw --stepwise --sw-skip --stepwise-skip "
    "--last-failed-no-failures= --co --collect-only --durations= --durations-min= "
    "--no-header --no-summary --disable-warnings --disable-pytest-warnings --strict-markers "
    "--strict-config --color= --code-highlight= --runxfail --setup-show --setup-only "
    "--setup-plan --fixtures --fixtures-per-test --markers --deselect@ --ignore@ "
    "--ignore-glob= --continue-on-collection-errors --doctest-modules --doctest-glob= "
    "--doctest-continue-on-failure --doctest-report= --import-mode= --cache-clear "
    "--cache-show=? --timeout= --dist= --assert= --show-capture= --log-level= "
    "--log-cli-level= --log-format= --log-date-format= --no-cov --keep-duplicates "
    "--basetemp! --junitxml! --junit-xml! --junit-prefix! --result-log! --log-file! "
    "--log-file-level! --log-file-format! --log-file-date-format! --debug! -o! "
    "--override-ini! -c! --config-file! --rootdir! --confcutdir! --pdb! --pdbcls! --trace! "
    "--pastebin! --pyargs! --cov! --cov-report! --cov-config! --html! --self-contained-html! "
    "--json-report! --report-log! --inifile! --noconftest " + _COMMON,
    abbreviations=False,
    refused_why="writes files, reads another configuration or runs code lsp-agent cannot see",
)


def _pytest(name: str, args: list[str], places: Places, situation: Situation) -> str:
    parsed = _parse(name, _PYTEST, args)
    for plugin in parsed.values("plugin"):
        if not plugin.startswith("no:"):
            raise Ask(f"pytest -p {plugin} loads a plugin lsp-agent cannot see")
    for value in parsed.paths():
        path_concern(value.split("::", 1)[0], places, situation)
    for value in parsed.positionals:
        if value.startswith("@"):
            raise Ask(f"pytest {value} reads more arguments from a file")
        path_concern(value.split("::", 1)[0], places, situation)
    _pytest_config_options(places)
    situation.wrote = True
    return "runs the project's tests"


_PYTEST_CONFIGS = ("pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg")
_ADDOPTS = re.compile(r"^[ \t]*addopts[ \t]*=[ \t]*(.*(?:\n[ \t]+.*)*)", re.MULTILINE)


def _pytest_config_options(places: Places) -> None:
    """Raise `Ask` when a pytest configuration that may apply adds options (`addopts`) that
    are not run unasked on the command line (`--basetemp`, `--junitxml`, `-p plugin` …)."""
    if places.scanner is None:
        raise Ask("pytest may take options from the project's configuration, unchecked here")
    configs = [folder / name for folder in places.root.parents for name in _PYTEST_CONFIGS]

    def visit(path: str, seen: _Folder) -> bool:
        configs.extend(Path(path, name) for name in seen.configs if name in _PYTEST_CONFIGS)
        return False

    if not places.scanner.walk(places.root, visit):
        raise Ask("pytest may take options from the project's configuration, too many to check")
    for config in configs:
        try:
            text = config.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for match in _ADDOPTS.finditer(text):
            value = match.group(1)
            quoted = re.findall(r'"((?:[^"\\]|\\.)*)"|\'([^\']*)\'', value)
            words = [word for pair in quoted for word in pair if word] if quoted else []
            words = words or value.split()
            try:
                parsed = opt.parse("pytest", _PYTEST, words)
            except Refusal as refusal:
                raise Ask(f"{config.name} adds options to pytest: {refusal}") from None
            if any(not p.startswith("no:") for p in parsed.values("plugin")):
                raise Ask(f"{config.name} makes pytest load a plugin lsp-agent cannot see")


def _python(name: str, args: list[str], places: Places, situation: Situation) -> str:
    if args[:2] == ["-m", "pytest"]:
        return _pytest("pytest", args[2:], places, situation)
    raise Ask(f"{name} runs code (only `{name} -m pytest` and `{name} --version` run unasked)")


_RUFF_CHECK = spec(
    "--no-fix:no_fix --diff --show-fixes --no-show-fixes --statistics --output-format= "
    "--target-version= --preview --no-preview --select= --ignore= --extend-select= "
    "--extend-ignore= --per-file-ignores= --extend-per-file-ignores= --fixable= "
    "--unfixable= --extend-fixable= --exclude= --extend-exclude= --respect-gitignore "
    "--no-respect-gitignore --force-exclude --no-force-exclude -n --no-cache "
    "--stdin-filename= -e --exit-zero --exit-non-zero-on-fix --line-length= "
    "--dummy-variable-rgx= --isolated:isolated -q --quiet -v --verbose -s --silent "
    "--ignore-noqa --show-files --show-settings --no-unsafe-fixes -h --help "
    "--fix! --unsafe-fixes! --fix-only! -w! --watch! -o! --output-file! --cache-dir! "
    "--config! --add-noqa!",
    abbreviations=False,
    clusters=False,
    refused_why="changes files or reads another configuration",
)
_RUFF_FORMAT = spec(
    "--check:check --diff:check --no-cache -n --target-version= --preview --no-preview "
    "--exclude= --extend-exclude= --force-exclude --no-force-exclude --line-length= "
    "--respect-gitignore --no-respect-gitignore --isolated -q --quiet -v --verbose -s "
    "--silent -h --help --range= --stdin-filename= --exit-non-zero-on-format "
    "--config! --cache-dir!",
    abbreviations=False,
    clusters=False,
    refused_why="reads another configuration or writes files",
)
_RUFF_CONFIGS = ("pyproject.toml", "ruff.toml", ".ruff.toml")
_RUFF_FIX = re.compile(r"^\s*(fix|unsafe-fixes|extend)\s*=", re.MULTILINE)


def _ruff(name: str, args: list[str], places: Places, situation: Situation) -> str:
    if args[:1] == ["format"]:
        parsed = _parse("ruff format", _RUFF_FORMAT, args[1:])
        if "check" not in parsed.tags:
            raise Ask("ruff format rewrites files (only --check or --diff run unasked)")
    elif args[:1] == ["check"]:
        parsed = _parse("ruff check", _RUFF_CHECK, args[1:])
        if not parsed.tags & {"no_fix", "isolated"}:
            _ruff_config_fixes(places)
    else:
        raise Ask("ruff runs unasked only as `ruff check` or `ruff format --check`")
    for value in parsed.positionals:
        path_concern(value, places, situation)
    return "checks the code"


def _ruff_config_fixes(places: Places) -> None:
    """Raise `Ask` when a ruff configuration that applies could turn fixing on."""
    configs: list[Path] = []
    for folder in (places.root, *places.root.parents):
        configs += [folder / name for name in ("pyproject.toml", "ruff.toml", ".ruff.toml")]
    user = Path(os.environ.get("XDG_CONFIG_HOME") or places.home / ".config") / "ruff"
    configs += [user / "ruff.toml", user / "pyproject.toml", user / ".ruff.toml"]
    if places.scanner is None:
        raise Ask("ruff check may fix files as its configuration says: add --no-fix")

    def visit(path: str, seen: _Folder) -> bool:
        configs.extend(Path(path, name) for name in seen.configs if name in _RUFF_CONFIGS)
        return False

    if not places.scanner.walk(places.root, visit):
        raise Ask("ruff check may fix files as its configuration says: add --no-fix")
    for config in configs:
        try:
            text = config.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if _RUFF_FIX.search(text):
            raise Ask(
                f"ruff check may fix files ({config.name} sets fix or extends another "
                "configuration): add --no-fix"
            )


def _printf(name: str, args: list[str], places: Places, situation: Situation) -> str:
    if args and args[0].startswith("-v"):
        raise Ask("printf -v sets a shell variable, which changes what later commands do")
    return "prints only its arguments"


def _echo(name: str, args: list[str], places: Places, situation: Situation) -> str:
    return "prints only its arguments"


def _command_v(name: str, args: list[str], places: Places, situation: Situation) -> str:
    if args[:1] in (["-v"], ["-V"]):
        return "tells where a command is"
    raise Ask(f"{name} runs another command")


def _env(name: str, args: list[str], places: Places, situation: Situation) -> str:
    if args in ([], ["-0"], ["--null"]):
        return "prints the environment"
    raise Ask("env runs another command or changes the environment")


def _pwd(name: str, args: list[str], places: Places, situation: Situation) -> str:
    if all(arg in ("-L", "-P") for arg in args):
        return "prints the folder"
    raise Ask("pwd takes no such arguments")


def _which(name: str, args: list[str], places: Places, situation: Situation) -> str:
    if all(not arg.startswith("-") or arg in ("-a", "-s") for arg in args):
        return "tells where a command is"
    raise Ask(f"{name} {args[0]} is not an option lsp-agent knows")


def _git(name: str, args: list[str], places: Places, situation: Situation) -> str:
    from lsp_agent.safety.gitcheck import judge_git

    try:
        return judge_git(args, places, situation)
    except Refusal as refusal:
        raise Ask(str(refusal)) from None


_CUSTOM: dict[str, Callable[[str, list[str], Places, Situation], str]] = {
    "rg": _rg,
    "sed": _sed,
    "awk": _awk,
    "gawk": _awk,
    "mawk": _awk,
    "jq": _jq,
    "find": _find,
    "xargs": _xargs,
    "pytest": _pytest,
    "py.test": _pytest,
    "python": _python,
    "python3": _python,
    "ruff": _ruff,
    "printf": _printf,
    "echo": _echo,
    "command": _command_v,
    "env": _env,
    "pwd": _pwd,
    "which": _which,
    "type": _echo,
    "git": _git,
}
