"""The one forgiving matcher of the edit tools: where the model's old lines are in a file, and
what its new lines become there.

`edit_file` (`edits.plan_edit`) and `apply_patch` (`patch.plan`) look for old lines with
`locate` and write new ones with `rewrite`, so both forgive exactly the same slips and refuse
exactly the same ambiguities. The rules (the README states them for users):

- Lines are LSP lines (`lsp_agent.text`): a line ends at `\\n`, `\\r\\n` or a lone `\\r`, and
  line endings never count in a comparison, so LF lines match a CRLF or mixed file.
- `LEVELS`, in order: the exact lines; trailing whitespace ignored; indentation ignored; runs of
  whitespace inside lines ignored; typographic punctuation read as ASCII (`plain_punctuation`).
  The first level with any candidate decides: its place is used when it is the only one (a
  caller may narrow the candidates with facts the model gave: a line number, an `@@` line),
  and several candidates are refused as ambiguous; a looser level is never tried then.
- Only when no level finds the old lines: a stray blank first line is dropped and the search
  runs again (`Match.skipped`).
- `rewrite`: lines the model left unchanged are the file's own, text and line ending. Each line
  the model wrote takes the line ending of the line it replaces, else of the line above it;
  the file's other lines keep theirs, so a mixed file stays mixed. At the levels that ignore
  indentation, new lines are re-indented (`Reindent`): by the file's unit when the model's
  old lines map consistently onto the file's levels (2 spaces → 4, tabs ↔ spaces), else by the
  offset between the first old line and the file's line.

Everything here is pure: no I/O.
"""

from __future__ import annotations

import difflib
import heapq
import math
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import pairwise

from lsp_agent.text import EOL, line_offsets, split_lines

Op = tuple[str, str]
"""One line of a change: (op, the model's text); op is " " (unchanged), "-" (removed) or "+"."""
Line = tuple[str, str]
"""A file line as (content, line ending); the ending is "" for a last line without one."""

NEAR_LINES = 8
"""How many lines a miss quotes at most."""
NEAR_LINE_CHARS = 160
"""Quoted lines (and lines compared for similarity) are cut to this many characters."""
_NEAR_PROBES = 5
"""How many of the longest old lines are compared closely with the file's lines."""
_NEAR_CUTOFF = 0.5
"""Lines less similar than this (difflib ratio) do not count as near."""
_NEAR_TOP = 20
"""How many file lines sharing the rarest words with a probe are compared closely."""
_WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")
_STYLE_WINDOW = 1000
"""How many lines around a match show the file's indentation unit."""
_ELISION = "..."
"""A line that stands for unchanged lines the model left out (aider's convention)."""

_PUNCTUATION = str.maketrans(
    {
        **dict.fromkeys("\u2018\u2019\u201a\u201b\u2032", "'"),
        **dict.fromkeys("\u201c\u201d\u201e\u201f\u2033\u00ab\u00bb", '"'),
        **dict.fromkeys("\u2010\u2011\u2012\u2013\u2014\u2015\u2212", "-"),
        **dict.fromkeys("\u00a0\u2007\u202f", " "),
        **dict.fromkeys("\u200b\ufeff", ""),
        "\u2026": "...",
    }
)
"""Typographic quotes, dashes, ellipsis and spaces as the ASCII a model types for them."""


def plain_punctuation(text: str) -> str:
    """`text` as a model retypes it: curly quotes, dashes, `…` and odd spaces as ASCII, in NFC.

    Quotes ‘’‚‛′ become `'` and “”„‟″«» `"`; the dashes and the minus sign `-`; the ellipsis
    `...`; non-breaking and figure spaces a space; zero-width spaces and BOMs disappear. NFC
    comes last, so a base letter and its accent compose even when a zero-width space split them.
    """
    return unicodedata.normalize("NFC", text.translate(_PUNCTUATION))


def collapse(line: str) -> str:
    """A line without leading and trailing whitespace, each inner run of it one space."""
    return " ".join(line.split())


def _plain(line: str) -> str:
    return collapse(plain_punctuation(line))


def _exact(line: str) -> str:
    return line


@dataclass(frozen=True)
class Level:
    """One way of comparing the model's old lines with the file's."""

    number: int
    """0 for the exact lines, then looser and looser."""
    how: str
    """How messages name it ("when trailing whitespace is ignored"); empty for the exact level."""
    key: Callable[[str], str]
    """What is compared of each line."""
    loose_indent: bool
    """Indentation did not count: new lines are re-indented."""

    def unchanged_key(self, line: str) -> str:
        """What of a line of the model's new text must equal its line of old for the model to
        have left it as it was, as this level reads lines: the indentation is compared as
        typed (a line the model moved deeper did change)."""
        if not self.loose_indent:
            return self.key(line)
        return f"{leading(line)}\0{self.key(line)}"


