import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { PromptHistory } from '../src/chat/input';
import { createMarkdown, MARKDOWN_OPTIONS, settledLength } from '../src/chat/markdown';
import { errorActions } from '../src/chat/actions';
import { placeCode } from '../src/chat/apply';
import { ChatItem, ChatModel, PromptItem, editOutcome, proposalDiff, splitContext, withContext } from '../src/chat/model';
import { classColors, parseJsonc, styleOf } from '../src/chat/tokens';
import { asksCodebase } from '../src/codebase';
import type { AgentEvent, HistoryItem } from '../src/protocol';

const ROOT = '/work/project';
const READ_RESULT = '<untrusted source="hello.py">\n1\tdef greet():\n</untrusted>';
const EDIT_RESULT = 'applied: hello.py\n--- a/hello.py\n+++ b/hello.py\n@@ -2 +2 @@\n-    return "hello"\n+    return "hi there"\n';

/** A turn as the server streams it: read, edit (accepted), answer. */
function liveTurn(turn: number): AgentEvent[] {
    const base = { session: 's1', turn };
    return [
        { ...base, kind: 'start', prompt: 'make it friendlier', continuing: turn > 1, turns: turn - 1 },
        { ...base, kind: 'tool', name: 'read_file', args: { path: 'hello.py' } },
        { ...base, kind: 'toolResult', name: 'read_file', ok: true, summary: 'read hello.py', result: READ_RESULT },
        { ...base, kind: 'usage', inputTokens: 100, cachedTokens: 0, outputTokens: 10, contextTokens: 120, contextWindow: 1000 },
        { ...base, kind: 'tool', name: 'edit_file', args: { path: 'hello.py', old: '"hello"', new: '"hi there"' } },
        { ...base, kind: 'toolResult', name: 'edit_file', ok: true, summary: 'applied hello.py (+1 -1)', result: EDIT_RESULT },
        { ...base, kind: 'edit', uri: `file://${ROOT}/hello.py`, applied: true },
        { ...base, kind: 'usage', inputTokens: 200, cachedTokens: 100, outputTokens: 20, contextTokens: 240, contextWindow: 1000 },
        { ...base, kind: 'text', text: 'I made it say ' },
        { ...base, kind: 'text', text: '**hi there**.' },
        { ...base, kind: 'usage', inputTokens: 300, cachedTokens: 200, outputTokens: 5, contextTokens: 260, contextWindow: 1000 },
        { ...base, kind: 'status', status: 'completed' },
    ] as AgentEvent[];
}

/** The same turn as `lspAgent.history` gives it back. */
function historyTurn(turn: number): HistoryItem[] {
    return [
        { type: 'prompt', turn, text: 'make it friendlier', selection: null },
        { type: 'tool', turn, id: 'c1', name: 'read_file', args: { path: 'hello.py' }, ok: true, summary: 'read hello.py', result: READ_RESULT, permission: null },
        { type: 'tool', turn, id: 'c2', name: 'edit_file', args: { path: 'hello.py', old: '"hello"', new: '"hi there"' }, ok: true, summary: 'applied hello.py (+1 -1)', result: EDIT_RESULT, permission: null },
        { type: 'edit', turn, path: 'hello.py', applied: true, undoable: true },
        { type: 'answer', turn, text: 'I made it say **hi there**.' },
        { type: 'usage', turn, inputTokens: 600, cachedTokens: 300, outputTokens: 35, calls: 3 },
        { type: 'status', turn, status: 'completed' },
    ];
}

/** Items without their keys, as the webview gets them, to compare what two models show. */
function shown(items: ChatItem[]): unknown[] {
    return JSON.parse(JSON.stringify(items.map(({ key: _key, ...rest }) => rest))) as unknown[];
}

function played(model: ChatModel, events: AgentEvent[], prompt = 'make it friendlier'): void {
    model.beginTurn(prompt);
    for (const event of events) {
        model.event(event);
    }
    model.endTurn({ status: 'completed', answer: 'I made it say **hi there**.' });
}

