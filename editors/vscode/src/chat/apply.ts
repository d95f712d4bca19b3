/**
 * Where a code block of the chat goes when the user applies it to a file: over the selection;
 * else over the lines it rewrites (its first line found once in the file, and its last line
 * after it about as far as the block is long, or else the block its first line opens: the
 * function it is a new version of); else at the cursor, as lines of
 * their own. The result is proposed as an edit the user reviews. Pure.
 */
import { splitLinesKeepEnds } from '../edits';

export interface Placed {
    /** The file's text with the code in it. */
    text: string;
    /** Where it went: over the selection, over the lines it matches, or at the cursor. */
    where: 'selection' | 'lines' | 'cursor';
}

/**
 * `text` with `code` in it. `selection` (string offsets) is the editor's selection, empty when
 * `start === end` (then it is the cursor).
 */
export function placeCode(text: string, code: string, selection: { start: number; end: number }): Placed {
    const eol = /\r\n/.test(text) ? '\r\n' : '\n';
    const block = code.replace(/\r?\n/g, eol);
    if (selection.end > selection.start) {
        const replaced = text.slice(selection.start, selection.end);
        // A selection of whole lines takes whole lines: the block keeps the line break after it.
        const tail = replaced.endsWith(eol) && !block.endsWith(eol) ? eol : '';
        return { text: text.slice(0, selection.start) + block + tail + text.slice(selection.end), where: 'selection' };
    }
    const lines = splitLinesKeepEnds(text);
    const wanted = block
        .split(eol)
        .map((line) => line.trim())
        .filter(Boolean);
    const first = wanted[0];
    const last = wanted[wanted.length - 1];
    if (first !== undefined && last !== undefined && wanted.length > 1) {
        const trimmed = lines.map((line) => line.trim());
        const from = onlyIndex(trimmed, first, 0);
        if (from !== undefined) {
            // Its last line: the first one like it after the first (a function's end is its
            // nearest), about as far as the block is long; else the block the first line opens.
            const to = trimmed.indexOf(last, from + 1);
            const span = to - from + 1;
            const near = to > from && span <= wanted.length * 2 + 2 && span * 2 + 2 >= wanted.length;
            const end = near ? to : blockEnd(lines, from);
            const body = block.endsWith(eol) ? block : block + eol;
            const kept = [...lines.slice(0, from), body, ...lines.slice(end + 1)];
            return { text: kept.join(''), where: 'lines' };
        }
    }
    // At the cursor: on lines of its own.
    const at = selection.start;
    const before = text.slice(0, at);
    const after = text.slice(at);
    const bare = block.endsWith(eol) ? block.slice(0, -eol.length) : block;
    if (before.length === 0 || before.endsWith('\n')) {
        return { text: before + bare + eol + after, where: 'cursor' }; // at a line's start
    }
    if (after.length === 0 || after.startsWith(eol)) {
        return { text: before + eol + bare + after, where: 'cursor' }; // at a line's end
    }
    return { text: before + eol + bare + eol + after, where: 'cursor' };
}

/**
 * The last line of the block that starts at `from` (a function, a class): the lines after it
 * that are blank or indented deeper, and a closing line at its own depth (`}`, `end`). Blank
 * lines at its end are not its.
 */
function blockEnd(lines: readonly string[], from: number): number {
    const depth = (line: string): number => line.length - line.trimStart().length;
    const own = depth(lines[from] ?? '');
    let end = from;
    for (let i = from + 1; i < lines.length; i++) {
        const line = lines[i] as string;
        if (!line.trim()) {
            continue;
        }
        if (depth(line) > own) {
            end = i;
            continue;
        }
        if (depth(line) === own && /^[}\])]|^end\b/.test(line.trim())) {
            end = i;
        }
        break;
    }
    return end;
}

/** The index of the one line from `start` on that equals `wanted`; undefined when none or several. */
function onlyIndex(lines: readonly string[], wanted: string, start: number): number | undefined {
    let found: number | undefined;
    for (let i = start; i < lines.length; i++) {
        if (lines[i] === wanted) {
            if (found !== undefined) {
                return undefined;
            }
            found = i;
        }
    }
    return found;
}