LEVELS: tuple[Level, ...] = (
    Level(0, "", _exact, False),
    Level(1, "when trailing whitespace is ignored", str.rstrip, False),
    Level(2, "when indentation is ignored", str.strip, True),
    Level(3, "when runs of whitespace inside lines are ignored", collapse, True),
    Level(4, "when typographic quotes, dashes and spaces are plain", _plain, True),
)
"""The forgiving levels, strictest first."""
PUNCTUATION = LEVELS[4]


class FileLines:
    """A file's text as LSP lines, with each level's comparison keys computed once."""

    def __init__(self, text: str) -> None:
        lines = split_lines(text)
        self.text = text
        """The whole text."""
        self.contents: list[str] = EOL.split(text)  # split at C speed: a large file
        """Each line without its ending."""
        if len(self.contents) > len(lines):
            self.contents.pop()  # the empty "line" after a final line break
        self.endings: list[str] = EOL.findall(text)
        if len(self.endings) < len(lines):
            self.endings.append("")
        """Each line's ending: `\\n`, `\\r\\n`, `\\r`, or "" for a last line without one."""
        self._keys: dict[int, list[str]] = {0: self.contents}
        self._lines = lines
        self._offsets: list[int] | None = None

    def __len__(self) -> int:
        return len(self.contents)

    def keys(self, level: Level) -> list[str]:
        """The file's lines as `level` compares them."""
        keys = self._keys.get(level.number)
        if keys is None:
            keys = self._keys[level.number] = [level.key(line) for line in self.contents]
        return keys

    def lines(self, start: int = 0, end: int | None = None) -> list[Line]:
        """Lines `start` to `end` as (content, ending)."""
        return list(zip(self.contents[start:end], self.endings[start:end], strict=True))

    def offset(self, index: int) -> int:
        """Where line `index` starts in the text (the text's length past the last line)."""
        if self._offsets is None:
            self._offsets = line_offsets(self._lines)
        return self._offsets[min(index, len(self._lines))]

    def ending_near(self, index: int) -> str:
        """The ending of the nearest line above `index` that has one, else below; LF when no
        line has one (a line break where the file never had one)."""
        for at in range(min(index, len(self)) - 1, -1, -1):
            if self.endings[at]:
                return self.endings[at]
        return next((ending for ending in self.endings[index:] if ending), "\n")


@dataclass(frozen=True)
class Match:
    """Where the old lines are."""

    start: int
    """The file line (0-based) where the old lines start."""
    level: Level
    """The level they matched at."""
    skipped: int = 0
    """Leading old lines left out: 1 when a stray blank first line had to go."""


class Ambiguous(Exception):
    """The old lines fit several places at the first level that found any."""

    def __init__(self, places: list[int], level: Level) -> None:
        super().__init__(places)
        self.places = places
        self.level = level


class NotFound(Exception):
    """No level finds the old lines."""


Narrow = Callable[[list[int], Level, int], list[int]]
"""Narrows a level's candidates (places, level, how many lines) with what else the caller
knows; may raise its own error."""


def locate(
    file: FileLines, old: Sequence[str], *, at_end: bool = False, narrow: Narrow | None = None
) -> Match:
    """Where the model's `old` lines (without endings) are, level by level (see the module).

    `at_end`: they must be the file's last lines. Raises `Ambiguous` or `NotFound`.
    """
    match = _search(file, old, at_end, narrow)
    if match is not None:
        return match
    if len(old) > 1 and not old[0].strip() and any(line.strip() for line in old[1:]):
        match = _search(file, old[1:], at_end, narrow)
        if match is not None:
            return Match(match.start, match.level, skipped=1)
    raise NotFound


def _search(
    file: FileLines, old: Sequence[str], at_end: bool, narrow: Narrow | None
) -> Match | None:
    plain = file.text.isascii() and all(line.isascii() for line in old)
    for level in LEVELS:
        if level is PUNCTUATION and plain:
            break  # ASCII on both sides: typographic punctuation cannot differ
        want = [level.key(line) for line in old]
        if level.number and not any(want):
            continue  # old is blank once read loosely: it would match any blank line
        places = _places(file.keys(level), want, at_end)
        if not places:
            continue
        if narrow is not None:
            places = narrow(places, level, len(old))
        if len(places) == 1:
            return Match(places[0], level)
        raise Ambiguous(places, level)
    return None