describe('ChatModel', () => {
    it('shows a turn from its events as it shows it from the history after a restart', () => {
        const live = new ChatModel(ROOT);
        live.load('s1', []);
        played(live, liveTurn(1));
        const restored = new ChatModel(ROOT);
        restored.load('s1', historyTurn(1));

        assert.deepEqual(shown(restored.items), shown(live.items));
        assert.deepEqual(
            live.items.map((item) => item.kind),
            ['prompt', 'tool', 'edit', 'answer', 'status'],
        );
    });

    it('makes an edit card with its files and each hunk, and offers to undo the turn', () => {
        const model = new ChatModel(ROOT);
        model.load('s1', historyTurn(1));
        const edit = model.items.find((item) => item.kind === 'edit');
        assert.ok(edit?.kind === 'edit');
        assert.equal(edit.state, 'applied');
        assert.deepEqual(edit.files, [{ path: 'hello.py', applied: true, undoable: true }]);
        assert.deepEqual(edit.hunks, [{ label: 'hunk 1 · line 2', status: 'accepted' }]);
        assert.match(edit.diff ?? '', /^--- a\/hello.py\n\+\+\+ b\/hello.py\n@@ -2 \+2 @@/);
        const status = model.items[model.items.length - 1];
        assert.ok(status?.kind === 'status');
        assert.equal(status.undo, 'available');
        assert.deepEqual(status.usage, { calls: 3, inputTokens: 600, cachedTokens: 300, outputTokens: 35 });
        assert.equal(model.lastUndoable(), 1);
    });

    it('sums the turns for the header, with the context from the last call', () => {
        const model = new ChatModel(ROOT);
        model.load('s1', historyTurn(1));
        played(model, liveTurn(2));
        const summary = model.summary();
        assert.equal(summary.usage.inputTokens, 1200);
        assert.equal(summary.usage.outputTokens, 70);
        assert.equal(summary.usage.calls, 6);
        assert.equal(summary.contextTokens, 260);
        assert.equal(summary.contextWindow, 1000);
    });

    it('numbers a turn as the server does, and keeps an undone turn undone', () => {
        const model = new ChatModel(ROOT);
        model.load('s1', [...historyTurn(1), ...historyTurn(2), { type: 'undo', turn: 2, undid: 2, files: ['hello.py'] }]);
        const statuses = model.items.filter((item) => item.kind === 'status');
        assert.deepEqual(
            statuses.map((item) => (item.kind === 'status' ? [item.turn, item.undo] : [])),
            [
                [1, 'available'],
                [2, 'done'],
            ],
        );
        assert.equal(model.lastUndoable(), 1);
        model.setUndo(1, 'running');
        assert.equal(model.lastUndoable(), undefined);
        const change = model.setUndo(1, 'done', ['hello.py']);
        assert.ok(change.upsert.some((item) => item.kind === 'note' && item.text === 'Turn 1 undone: hello.py'));
        assert.ok(change.upsert.some((item) => item.kind === 'status' && item.turn === 1 && item.undo === 'done'));
    });

    it('keeps a permission question in the conversation until the server closes it', () => {
        const model = new ChatModel(ROOT);
        model.load('s1', []);
        model.beginTurn('make a file');
        const base = { session: 's1', turn: 1 };
        model.event({ ...base, kind: 'tool', name: 'bash', args: { command: 'touch x' } });
        const asked = model.event({
            ...base,
            kind: 'question',
            id: 'q1',
            state: 'open',
            name: 'bash',
            text: 'lsp-agent wants to run: touch x',
            actions: ['Allow', 'Allow for this session', 'Deny'],
            timeoutSeconds: 120,
        });
        const question = asked.upsert[0];
        assert.ok(question?.kind === 'question');
        assert.deepEqual(question.actions, ['Allow', 'Allow for this session', 'Deny']);
        model.answering(question.key);
        assert.equal(question.state, 'answering');
        model.event({ ...base, kind: 'question', id: 'q1', state: 'answered', name: 'bash', text: '', answer: 'Allow' });
        model.event({ ...base, kind: 'permission', name: 'bash', decision: 'allow', asked: true, scope: 'once' });
        model.event({ ...base, kind: 'toolResult', name: 'bash', ok: true, summary: 'exit 0' });
        assert.equal(question.state, 'answered');
        assert.equal(question.answer, 'Allow');
        const tool = model.items.find((item) => item.kind === 'tool');
        assert.ok(tool?.kind === 'tool');
        assert.equal(tool.permission, 'allow (once)');
        assert.equal(tool.state, 'done');
    });

    it('withdraws a question its turn left open', () => {
        const model = new ChatModel(ROOT);
        model.load('s1', []);
        model.beginTurn('make a file');
        model.event({ session: 's1', turn: 1, kind: 'question', id: 'q1', state: 'open', name: 'bash', text: 'run?', actions: ['Allow', 'Deny'] });
        model.endTurn({ status: 'cancelled' });
        const question = model.items.find((item) => item.kind === 'question');
        assert.ok(question?.kind === 'question');
        assert.equal(question.state, 'withdrawn');
    });

    it('puts the review on the edit card that proposed it, and an undo review on a card of its own', () => {
        const model = new ChatModel(ROOT);
        model.load('s1', historyTurn(1));
        model.setUndo(1, 'running');
        const opened = model.setReview({ label: 'hello.py', files: ['hello.py'] });
        assert.equal(opened.upsert[0]?.kind, 'review');
        const closed = model.setReview(undefined);
        assert.deepEqual(closed.remove, [opened.upsert[0]?.key]);
        model.setUndo(1, 'failed');

        model.beginTurn('again');
        model.event({ session: 's1', turn: 2, kind: 'tool', name: 'edit_file', args: { path: 'hello.py' } });
        const review = model.setReview({ label: 'hello.py', files: ['hello.py'] });
        const card = review.upsert[0];
        assert.ok(card?.kind === 'edit');
        assert.equal(card.state, 'review');
        assert.deepEqual(card.review, { label: 'hello.py', files: ['hello.py'] });
        model.setReview(undefined);
        model.event({ session: 's1', turn: 2, kind: 'toolResult', name: 'edit_file', ok: false, summary: 'rejected hello.py: no', result: 'not applied — the user rejected this edit to hello.py: no.' });
        assert.equal(card.state, 'rejected');
        assert.equal(card.review, undefined);
    });

    it('adds the answer of a turn that streamed none before its status', () => {
        const model = new ChatModel(ROOT);
        model.load('s1', []);
        model.beginTurn('hi');
        model.event({ session: 's1', turn: 1, kind: 'status', status: 'max_turns', error: 'stopped' });
        const change = model.endTurn({ status: 'max_turns', answer: 'stopped after 50 model calls' });
        assert.deepEqual(
            model.items.map((item) => item.kind),
            ['prompt', 'answer', 'status'],
        );
        assert.deepEqual(
            change.upsert.map((item) => item.kind),
            ['answer', 'status', 'prompt'], // the prompt offers its rewind once the turn ended
        );
    });

    it('ends every card of a stopped turn in its real state, live and after a reload', () => {
        const model = new ChatModel(ROOT);
        model.load('s1', []);
        model.beginTurn('say bye');
        const base = { session: 's1', turn: 1 };
        model.event({ ...base, kind: 'tool', name: 'read_file', args: { path: 'a.py' } });
        model.event({ ...base, kind: 'toolResult', name: 'read_file', ok: true, summary: 'read a.py' });
        model.event({ ...base, kind: 'tool', name: 'edit_file', args: { path: 'a.py', old: 'x', new: 'y' } });
        model.setReview({ label: 'a.py', files: ['a.py'] });
        model.event({ ...base, kind: 'tool', name: 'bash', args: { command: 'sleep 9' } });
        model.endTurn({ status: 'cancelled' });
        const states = model.items.filter((item) => item.kind === 'tool' || item.kind === 'edit').map((item) => ('state' in item ? item.state : ''));
        assert.deepEqual(states, ['done', 'stopped', 'stopped']);
        const restored = new ChatModel(ROOT);
        restored.load('s1', [
            { type: 'prompt', turn: 1, text: 'say bye' },
            { type: 'tool', turn: 1, id: 'c0', name: 'read_file', args: { path: 'a.py' }, ok: true, summary: 'read a.py', result: READ_RESULT },
            // What the server stores for a call the stop closed: a result, no `ok`.
            { type: 'tool', turn: 1, id: 'c1', name: 'edit_file', args: { path: 'a.py' }, result: 'error: cancelled by the user before this tool finished' },
            { type: 'tool', turn: 1, id: 'c2', name: 'bash', args: { command: 'sleep 9' }, result: 'error: cancelled by the user before this tool finished' },
            { type: 'status', turn: 1, status: 'cancelled' },
        ]);
        const again = restored.items.filter((item) => item.kind === 'tool' || item.kind === 'edit').map((item) => ('state' in item ? item.state : ''));
        assert.deepEqual(again, states);
    });

    it("reads each hunk from the server's facts, the user's own lines as theirs", () => {
        const model = new ChatModel(ROOT);
        model.load('s1', [
            { type: 'prompt', turn: 1, text: 'double the workers', mode: 'ask' },
            {
                type: 'tool',
                turn: 1,
                id: 'c1',
                name: 'edit_file',
                args: { path: 'limits.py', old: 'WORKERS = 4', new: 'WORKERS = 8' },
                ok: true,
                summary: 'applied limits.py (applied; the user also changed other lines)',
                result: 'the editor applied the edit, but not all of it as proposed: …',
                hunks: [
                    { path: 'limits.py', hunk: 'hunk 1', status: 'accepted', what: 'replaced line 5' },
                    { path: 'limits.py', hunk: '', status: 'user', what: 'line 4' },
                ],
            },
            { type: 'status', turn: 1, status: 'completed' },
        ]);
        const edit = model.items.find((item) => item.kind === 'edit');
        assert.ok(edit?.kind === 'edit');
        assert.equal(edit.state, 'applied');
        assert.deepEqual(edit.hunks, [
            { label: 'hunk 1 · replaced line 5', status: 'accepted' },
            { label: 'line 4', status: 'user' },
        ]);
        assert.equal(edit.proposal, '--- a/limits.py\n+++ b/limits.py\n@@\n-WORKERS = 4\n+WORKERS = 8');
        const prompt = model.items.find((item) => item.kind === 'prompt');
        assert.ok(prompt?.kind === 'prompt');
        assert.equal(prompt.mode, 'ask');
    });

    it('offers a rewind on every prompt, of the files of its turns (or later ones) that changed them, and marks them undone', () => {
        const model = new ChatModel(ROOT);
        model.load('s1', [...historyTurn(1), ...historyTurn(2)]);
        const prompts = (): boolean[] => model.items.filter((item) => item.kind === 'prompt').map((item) => item.kind === 'prompt' && item.rewind);
        assert.deepEqual(prompts(), [true, true]);
        assert.deepEqual(model.rewindable(1), [1, 2]);
        const change = model.setUndo(1, 'done', ['hello.py'], [1, 2]);
        assert.ok(change.upsert.some((item) => item.kind === 'note' && item.text === 'Rewound to before turn 1 (turns 1, 2 undone): hello.py'));
        assert.deepEqual(prompts(), [true, true]); // the conversation can still go back
        assert.deepEqual(model.rewindable(1), []); // the files cannot
        const again = new ChatModel(ROOT);
        again.load('s1', [...historyTurn(1), ...historyTurn(2), { type: 'undo', turn: 2, undid: 1, turns: [1, 2], files: ['hello.py'] }]);
        assert.deepEqual(
            again.items.filter((item) => item.kind === 'status').map((item) => item.kind === 'status' && item.undo),
            ['done', 'done'],
        );
    });

    it('keeps the turns a rewind of the conversation went back over, marked, live and after a reload', () => {
        const model = new ChatModel(ROOT);
        model.load('s1', [...historyTurn(1), ...historyTurn(2), ...historyTurn(3)]);
        const change = model.setRewound(2, [2, 3]);
        const marked = (of: ChatModel): Array<[string, number, boolean]> => of.items.filter((item) => item.kind !== 'note').map((item) => [item.kind, item.turn, item.rewound === true]);
        assert.ok(change.upsert.some((item) => item.kind === 'note' && item.text === 'Conversation rewound to before turn 2 (turns 2, 3 folded)'));
        assert.ok(marked(model).every(([, turn, rewound]) => rewound === turn >= 2));
        const prompts = model.items.filter((item): item is PromptItem => item.kind === 'prompt');
        assert.deepEqual(
            prompts.map((item) => item.rewind),
            [true, false, false],
        );
        assert.ok(model.isRewound(3) && !model.isRewound(1));
        const again = new ChatModel(ROOT);
        again.load('s1', [...historyTurn(1), ...historyTurn(2), ...historyTurn(3), { type: 'rewind', turn: 3, to: 2, turns: [2, 3], prompt: 'turn 2' }]);
        assert.deepEqual(marked(again), marked(model));
    });

    it('ignores history items it does not know', () => {
        const model = new ChatModel(ROOT);
        model.load('s1', [{ type: 'prompt', turn: 1, text: 'hi' }, { type: 'telepathy', turn: 1 }]);
        assert.deepEqual(
            model.items.map((item) => item.kind),
            ['prompt'],
        );
        assert.equal(model.title, 'hi');
    });
});

