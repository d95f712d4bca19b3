/**
 * Pure helpers for a review whose file the user edits meanwhile: a line-based 3-way merge that
 * moves a proposal onto the user's current text (the rule the server's own rebase follows, so
 * that what the review shows is what the server will send again), and the check that an edit the
 * server sends again is the one the user already decided on.
 */
import { diffLines, Hunk, splitLinesKeepEnds } from './edits';

/** Lines either side of a change of the proposal that the user's changes must leave alone. */
export const CONTEXT_LINES = 3;

export type Rebased =
    /** The proposal's changes applied to the user's text. */
    | { text: string }
    /** The user changed lines at or near the proposal's: `line` (1-based, in the user's text). */
    | { conflict: { line: number } };

/**
 * Move `proposed` (made from `base`) onto `current` (the user's text, also made from `base`).
 * A change of the user's that touches, or comes within `context` lines of, a change of the
 * proposal is a conflict: the proposal's context would no longer be what it was made against.
 * Unchanged lines and the user's lines keep their line breaks; the proposal's lines keep theirs.
 */
export function rebase(base: string, proposed: string, current: string, context = CONTEXT_LINES): Rebased {
    if (proposed === base || proposed === current) {
        return { text: current };
    }
    if (current === base) {
        return { text: proposed };
    }
    const lines = splitLinesKeepEnds(base);
    const ours = splitLinesKeepEnds(proposed);
    const theirs = splitLinesKeepEnds(current);
    const mine = diffLines(lines, ours);
    const yours = diffLines(lines, theirs);
    for (const change of mine) {
        for (const typed of yours) {
            if (typed.aStart < change.aEnd + context && typed.aEnd > change.aStart - context) {
                return { conflict: { line: typed.bStart + 1 } };
            }
        }
    }
    const hunks: Array<{ hunk: Hunk; from: string[] }> = [
        ...mine.map((hunk) => ({ hunk, from: ours })),
        ...yours.map((hunk) => ({ hunk, from: theirs })),
    ];
    hunks.sort((x, y) => x.hunk.aStart - y.hunk.aStart || x.hunk.aEnd - y.hunk.aEnd);
    const out: string[] = [];
    let cursor = 0;
    for (const { hunk, from } of hunks) {
        out.push(...lines.slice(cursor, hunk.aStart), ...from.slice(hunk.bStart, hunk.bEnd));
        cursor = hunk.aEnd;
    }
    out.push(...lines.slice(cursor));
    return { text: out.join('') };
}

/** What `rebaseBeside` makes: the proposal on the user's text, and what it could not carry. */
export interface Beside {
    text: string;
    /** Changes of the proposal left out: the user changed those very lines (1-based, theirs). */
    superseded: number[];
}

/**
 * Move `proposed` onto `current` for a review the user is looking at, when `rebase` refuses
 * (the user changed lines next to the proposal's). Every change of the user's is kept as it is:
 * a proposal's change beside one goes in next to it, and one on the very lines the user changed
 * is left out (`superseded`), so the review never shows the user's own text as removed. The
 * user sees the result and decides on it; the server's own merge never places an edit this way.
 */
export function rebaseBeside(base: string, proposed: string, current: string): Beside {
    const lines = splitLinesKeepEnds(base);
    const ours = splitLinesKeepEnds(proposed);
    const theirs = splitLinesKeepEnds(current);
    const yours = diffLines(lines, theirs);
    const superseded: number[] = [];
    const mine = diffLines(lines, ours).filter((change) => {
        const typed = yours.find((t) => overlaps(change, t));
        if (typed) {
            superseded.push(typed.bStart + 1);
        }
        return typed === undefined;
    });
    // At one place: the user's inserted lines first, then the proposal's.
    const hunks: Array<{ hunk: Hunk; from: string[]; order: number }> = [
        ...yours.map((hunk) => ({ hunk, from: theirs, order: 0 })),
        ...mine.map((hunk) => ({ hunk, from: ours, order: 1 })),
    ];
    hunks.sort((x, y) => x.hunk.aStart - y.hunk.aStart || x.hunk.aEnd - y.hunk.aEnd || x.order - y.order);
    const out: string[] = [];
    let cursor = 0;
    for (const { hunk, from } of hunks) {
        out.push(...lines.slice(cursor, hunk.aStart), ...from.slice(hunk.bStart, hunk.bEnd));
        cursor = Math.max(cursor, hunk.aEnd);
    }
    out.push(...lines.slice(cursor));
    return { text: out.join(''), superseded };
}

/** Whether two changes of the same base touch the same lines (one inside the other's, too). */
function overlaps(a: Hunk, b: Hunk): boolean {
    const insideA = (at: number): boolean => a.aStart < at && at < a.aEnd;
    const insideB = (at: number): boolean => b.aStart < at && at < b.aEnd;
    if (a.aStart === a.aEnd || b.aStart === b.aEnd) {
        return (a.aStart === a.aEnd && insideB(a.aStart)) || (b.aStart === b.aEnd && insideA(b.aStart));
    }
    return a.aStart < b.aEnd && b.aStart < a.aEnd;
}

/** One file of an edit the user decided on after its file had moved on. */
export interface DecidedFile {
    uri: string;
    /** The buffer version the decision was taken at. */
    version: number;
    /** The agent's proposal merged onto the text of that version (without the user's retouches). */
    proposed: string;
    /** Accepted: the text the user accepted (the proposed side, retouches included). */
    accepted?: string;
}

/**
 * A decision taken on a review whose files had moved on. The server is told the edit is stale;
 * it merges the edit onto the new text itself and sends it again, and that edit gets the same
 * decision without asking again, if it is the one the user saw.
 */
export interface Decided {
    accept: boolean;
    reason?: string;
    files: DecidedFile[];
}

/** One file of an edit that arrived: its pinned version and the text the edit makes. */
export interface ArrivedFile {
    uri: string;
    version: number | null | undefined;
    proposed: string;
}

/** True when `arrived` is the edit of `decided`, merged as the user saw it, at the same versions. */
export function sameDecision(decided: Decided, arrived: readonly ArrivedFile[]): boolean {
    if (arrived.length !== decided.files.length) {
        return false;
    }
    return arrived.every((file) => {
        const seen = decided.files.find((d) => d.uri === file.uri);
        return seen !== undefined && seen.version === file.version && seen.proposed === file.proposed;
    });
}
