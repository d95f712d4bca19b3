import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { applyTextEdits, diffTextEdits, lineStarts, offsetAt, positionAt, TextEdit, unifiedDiff } from '../src/edits';

function edit(sl: number, sc: number, el: number, ec: number, newText: string): TextEdit {
    return { range: { start: { line: sl, character: sc }, end: { line: el, character: ec } }, newText };
}

describe('applyTextEdits', () => {
    it('applies a single replacement', () => {
        assert.equal(applyTextEdits('hello world\n', [edit(0, 6, 0, 11, 'there')]), 'hello there\n');
    });

    it('applies several edits given in any order, all against the original text', () => {
        const text = 'a\nb\nc\nd\n';
        const edits = [edit(3, 0, 3, 1, 'D'), edit(0, 0, 0, 1, 'A'), edit(1, 0, 2, 0, '')];
        assert.equal(applyTextEdits(text, edits), 'A\nc\nD\n');
    });

    it('keeps the array order of inserts at the same position', () => {
        assert.equal(applyTextEdits('x', [edit(0, 0, 0, 0, '1'), edit(0, 0, 0, 0, '2')]), '12x');
    });

    it('counts characters in UTF-16 code units (astral characters take two)', () => {
        // '😀' is two UTF-16 code units: 'b' is at character 3.
        const text = 'a😀b\n';
        assert.equal(applyTextEdits(text, [edit(0, 3, 0, 4, 'B')]), 'a😀B\n');
        assert.equal(applyTextEdits('é€z', [edit(0, 2, 0, 3, 'Z')]), 'é€Z');
    });

    it('treats CRLF as one line break and keeps it', () => {
        const text = 'one\r\ntwo\r\nthree\r\n';
        assert.equal(applyTextEdits(text, [edit(1, 0, 1, 3, 'TWO')]), 'one\r\nTWO\r\nthree\r\n');
        // A character past the end of a CRLF line stops before the \r.
        assert.equal(applyTextEdits(text, [edit(0, 99, 0, 99, '!')]), 'one!\r\ntwo\r\nthree\r\n');
        assert.equal(applyTextEdits(text, [edit(0, 3, 1, 0, ' ')]), 'one two\r\nthree\r\n');
    });

    it('handles a lone \\r as a line break', () => {
        assert.equal(applyTextEdits('a\rb', [edit(1, 0, 1, 1, 'B')]), 'a\rB');
    });

    it('appends past the last line and fills an empty text', () => {
        assert.equal(applyTextEdits('a\n', [edit(1, 0, 1, 0, 'b\n')]), 'a\nb\n');
        assert.equal(applyTextEdits('a', [edit(5, 0, 5, 0, '!')]), 'a!');
        assert.equal(applyTextEdits('', [edit(0, 0, 0, 0, 'new\n')]), 'new\n');
    });

    it('refuses overlapping edits', () => {
        assert.throws(() => applyTextEdits('abcdef', [edit(0, 0, 0, 3, 'x'), edit(0, 2, 0, 4, 'y')]), /overlaps/);
    });
});

describe('positions', () => {
    it('maps offsets and positions both ways, CRLF included', () => {
        const text = 'ab\r\ncd\ne';
        assert.deepEqual(lineStarts(text), [0, 4, 7]);
        assert.equal(offsetAt(text, { line: 1, character: 1 }), 5);
        assert.deepEqual(positionAt(text, 5), { line: 1, character: 1 });
        assert.deepEqual(positionAt(text, text.length), { line: 2, character: 1 });
        assert.equal(offsetAt(text, { line: 9, character: 0 }), text.length);
    });
});

describe('diffTextEdits', () => {
    const roundTrip = (before: string, after: string): TextEdit[] => {
        const edits = diffTextEdits(before, after);
        assert.equal(applyTextEdits(before, edits), after);
        return edits;
    };

    it('returns nothing for equal texts', () => {
        assert.deepEqual(diffTextEdits('a\nb\n', 'a\nb\n'), []);
    });

    it('changes only the lines that differ, one edit per hunk', () => {
        const before = 'a\nb\nc\nd\ne\nf\n';
        const after = 'a\nB\nc\nd\ne\nF\n';
        const edits = roundTrip(before, after);
        assert.equal(edits.length, 2);
        assert.deepEqual(edits[0], edit(1, 0, 2, 0, 'B\n'));
        assert.deepEqual(edits[1], edit(5, 0, 6, 0, 'F\n'));
    });

    it('handles inserts, deletes, missing final newlines, CRLF and empty texts', () => {
        roundTrip('a\nb\n', 'a\nx\nb\n');
        roundTrip('a\nb\nc\n', 'a\nc\n');
        roundTrip('a\nb', 'a\nb\n');
        roundTrip('a\nb\n', 'a\nb');
        roundTrip('one\r\ntwo\r\n', 'one\r\n2\r\ntwo\r\n');
        roundTrip('one\r\ntwo\r\n', 'one\ntwo\n');
        roundTrip('', 'new\nfile\n');
        roundTrip('old\n', '');
        roundTrip('x😀y\nz\n', 'x😀Y\nz\n');
    });

    it('round-trips random edits', () => {
        let seed = 42;
        const random = (n: number): number => {
            seed = (seed * 1103515245 + 12345) % 2147483648;
            return seed % n;
        };
        const words = ['a\n', 'b\n', 'c\r\n', 'dd\n', '\n', 'e'];
        for (let round = 0; round < 200; round++) {
            const make = (): string => Array.from({ length: random(8) }, () => words[random(words.length)]).join('');
            roundTrip(make(), make());
        }
    });
});

describe('unifiedDiff', () => {
    it('numbers each change with a line of context either side', () => {
        const before = 'a\nb\nc\nd\ne\n';
        const after = 'a\nb\nC\nd\ne\nf\n';
        assert.equal(unifiedDiff(before, after), ['@@ -2,3 +2,3 @@', ' b', '-c', '+C', ' d', '@@ -5,1 +5,2 @@', ' e', '+f'].join('\n'));
        assert.equal(unifiedDiff('same\n', 'same\n'), '');
    });
});