describe('editOutcome', () => {
    it('reads each hunk of a partly applied edit', () => {
        const told = [
            'the user applied part of your edit to a.py (1 of 3 hunks applied as proposed, 1 changed by the user before applying):',
            '- hunk 1: replaced lines 3-4: applied',
            '- hunk 2: inserting 2 lines before line 9: not applied by the user',
            "- hunks 3-4 (@@ def f():): replacing 3 lines: changed by the user before applying (lines 12-14 hold the user's version) — your proposal (-) and what is there instead (+):",
            '  -x',
            '  +y',
        ].join('\n');
        assert.deepEqual(editOutcome(told, true), {
            state: 'partial',
            hunks: [
                { label: 'hunk 1 · replaced lines 3-4', status: 'accepted' },
                { label: 'hunk 2 · inserting 2 lines before line 9', status: 'rejected' },
                { label: 'hunks 3-4 · @@ def f(): · replacing 3 lines', status: 'modified' },
            ],
        });
    });

    it('counts the hunks of a whole edit from its diff', () => {
        const told = [
            'applied: a.py',
            '--- a/a.py',
            '+++ b/a.py',
            '@@ -1,4 +1,5 @@',
            ' a',
            '-b',
            '+B',
            '+B2',
            ' c',
            ' d',
            '@@ -9,3 +10,2 @@',
            ' x',
            '-z',
            ' y',
            '',
        ].join('\n');
        const outcome = editOutcome(told, true);
        assert.equal(outcome.state, 'applied');
        assert.deepEqual(outcome.hunks, [
            { label: 'hunk 1 · lines 2-3', status: 'accepted' },
            { label: 'hunk 2 · after line 10', status: 'accepted' },
        ]);
    });

    it('tells a rejected edit from one that failed', () => {
        assert.equal(editOutcome('not applied — the user rejected this edit to a.py.', false).state, 'rejected');
        assert.equal(editOutcome('not applied — a.py changed in the editor', false).state, 'failed');
    });
});

