/**
 * Pure text helpers for the review: apply LSP `TextEdit`s to a text, and compute the minimal
 * line edits that turn one text into another. Positions are LSP positions in UTF-16 code units,
 * which is what JavaScript string indices count; a line ends at `\n`, `\r\n` or `\r`.
 */
import type { Position, Range } from './protocol';

export interface TextEdit {
    range: Range;
    newText: string;
}

/** Offsets where each line starts; the first is always 0. */
export function lineStarts(text: string): number[] {
    const starts = [0];
    for (let i = 0; i < text.length; i++) {
        const char = text.charCodeAt(i);
        if (char === 13 /* \r */) {
            if (text.charCodeAt(i + 1) === 10) {
                i++;
            }
            starts.push(i + 1);
        } else if (char === 10 /* \n */) {
            starts.push(i + 1);
        }
    }
    return starts;
}

/** End of a line's content (before its line break). */
function contentEnd(text: string, starts: number[], line: number): number {
    const next = line + 1 < starts.length ? (starts[line + 1] as number) : text.length;
    let end = next;
    if (end > (starts[line] as number) && text.charCodeAt(end - 1) === 10) {
        end--;
    }
    if (end > (starts[line] as number) && text.charCodeAt(end - 1) === 13) {
        end--;
    }
    return end;
}

/**
 * The string offset of an LSP position. As in VS Code, a character past the end of its line
 * means the end of the line, and a line past the last one means the end of the text.
 */
export function offsetAt(text: string, position: Position, starts = lineStarts(text)): number {
    if (position.line < 0) {
        return 0;
    }
    if (position.line >= starts.length) {
        return text.length;
    }
    const start = starts[position.line] as number;
    const end = contentEnd(text, starts, position.line);
    return Math.min(start + Math.max(position.character, 0), end);
}

/** The LSP position of a string offset. */
export function positionAt(text: string, offset: number, starts = lineStarts(text)): Position {
    const clamped = Math.max(0, Math.min(offset, text.length));
    let low = 0;
    let high = starts.length - 1;
    while (low < high) {
        const middle = (low + high + 1) >> 1;
        if ((starts[middle] as number) <= clamped) {
            low = middle;
        } else {
            high = middle - 1;
        }
    }
    return { line: low, character: clamped - (starts[low] as number) };
}

/**
 * Apply LSP text edits to `text`. The edits' ranges all refer to the original text and must not
 * overlap; inserts at the same position keep their order in the array (LSP's rule). Throws an
 * Error naming the edits when two overlap.
 */
export function applyTextEdits(text: string, edits: readonly TextEdit[]): string {
    const starts = lineStarts(text);
    const spans = edits.map((edit, index) => {
        const start = offsetAt(text, edit.range.start, starts);
        const end = Math.max(start, offsetAt(text, edit.range.end, starts));
        return { start, end, newText: edit.newText, index };
    });
    spans.sort((a, b) => a.start - b.start || a.end - b.end || a.index - b.index);
    const parts: string[] = [];
    let cursor = 0;
    for (const span of spans) {
        if (span.start < cursor) {
            throw new Error(`text edit ${span.index + 1} overlaps another edit`);
        }
        parts.push(text.slice(cursor, span.start), span.newText);
        cursor = span.end;
    }
    parts.push(text.slice(cursor));
    return parts.join('');
}

/** Split a text into lines that keep their line breaks (the last may have none); '' has none. */
export function splitLinesKeepEnds(text: string): string[] {
    const starts = lineStarts(text);
    const lines: string[] = [];
    for (let i = 0; i < starts.length; i++) {
        const end = i + 1 < starts.length ? (starts[i + 1] as number) : text.length;
        lines.push(text.slice(starts[i] as number, end));
    }
    if (lines[lines.length - 1] === '') {
        lines.pop();
    }
    return lines;
}

/** Above this many line pairs, the changed middle is replaced whole instead of diffed. */
const MAX_DIFF_CELLS = 4_000_000;

/**
 * The text edits that turn `before` into `after`: whole changed lines, one edit per hunk, so that
 * applying them leaves the unchanged lines (and the cursors and folds on them) alone. Returns no
 * edit when the texts are equal.
 */
export function diffTextEdits(before: string, after: string): TextEdit[] {
    if (before === after) {
        return [];
    }
    const a = splitLinesKeepEnds(before);
    const b = splitLinesKeepEnds(after);
    const starts = lineStarts(before);
    const lineOffset = (line: number): number =>
        line < starts.length ? (starts[line] as number) : before.length;
    // `a`'s lines are `before`'s lines, so line i starts at starts[i] (an empty text has none).
    return diffLines(a, b).map((hunk) => {
        const startOffset = lineOffset(hunk.aStart);
        const endOffset = hunk.aEnd >= a.length ? before.length : lineOffset(hunk.aEnd);
        return {
            range: {
                start: positionAt(before, startOffset, starts),
                end: positionAt(before, endOffset, starts),
            },
            newText: b.slice(hunk.bStart, hunk.bEnd).join(''),
        };
    });
}