def _places(keys: list[str], want: list[str], at_end: bool) -> list[int]:
    """Every line where `want` starts in `keys` (overlapping places included)."""
    size = len(want)
    if at_end:
        start = len(keys) - size
        return [start] if start >= 0 and keys[start:] == want else []
    if not size:
        return []
    first, last = want[0], len(keys) - size
    places: list[int] = []
    at = 0
    while at <= last:
        try:
            # list.index scans at C speed: a large file is searched without a Python loop.
            at = keys.index(first, at, last + 1)
        except ValueError:
            break
        if keys[at : at + size] == want:
            places.append(at)
        at += 1
    return places


def split_elisions(old: Sequence[str]) -> list[tuple[int, int]] | None:
    """The runs of `old` between lines that are just `...` (unchanged lines left out), as
    (start, end) index pairs; None when `old` has no such line."""
    marks = [i for i, line in enumerate(old) if line.strip() == _ELISION]
    if not marks:
        return None
    bounds = [-1, *marks, len(old)]
    return [(a + 1, b) for a, b in pairwise(bounds)]


# Writing the new lines


def rewrite(
    file: FileLines,
    start: int,
    body: Sequence[Op],
    level: Level,
    *,
    model: Sequence[str] = (),
    endings: Sequence[str | None] = (),
) -> list[Line]:
    """The lines that replace the file's lines from `start` on, as `body` says.

    `body`'s unchanged and removed lines stand for the file's lines from `start` (they matched
    at `level`); unchanged lines are the file's own. An added line takes `endings[k]` when the
    patch said which ending it has, else the ending of the removed line it pairs with in its
    block (the k-th added line the k-th removed one), else of the last removed line, else of
    the line above it; when the region's last line was removed, the last line written takes its
    ending. `model` is all the model's lines (old and new), which show its indentation unit.
    An ending may be "" (the region ends the file without a final line break); `seal` fixes
    those that are no longer last.
    """
    old_count = sum(1 for op, _ in body if op != "+")
    region = file.lines(start, start + old_count)
    indent = None
    if level.loose_indent:
        old = [text for op, text in body if op != "+"]
        # The file's unit is read near the region: cheap on a large file, right in a mixed one.
        near = file.contents[max(start - _STYLE_WINDOW, 0) : start + old_count + _STYLE_WINDOW]
        indent = Reindent(old, [content for content, _ in region], model, near)
    out: list[Line] = []
    at = 0
    removed: list[str] = []
    paired = 0
    last_written = -1
    for k, (op, text) in enumerate(body):
        if op == " ":
            out.append(region[at])
            at += 1
            removed, paired = [], 0
            continue
        if op == "-":
            removed.append(region[at][1])
            at += 1
            continue
        hint = endings[k] if k < len(endings) else None
        if hint:
            ending = hint
        elif paired < len(removed):
            ending = removed[paired]
        elif removed:
            ending = removed[-1]
        else:
            ending = out[-1][1] if out else file.ending_near(start)
        paired += 1
        out.append((indent(text) if indent is not None else text, ending))
        last_written = len(out) - 1
    removed_last = next((op for op, _ in reversed(body) if op != "+"), " ") == "-"
    if removed_last and out and last_written == len(out) - 1:
        # The region's last line was removed: its ending is where the region meets what
        # follows, and stays there (a last line without one keeps having none).
        out[-1] = (out[-1][0], region[-1][1])
    return out


def seal(lines: list[Line], fallback: str, where: Iterable[int] | None = None) -> None:
    """Give every line but the last an ending: the nearest one above, else `fallback`.

    `where`: the only indexes that may lack one (the rest of a large file is not walked).
    """
    for index in range(len(lines)) if where is None else where:
        content, ending = lines[index]
        if ending or index >= len(lines) - 1:
            continue
        above = next((e for _, e in reversed(lines[:index]) if e), "")
        lines[index] = (content, above or fallback)


def leading(line: str) -> str:
    """A line's indentation (spaces and tabs)."""
    return line[: len(line) - len(line.lstrip(" \t"))]