describe('context', () => {
    it('goes along with the prompt and comes back as chips', () => {
        const prompt = withContext('explain this', { files: ['src/a.py', 'docs/b c.md'], problems: [] });
        assert.equal(prompt, 'explain this\n\nFiles the user added as context (read them): `src/a.py`, `docs/b c.md`');
        assert.deepEqual(splitContext(prompt), { text: 'explain this', files: ['src/a.py', 'docs/b c.md'], problems: [], codebase: false });
        assert.equal(withContext('hi', { files: [], problems: [] }), 'hi');
    });

    it('carries problems, one line each, before the files', () => {
        const added = { files: ['a.py'], problems: ['a.py:3:5 error: x is not defined (pyflakes)'] };
        const prompt = withContext('fix it', added);
        assert.equal(
            prompt,
            'fix it\n\nProblems the user added as context:\n- a.py:3:5 error: x is not defined (pyflakes)\n\n' +
                'Files the user added as context (read them): `a.py`',
        );
        assert.deepEqual(splitContext(prompt), { text: 'fix it', ...added, codebase: false });
    });

    it('leaves a prompt alone that only mentions the words', () => {
        const prompt = 'Files the user added as context (read them): are listed where?';
        assert.deepEqual(splitContext(prompt), { text: prompt, files: [], problems: [], codebase: false });
    });

    it('puts #codebase first, once, and the server is asked to search', () => {
        const prompt = withContext('where do we retry?', { files: ['a.py'], problems: [], codebase: true });
        assert.ok(prompt.startsWith('#codebase where do we retry?\n\n'));
        assert.deepEqual(splitContext(prompt), { text: 'where do we retry?', files: ['a.py'], problems: [], codebase: true });
        assert.equal(withContext(prompt.split('\n')[0] as string, { files: [], problems: [], codebase: true }), '#codebase where do we retry?');
        assert.ok(asksCodebase(prompt));
        assert.ok(asksCodebase('where is #codebase retry'), 'typed in Ask…');
        assert.ok(!asksCodebase('see issue#codebase or #codebases'));
    });
});