/**
 * The hunks (runs of changed lines) that turn the lines `a` into the lines `b`, in order:
 * `a[aStart:aEnd]` becomes `b[bStart:bEnd]`; an insertion has `aStart == aEnd`.
 */
export function diffLines(a: readonly string[], b: readonly string[]): Hunk[] {
    let prefix = 0;
    while (prefix < a.length && prefix < b.length && a[prefix] === b[prefix]) {
        prefix++;
    }
    let suffix = 0;
    while (
        suffix < a.length - prefix &&
        suffix < b.length - prefix &&
        a[a.length - 1 - suffix] === b[b.length - 1 - suffix]
    ) {
        suffix++;
    }
    return middleHunks(a.slice(prefix, a.length - suffix), b.slice(prefix, b.length - suffix)).map((hunk) => ({
        aStart: hunk.aStart + prefix,
        aEnd: hunk.aEnd + prefix,
        bStart: hunk.bStart + prefix,
        bEnd: hunk.bEnd + prefix,
    }));
}

export interface Hunk {
    aStart: number;
    aEnd: number;
    bStart: number;
    bEnd: number;
}

/** Hunks (runs of changed lines) between two line lists, from their longest common subsequence. */
function middleHunks(a: string[], b: string[]): Hunk[] {
    if (a.length === 0 && b.length === 0) {
        return [];
    }
    if (a.length === 0 || b.length === 0 || a.length * b.length > MAX_DIFF_CELLS) {
        return [{ aStart: 0, aEnd: a.length, bStart: 0, bEnd: b.length }];
    }
    const width = b.length + 1;
    // lcs[i * width + j]: length of the LCS of a[i:] and b[j:].
    const lcs = new Uint32Array((a.length + 1) * width);
    for (let i = a.length - 1; i >= 0; i--) {
        for (let j = b.length - 1; j >= 0; j--) {
            lcs[i * width + j] =
                a[i] === b[j]
                    ? (lcs[(i + 1) * width + j + 1] as number) + 1
                    : Math.max(lcs[(i + 1) * width + j] as number, lcs[i * width + j + 1] as number);
        }
    }
    const hunks: Hunk[] = [];
    let open: Hunk | undefined;
    let i = 0;
    let j = 0;
    const close = (): void => {
        if (open) {
            open.aEnd = i;
            open.bEnd = j;
            hunks.push(open);
            open = undefined;
        }
    };
    while (i < a.length || j < b.length) {
        if (i < a.length && j < b.length && a[i] === b[j]) {
            close();
            i++;
            j++;
            continue;
        }
        open ??= { aStart: i, aEnd: i, bStart: j, bEnd: j };
        if (
            j < b.length &&
            (i >= a.length || (lcs[i * width + j + 1] as number) >= (lcs[(i + 1) * width + j] as number))
        ) {
            j++;
        } else {
            i++;
        }
    }
    close();
    return hunks;
}

/**
 * `before` → `after` as a unified diff: each change with a line of context either side, under a
 * `@@ -a,n +b,m @@` header (`numbered`), or a bare `@@` where the texts are snippets of a file
 * whose lines the numbers would not name.
 */
export function unifiedDiff(before: string, after: string, numbered = true): string {
    const split = (text: string): string[] => (text === '' ? [] : text.replace(/\n$/, '').split('\n'));
    const a = split(before);
    const b = split(after);
    const out: string[] = [];
    for (const hunk of diffLines(a, b)) {
        const from = Math.max(0, hunk.aStart - 1);
        const to = Math.min(a.length, hunk.aEnd + 1);
        const bFrom = hunk.bStart - (hunk.aStart - from);
        const bTo = hunk.bEnd + (to - hunk.aEnd);
        out.push(numbered ? `@@ -${from + 1},${to - from} +${bFrom + 1},${bTo - bFrom} @@` : '@@');
        out.push(...a.slice(from, hunk.aStart).map((line) => ` ${line}`));
        out.push(...a.slice(hunk.aStart, hunk.aEnd).map((line) => `-${line}`));
        out.push(...b.slice(hunk.bStart, hunk.bEnd).map((line) => `+${line}`));
        out.push(...a.slice(hunk.aEnd, to).map((line) => ` ${line}`));
    }
    return out.join('\n');
}