@dataclass(frozen=True)
class _Style:
    """How a text indents: with tabs, or with `width` spaces per level (0: unknown)."""

    tabs: bool
    width: int

    def level(self, indent: str, tab: int) -> tuple[int, int]:
        """(levels, columns left over) of an indentation; a tab counts `tab` columns."""
        if self.tabs:
            tabs = len(indent) - len(indent.lstrip("\t"))
            return tabs, _columns(indent[tabs:], tab)
        return divmod(_columns(indent, tab), self.width or 4)

    def render(self, levels: int, extra: int) -> str:
        if self.tabs:
            return "\t" * levels + " " * extra
        return " " * (levels * (self.width or 4) + extra)


def _columns(indent: str, tab: int) -> int:
    return sum(tab if char == "\t" else 1 for char in indent)


class Reindent:
    """Moves the model's new lines to the file's indentation.

    Built from the model's old lines and the file's lines they matched. When the model indents
    in another style than the file (another number of spaces per level, or tabs for spaces)
    and every matched pair agrees on the levels (the model's one level is always the file's
    one level), a new line keeps its level relative to the first old line, written in the
    file's style. Otherwise a new line moves by the offset between the first old line and the
    file's line, columns counted with one tab for a level of the model's spaces.
    """

    def __init__(
        self,
        old: Sequence[str],
        region: Sequence[str],
        model: Sequence[str],
        file: Sequence[str],
    ) -> None:
        pairs = [
            (leading(o), leading(f))
            for o, f in zip(old, region, strict=True)
            if o.strip() and f.strip()
        ]
        self.model_base, self.file_base = pairs[0] if pairs else ("", "")
        self.file_style = _style(region, file)
        self.model_style = _model_style(model, self.file_style)
        tab = self.model_style.width if self.file_style.tabs else self.file_style.width
        self.tab = tab or 4
        """Columns a tab stands for when the model and the file mix tabs and spaces."""
        self.by_level = self.model_style != self.file_style and all(
            self._relative(m, self.model_style, self.model_base)
            == self._relative(f, self.file_style, self.file_base)
            for m, f in pairs
        )

    def _relative(self, indent: str, style: _Style, base: str) -> tuple[int, int]:
        levels, extra = style.level(indent, self.tab)
        base_levels, base_extra = style.level(base, self.tab)
        return levels - base_levels, extra - base_extra

    def __call__(self, line: str) -> str:
        body = line.lstrip(" \t")
        if not body:
            return ""
        indent = line[: len(line) - len(body)]
        if self.by_level:
            levels, extra = self._relative(indent, self.model_style, self.model_base)
            if levels >= 0 and extra >= 0:
                return self.file_base + self.file_style.render(levels, extra) + body
            base_levels, base_extra = self.file_style.level(self.file_base, self.tab)
            target = max(base_levels + levels, 0)
            return self.file_style.render(target, max(base_extra + extra, 0)) + body
        model_width = _columns(self.model_base, self.tab)
        file_width = _columns(self.file_base, self.tab)
        target = file_width + _columns(indent, self.tab) - model_width
        if target >= file_width:
            if self.model_style.tabs == self.file_style.tabs and indent.startswith(self.model_base):
                return self.file_base + indent[len(self.model_base) :] + body
            return self.file_base + self._render_columns(target - file_width) + body
        return self._render_columns(max(target, 0)) + body

    def _render_columns(self, width: int) -> str:
        if self.file_style.tabs:
            return "\t" * (width // self.tab) + " " * (width % self.tab)
        return " " * width


def _style(region: Sequence[str], file: Sequence[str]) -> _Style:
    """How the file indents: with tabs when the first indented line of `region` (else of the
    file) starts with one, else with spaces, by the file's steps between consecutive lines
    (width 0 when nothing is indented)."""
    first = next(
        (indent for line in (*region, *file) if line.strip() and (indent := leading(line))), ""
    )
    if first.startswith("\t"):
        return _Style(True, 0)
    return _Style(False, _space_width([leading(line) for line in file if line.strip()]))


def _space_width(indents: Sequence[str], *, steps_first: bool = True) -> int:
    """Spaces per level (0 when nothing is indented).

    Two readings: the most common step up between consecutive lines among 2, 3 and 4 (a step
    of 8 counts as one of 4; on a tie the smaller step wins), and what divides every width
    (4, else 2, else 3: widths 8 and 16 alone could be one level of 8 or two of 4, and the
    usual unit wins). A whole file is read by its steps first (a stray odd width does not
    spoil them); a model's few lines by what divides them (their steps may span two levels).
    """
    widths = [len(indent) for indent in indents if "\t" not in indent]
    steps = Counter(b - a for a, b in pairwise(widths) if b > a)
    steps[4] += steps.pop(8, 0)
    counted = [(steps[unit], -unit) for unit in (2, 3, 4) if steps[unit]]
    by_steps = -max(counted)[1] if counted else 0
    common = math.gcd(*widths) if widths else 0
    dividing = next((unit for unit in (4, 2, 3) if common and common % unit == 0), 0)
    if steps_first:
        return by_steps or dividing or (4 if common else 0)
    return dividing or by_steps or (4 if common else 0)


def _model_style(model: Sequence[str], file: _Style) -> _Style:
    """How the model indents, from its own lines; the file's way when they show none."""
    indents = [leading(line) for line in model if line.strip()]
    if not any(indents):
        return file  # nothing indented: nothing to translate, only an offset
    if any("\t" in indent for indent in indents):
        return _Style(True, 0)
    if len({len(indent) for indent in indents}) > 1:
        return _Style(False, _space_width(indents, steps_first=False))
    # One indentation throughout shows no unit: against tabs, read four spaces as one.
    return _Style(False, 4) if file.tabs else file


# Messages


def nearest(file: FileLines, old: Sequence[str]) -> int | None:
    """The line where the lines most like `old` would start, or None when nothing is close.

    Each line of `old` votes for a start: 1 for every file line equal to it once whitespace is
    collapsed, and, for a few of its longest lines, the difflib ratio of the file lines that
    share its rarest words (identifiers split at `_` and case changes, weighted by how few lines
    hold them). Words narrow the field before difflib runs, so a large file stays cheap. A file
    line much longer than the old line is compared by its beginning: old may be part of it.
    """
    probes = [(index, collapse(line)) for index, line in enumerate(old) if line.strip()]
    if not probes:
        return None
    scores: dict[int, float] = {}
    wanted: dict[str, list[int]] = {}
    for index, key in probes:
        wanted.setdefault(key, []).append(index)
    collapsed = file.keys(LEVELS[3])
    for number, key in enumerate(collapsed):
        for index in wanted.get(key, ()):
            scores[number - index] = scores.get(number - index, 0.0) + 1.0
    words = [_words(line) for line in collapsed]
    frequency: Counter[str] = Counter()
    for have in words:
        frequency.update(have)
    total = len(words) + 1
    longest = sorted(probes, key=lambda probe: -len(probe[1]))[:_NEAR_PROBES]
    for index, probe in longest:
        weights = {word: math.log(total / (frequency[word] + 1)) for word in _words(probe)}
        if not weights:
            continue
        ranked = heapq.nlargest(
            _NEAR_TOP,
            (
                (sum(weights[word] for word in have & weights.keys()), -number)
                for number, have in enumerate(words)
                if not have.isdisjoint(weights)
            ),
        )
        probe = probe[:NEAR_LINE_CHARS]
        width = len(probe) + max(10, len(probe) // 2)
        matcher = difflib.SequenceMatcher(None, "", probe, autojunk=False)
        for _, negative in ranked:
            number = -negative
            if collapsed[number] == probe:
                continue  # already counted as equal
            matcher.set_seq1(collapsed[number][:width])
            ratio = matcher.ratio()
            if ratio >= _NEAR_CUTOFF:
                scores[number - index] = scores.get(number - index, 0.0) + ratio
    if not scores:
        return None
    return max(scores, key=lambda start: (scores[start], -start))


def _words(line: str) -> frozenset[str]:
    """The words of a line, identifiers split into their parts, lower case."""
    return frozenset(map(str.lower, _WORD.findall(line)))


def near_lines(file: FileLines, old: Sequence[str], *, what: str) -> str:
    """For a miss: the file's lines most like `old`, numbered from 1, and the first line that
    differs (`what` names the model's side: "old", "the hunk"); or a sentence saying that no
    line looks like them."""
    anchor = nearest(file, old)
    if anchor is None:
        return "No line of the file looks like them."
    contents = file.contents
    first = max(anchor, 0)
    last = min(anchor + len(old), len(contents), first + NEAR_LINES)
    quoted = [
        f"{number + 1:>6}\t{clip(contents[number], NEAR_LINE_CHARS)}"
        for number in range(first, max(last, first + 1))
    ]
    message = "The most similar lines are:\n" + "\n".join(quoted)
    for offset, text in enumerate(old):
        number = anchor + offset
        if 0 <= number < len(contents) and collapse(contents[number]) != collapse(text):
            message += (
                f"\nFirst difference, line {number + 1}: the file has "
                f"{clip(contents[number], 100)!r}, {what} has {clip(text, 100)!r}"
            )
            break
    return message


def clip(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, an ellipsis marking the cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"