describe('errorActions', () => {
    const known = ['lspAgent.model', 'lspAgent.baseUrl', 'lspAgent.server.command'];

    it('offers the model picker and the setting for a missing model, and Retry', () => {
        const actions = errorActions('no model configured: set lspAgent.model in the editor settings', known);
        assert.deepEqual(
            actions.map((action) => [action.id, action.label, action.setting]),
            [
                ['chooseModel', 'Choose Model', undefined],
                ['openSetting', 'Open Settings', 'lspAgent.model'],
                ['retry', 'Retry', undefined],
            ],
        );
    });

    it('leads to the endpoint setting when it cannot be reached, and to the key when refused', () => {
        const down = errorActions('cannot reach http://127.0.0.1:9/v1: connection refused', known);
        assert.deepEqual(down.map((action) => action.setting ?? action.id), ['lspAgent.baseUrl', 'retry']);
        const refused = errorActions('the endpoint refused the API key (HTTP 401)', known, false);
        assert.deepEqual(refused.map((action) => action.id), ['setApiKey']);
    });
});

describe('proposalDiff', () => {
    it('shows what an edit proposes before anything lands', () => {
        assert.equal(
            proposalDiff('edit_file', { path: 'a.py', old: 'a\nx = 1\nb\nc\nd\ne\n', new: 'a\nx = 2\nb\nc\nd\nE\n' }),
            '--- a/a.py\n+++ b/a.py\n@@\n a\n-x = 1\n+x = 2\n b\n@@\n d\n-e\n+E',
        );
        assert.equal(proposalDiff('write_file', { path: 'n.py', content: 'hi\n' }), '--- /dev/null\n+++ b/n.py\n@@\n+hi');
        assert.equal(proposalDiff('read_file', { path: 'a.py' }), undefined);
    });
});

