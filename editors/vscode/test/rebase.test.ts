import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Decided, rebase, rebaseBeside, sameDecision } from '../src/rebase';

const text = (...lines: string[]): string => lines.map((line) => line + '\n').join('');
const numbered = (count: number): string[] => Array.from({ length: count }, (_, i) => `line ${i + 1}`);

describe('rebase', () => {
    const base = text(...numbered(12));
    const proposed = base.replace('line 10\n', 'line ten\n');

    it('puts the proposal onto a line the user added far from it', () => {
        const current = 'import os\n' + base;
        assert.deepEqual(rebase(base, proposed, current), { text: 'import os\n' + proposed });
    });

    it('keeps the user\'s deletion and the proposal\'s change together', () => {
        const current = base.replace('line 2\n', '');
        assert.deepEqual(rebase(base, proposed, current), { text: proposed.replace('line 2\n', '') });
    });

    it('calls a change within three lines of the proposal a conflict, and names the user\'s line', () => {
        const current = base.replace('line 7\n', 'line 7 edited\n');
        assert.deepEqual(rebase(base, proposed, current), { conflict: { line: 7 } });
        assert.deepEqual(rebase(base, proposed, base.replace('line 10\n', 'line 10!\n')), { conflict: { line: 10 } });
        // Four lines away is outside the context: it merges.
        const far = base.replace('line 6\n', 'line 6 edited\n');
        assert.deepEqual(rebase(base, proposed, far), { text: proposed.replace('line 6\n', 'line 6 edited\n') });
    });

    it('calls two insertions at the same place a conflict', () => {
        const proposedInsert = base.replace('line 5\n', 'line 5\nagent\n');
        const typedInsert = base.replace('line 5\n', 'line 5\nuser\n');
        assert.ok('conflict' in rebase(base, proposedInsert, typedInsert));
    });

    it('takes either side when the other did nothing, or both when they agree', () => {
        assert.deepEqual(rebase(base, proposed, base), { text: proposed });
        assert.deepEqual(rebase(base, base, 'x\n'), { text: 'x\n' });
        assert.deepEqual(rebase(base, proposed, proposed), { text: proposed });
    });

    it('keeps each side\'s line breaks: the user\'s CRLF lines and a missing final newline', () => {
        const crlf = numbered(12).join('\r\n');
        const agent = crlf.replace('line 11', 'line eleven');
        const typed = 'top\r\n' + crlf;
        assert.deepEqual(rebase(crlf, agent, typed), { text: 'top\r\n' + agent });
    });

    it('merges any pair of far-apart changes so that both are in the result', () => {
        for (let seed = 0; seed < 50; seed++) {
            const lines = numbered(30 + (seed % 7));
            const at = 20 + (seed % 5);
            const ours = [...lines];
            ours.splice(at, seed % 3, ...Array.from({ length: seed % 4 }, (_, i) => `agent ${i}`));
            const theirs = [...lines];
            theirs.splice(seed % 10, (seed >> 1) % 3, ...Array.from({ length: (seed >> 2) % 3 }, (_, i) => `user ${i}`));
            const merged = rebase(text(...lines), text(...ours), text(...theirs));
            assert.ok('text' in merged, `seed ${seed}`);
            const expected = [...theirs];
            const shift = theirs.length - lines.length;
            expected.splice(at + shift, seed % 3, ...ours.slice(at, at + (seed % 4)));
            assert.equal(merged.text, text(...expected), `seed ${seed}`);
        }
    });
});

describe('sameDecision', () => {
    const decided: Decided = {
        accept: true,
        files: [{ uri: 'file:///w/a.py', version: 7, proposed: 'merged\n', accepted: 'merged, retouched\n' }],
    };

    it('recognises the edit sent again for the version the user decided at', () => {
        assert.equal(sameDecision(decided, [{ uri: 'file:///w/a.py', version: 7, proposed: 'merged\n' }]), true);
    });

    it('refuses another version, another text or other files', () => {
        assert.equal(sameDecision(decided, [{ uri: 'file:///w/a.py', version: 8, proposed: 'merged\n' }]), false);
        assert.equal(sameDecision(decided, [{ uri: 'file:///w/a.py', version: 7, proposed: 'other\n' }]), false);
        assert.equal(sameDecision(decided, [{ uri: 'file:///w/b.py', version: 7, proposed: 'merged\n' }]), false);
        assert.equal(
            sameDecision(decided, [
                { uri: 'file:///w/a.py', version: 7, proposed: 'merged\n' },
                { uri: 'file:///w/b.py', version: 1, proposed: 'b\n' },
            ]),
            false,
        );
    });
});

describe('rebaseBeside', () => {
    const base = 'PORT = 8000\nTIMEOUT = 30\nWORKERS = 4\nBACKLOG = 128\n';
    const proposed = base.replace('WORKERS = 4', 'WORKERS = 8');

    it('keeps a line the user typed right next to the change, and the change', () => {
        const current = base.replace('WORKERS = 4\n', '# tuned\nWORKERS = 4\n');
        assert.ok('conflict' in rebase(base, proposed, current));
        assert.deepEqual(rebaseBeside(base, proposed, current), {
            text: base.replace('WORKERS = 4\n', '# tuned\nWORKERS = 8\n'),
            superseded: [],
        });
        const below = base.replace('WORKERS = 4\n', 'WORKERS = 4\n# tuned\n');
        assert.equal(rebaseBeside(base, proposed, below).text, base.replace('WORKERS = 4\n', 'WORKERS = 8\n# tuned\n'));
    });

    it("leaves out a change on the very line the user changed: the user's text stays", () => {
        const current = base.replace('WORKERS = 4', 'WORKERS = 16');
        assert.deepEqual(rebaseBeside(base, proposed, current), { text: current, superseded: [3] });
    });

    it('keeps both when both insert at one place, the user\'s lines first', () => {
        const adding = base.replace('BACKLOG', 'QUEUE = 1\nBACKLOG');
        const current = base.replace('BACKLOG', '# mine\nBACKLOG');
        assert.equal(rebaseBeside(base, adding, current).text, base.replace('BACKLOG', '# mine\nQUEUE = 1\nBACKLOG'));
    });
});
