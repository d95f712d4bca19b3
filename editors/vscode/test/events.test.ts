import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { contextUse, describeArguments, displayUri, statusBarText, stepOf, TurnWriter } from '../src/events';
import type { AgentEvent, AskResult, Status } from '../src/protocol';

const base = { session: 's1', turn: 1 };

function run(writer: TurnWriter, events: Array<Record<string, unknown>>): string {
    return events.map((e) => writer.event({ ...base, ...e } as AgentEvent)).join('');
}

const result = (overrides: Partial<AskResult> = {}): AskResult => ({
    session: 's1',
    status: 'completed',
    answer: 'Done.',
    edits: { proposed: 0, applied: 0, rejected: 0 },
    ...overrides,
});

describe('TurnWriter', () => {
    it('streams text where the last chunk stopped and puts tool calls on lines of their own', () => {
        const writer = new TurnWriter('/work');
        let out = writer.begin('fix the bug\nplease');
        out += run(writer, [
            { kind: 'text', text: 'Let me ' },
            { kind: 'text', text: 'look.' },
            { kind: 'tool', name: 'read_file', args: { path: 'src/app.py', start: 1 } },
            { kind: 'toolResult', name: 'read_file', ok: true, summary: '40 lines' },
            { kind: 'edit', uri: 'file:///work/src/app.py', applied: false },
            { kind: 'permission', name: 'bash', decision: 'deny' },
            { kind: 'compaction', strategy: 'drop', before: 900, after: 300 },
            { kind: 'text', text: 'Fixed it.' },
            { kind: 'status', status: 'completed' },
        ]);
        out += writer.finish(result({ edits: { proposed: 2, applied: 1, rejected: 1 } }));
        assert.equal(
            out,
            [
                '',
                '## fix the bug',
                '   please',
                '',
                'Let me look.',
                '',
                '- `read_file` src/app.py',
                '  ✓ 40 lines',
                '  edit src/app.py: not applied',
                '  permission for `bash`: deny',
                '',
                '_context compacted (drop): 900 → 300 tokens_',
                '',
                'Fixed it.',
                '',
                '_completed_',
                '_edits: 2 proposed, 1 applied, 1 rejected_',
                '',
            ].join('\n'),
        );
    });

    it('writes the final answer when nothing was streamed, and the status when no event said it', () => {
        const writer = new TurnWriter();
        writer.begin('hi');
        assert.equal(writer.finish(result({ answer: 'Hello!' })), '\nHello!\n\n_completed_\n');
    });

    it('shows a failure with its error', () => {
        const writer = new TurnWriter();
        writer.begin('hi');
        assert.equal(run(writer, [{ kind: 'status', status: 'failed', error: 'no model' }]), '\n**failed**: no model\n');
        assert.equal(writer.finish(result({ status: 'failed', answer: '', error: 'no model' })), '');
        assert.equal(writer.fail('boom'), '\n**error**: boom\n');
    });

    it('marks a failed tool and shows the where of a selection', () => {
        const writer = new TurnWriter();
        assert.equal(writer.begin('explain', 'a.py, lines 2-4'), '\n## explain\n_(a.py, lines 2-4)_\n');
        assert.equal(run(writer, [{ kind: 'toolResult', name: 'bash', ok: false, summary: 'exit 1' }]), '  ✗ exit 1\n');
    });
});

describe('describeArguments', () => {
    it('prefers the meaningful argument and keeps it short', () => {
        assert.equal(describeArguments({ command: 'ls -la\n| wc' }), 'ls -la | wc');
        assert.equal(describeArguments({ items: [1, 2] }), '{"items":[1,2]}');
        assert.equal(describeArguments({ path: 'x'.repeat(200) }).length, 80);
        assert.equal(describeArguments(undefined), '');
        const patch = '--- a/one.txt\n+++ b/one.txt\n@@ -1 +1 @@\n-one\n+ONE\n--- /dev/null\n+++ b/new dir/two.txt\n';
        assert.equal(describeArguments({ patch }), 'one.txt, new dir/two.txt');
    });
});

describe('stepOf and displayUri', () => {
    it('describes steps for the progress notification', () => {
        assert.equal(stepOf({ ...base, kind: 'tool', name: 'search', args: { pattern: 'TODO' } }), 'search TODO');
        assert.equal(stepOf({ ...base, kind: 'text', text: 'x' }), 'writing the answer…');
        assert.equal(stepOf({ ...base, kind: 'edit', uri: 'file:///w/a%20b.py', applied: true }, '/w'), 'applied: a b.py');
        assert.equal(displayUri('file:///elsewhere/x.py', '/w'), '/elsewhere/x.py');
    });
});

describe('status bar', () => {
    const status: Status = {
        model: 'qwen',
        baseUrl: 'http://localhost:11434/v1',
        provider: 'openai',
        sandbox: 'bwrap',
        contextWindow: 1000,
        sessions: [
            { session: 'a', running: false, contextTokens: 250 },
            { session: 'b', running: true, contextTokens: 500 },
        ],
    };

    it('computes the context use of a session or of the fullest one', () => {
        assert.equal(contextUse(status, 'a'), 0.25);
        assert.equal(contextUse(status), 0.5);
        assert.equal(contextUse(status, 'missing'), undefined);
        assert.equal(contextUse({ ...status, sessions: [] }), undefined);
    });

    it('shows model, state and context use', () => {
        assert.equal(statusBarText('qwen', false, 0.254), '$(hubot) qwen · idle · 25% context');
        assert.equal(statusBarText(null, true), '$(sync~spin) no model · running');
    });
});