describe('placeCode', () => {
    const file = 'import os\n\ndef add(a, b):\n    return a - b\n\n\ndef sub(a, b):\n    return a - b\n';

    it('replaces the selection', () => {
        const start = file.indexOf('a - b');
        assert.deepEqual(placeCode(file, 'a + b', { start, end: start + 5 }), { text: file.replace('a - b', 'a + b'), where: 'selection' });
    });

    it('rewrites the lines the block is a new version of, found by its first and last lines', () => {
        const code = 'def add(a, b):\n    """Add."""\n    return a - b\n';
        const placed = placeCode(file, code, { start: 0, end: 0 });
        assert.equal(placed.where, 'lines');
        assert.equal(placed.text, file.replace('def add(a, b):\n', 'def add(a, b):\n    """Add."""\n'));
    });

    it('rewrites the block its first line opens when its last line is new', () => {
        const code = 'def add(a, b):\n    return a + b\n';
        assert.deepEqual(placeCode(file, code, { start: 0, end: 0 }), { text: file.replace('return a - b\n\n\ndef sub', 'return a + b\n\n\ndef sub'), where: 'lines' });
        const braces = 'function f() {\n  return 1;\n}\n\nf();\n';
        assert.equal(placeCode(braces, 'function f() {\n  return 2;\n  // two\n}', { start: 0, end: 0 }).text, 'function f() {\n  return 2;\n  // two\n}\n\nf();\n');
    });

    it('goes at the cursor, on lines of its own, when it matches no lines', () => {
        const at = file.indexOf('\n\ndef add');
        const placed = placeCode(file, 'X = 1\n', { start: at, end: at });
        assert.equal(placed.where, 'cursor');
        assert.equal(placed.text, file.replace('import os\n', 'import os\nX = 1\n'));
    });
});

describe('token colours', () => {
    const rules = parseJsonc(`{
        // the theme's rules, with comments and a trailing comma
        "tokenColors": [
            { "scope": "keyword", "settings": { "foreground": "#569cd6" } },
            { "scope": ["keyword.control", "keyword.other.x"], "settings": { "foreground": "#c586c0" } },
            { "scope": "string, string.quoted", "settings": { "foreground": "#ce9178" } },
            { "scope": "meta.embedded entity.name", "settings": { "foreground": "#ff0000" } },
            { "scope": "comment", "settings": { "foreground": "#6a9955", "fontStyle": "italic" } },
        ],
    }`) as { tokenColors: Array<{ scope: string | string[]; settings: { foreground?: string; fontStyle?: string } }> };

    it('reads a theme file as VS Code does: comments and trailing commas go, strings stay whole', () => {
        assert.deepEqual(parseJsonc('{ "a": "http://x/*y*/", // note\n "b": [1, 2,], /* c */ }'), { a: 'http://x/*y*/', b: [1, 2] });
    });

    it('picks the most specific matching selector, as VS Code does', () => {
        assert.deepEqual(styleOf(rules.tokenColors, 'keyword.control.flow'), { foreground: '#c586c0' });
        assert.deepEqual(styleOf(rules.tokenColors, 'keyword.operator'), { foreground: '#569cd6' });
        assert.deepEqual(styleOf(rules.tokenColors, 'entity.name.function'), {});
    });

    it('gives each highlight.js class its scope\'s colour', () => {
        const { colors, styles } = classColors(rules.tokenColors);
        assert.equal(colors.keyword, '#569cd6');
        assert.equal(colors.string, '#ce9178');
        assert.equal(colors.comment, '#6a9955');
        assert.equal(styles.comment, 'italic');
        assert.equal(colors['title.function'], undefined);
    });
});

describe('markdown', () => {
    const md = createMarkdown();

    it('renders no raw HTML: the model text is escaped', () => {
        assert.equal(MARKDOWN_OPTIONS.html, false);
        const html = md.render('<script>alert(1)</script> <img src=x onerror=alert(1)>');
        assert.ok(!html.includes('<script'), html);
        assert.ok(!html.includes('<img'), html);
        assert.ok(html.includes('&lt;script&gt;'), html);
    });

    it('fetches no image: it is a link the user may follow', () => {
        const html = md.render('![logo](https://example.com/logo.png)');
        assert.ok(!html.includes('<img'), html);
        assert.ok(html.includes('<a href="https://example.com/logo.png"'), html);
    });

    it('refuses javascript: links', () => {
        const html = md.render('[click](javascript:alert(1))');
        assert.ok(!html.includes('href="javascript'), html);
    });

    it('highlights a fenced block and keeps its lines exactly, with Copy and Insert', () => {
        const code = 'def add(a, b):\n    return a + b\n';
        const html = md.render('```python\n' + code + '```\n');
        assert.match(html, /<span class="hljs-keyword">def<\/span>/);
        assert.match(html, /data-action="copy"/);
        assert.match(html, /data-action="insert"/);
        const text = /<code[^>]*>([\s\S]*)<\/code>/.exec(html)?.[1] ?? '';
        const plain = text.replace(/<[^>]+>/g, '').replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&quot;/g, '"').replace(/&amp;/g, '&');
        assert.equal(plain, code);
    });

    it('escapes a block in a language it does not know', () => {
        const html = md.render('```brainfudge\n<b>x</b>\n```\n');
        assert.ok(html.includes('&lt;b&gt;x&lt;/b&gt;'), html);
        assert.ok(html.includes('data-language="brainfudge"'), html);
    });
});

describe('settledLength', () => {
    it('ends after the last blank line', () => {
        const text = 'one\n\ntwo\n\nthr';
        assert.equal(text.slice(0, settledLength(text)), 'one\n\ntwo\n\n');
    });

    it('never ends inside a code block, whose blank lines are code', () => {
        const text = 'intro\n\n```python\na = 1\n\nb = 2\n';
        assert.equal(text.slice(0, settledLength(text)), 'intro\n\n');
        const closed = text + '```\n\nafter';
        assert.equal(closed.slice(0, settledLength(closed)), text + '```\n\n');
    });

    it('renders, in two parts, what the whole renders', () => {
        const md = createMarkdown();
        const text = 'Here:\n\n```js\nlet a = 1;\n\nlet b = 2;\n```\n\nDone **now**.\n';
        const cut = settledLength(text);
        assert.equal(md.render(text.slice(0, cut)) + md.render(text.slice(cut)), md.render(text));
    });

    it('is nothing while the first paragraph is written', () => {
        assert.equal(settledLength('no blank line yet\nstill'), 0);
        assert.equal(settledLength(''), 0);
    });
});

describe('PromptHistory', () => {
    it('goes back with ↑ on the first line and returns to the draft with ↓', () => {
        const history = new PromptHistory(['one', 'two']);
        assert.equal(history.move(-1, 'draft', 0), 'two');
        assert.equal(history.move(-1, 'two', 0), 'one');
        assert.equal(history.move(-1, 'one', 0), undefined);
        assert.equal(history.move(1, 'one', 3), 'two');
        assert.equal(history.move(1, 'two', 3), 'draft');
        assert.equal(history.move(1, 'draft', 5), undefined);
    });

    it('moves the caret as usual inside a multi-line input', () => {
        const history = new PromptHistory(['one']);
        assert.equal(history.move(-1, 'a\nb', 3), undefined);
        assert.equal(history.move(1, 'a\nb', 0), undefined);
        assert.equal(history.move(-1, 'a\nb', 1), 'one');
    });

    it('remembers what was sent, once in a row', () => {
        const history = new PromptHistory();
        history.add('x');
        history.add('x');
        history.add('  ');
        assert.deepEqual(history.all, ['x']);
    });
});
