import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
    addUsage,
    contextUse,
    describeArguments,
    displayUri,
    emptyUsage,
    formatDuration,
    formatTokens,
    friendlyTime,
    OneAtATime,
    statusBarText,
    stepOf,
    toolLabel,
    TurnWriter,
    usageText,
} from '../src/events';
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

    it('says an edit landed otherwise than proposed as the chat does, and counts it', () => {
        const writer = new TurnWriter('/work');
        let out = writer.begin('tune it');
        out += run(writer, [{ kind: 'edit', uri: 'file:///work/limits.py', applied: true, outcome: '1 of 2 hunks applied' }]);
        out += writer.finish(result({ edits: { proposed: 1, applied: 1, rejected: 0 } }));
        assert.match(out, /\n {2}edit limits\.py: 1 of 2 hunks applied\n/);
        assert.match(out, /_edits: 1 proposed, 1 applied \(1 not as proposed\), 0 rejected_/);
        assert.equal(stepOf({ ...base, kind: 'edit', uri: 'file:///work/limits.py', applied: true, outcome: '1 of 2 hunks applied' }, '/work'), '1 of 2 hunks applied: limits.py');
    });

    it('writes a streamed code block exactly as the model wrote it, whatever the chunks', () => {
        const answer = 'Here:\n\n```python\ndef add(a, b):\n    return a + b\n```\n\nDone.';
        // Chunks that end in a line break, chunks that split a line, one chunk per character.
        const cuts = [
            answer.split(/(?<=\n)/),
            [answer.slice(0, 7), answer.slice(7, 20), answer.slice(20)],
            [...answer],
        ];
        for (const chunks of cuts) {
            const writer = new TurnWriter();
            const out = writer.begin('write add') + run(writer, chunks.map((text) => ({ kind: 'text', text })));
            assert.equal(out, '\n## write add\n\n' + answer);
        }
    });

    it('starts a paragraph after a tool line, and a tool line after text that ended mid-line', () => {
        const writer = new TurnWriter();
        writer.begin('go');
        const out = run(writer, [
            { kind: 'text', text: 'Line one.\n' },
            { kind: 'tool', name: 'search', args: { pattern: 'x' } },
            { kind: 'text', text: 'More.\n' },
            { kind: 'text', text: 'And more' },
            { kind: 'toolResult', name: 'search', ok: true, summary: '3 matches' },
        ]);
        assert.equal(out, '\nLine one.\n\n- `search` x\n\nMore.\nAnd more\n  ✓ 3 matches\n');
    });

    it('says when a turn continues an earlier session, and nothing when it does not', () => {
        const writer = new TurnWriter();
        writer.begin('again');
        const message = 'continuing session 2f1c, 7 turns — New Session for a fresh one';
        assert.equal(run(writer, [{ kind: 'start', continuing: false, turns: 0, message: 'new session' }]), '');
        assert.equal(run(writer, [{ kind: 'start', continuing: true, turns: 7, message }]), `_${message}_\n`);
    });

    it('follows a question\'s life and sums the usage of the turn\'s calls', () => {
        const writer = new TurnWriter();
        writer.begin('run it');
        const question = { kind: 'question', id: 1, name: 'bash', text: 'run make?', timeoutSeconds: 120 };
        assert.equal(
            run(writer, [{ ...question, state: 'open' }]),
            '  question for `bash`: waiting for your answer (no answer in 2 min counts as Deny)\n',
        );
        assert.equal(run(writer, [{ ...question, state: 'answered', answer: 'Allow' }]), '');
        assert.match(run(writer, [{ ...question, state: 'timedOut' }]), /nobody answered in time, so it counts as Deny/);
        run(writer, [
            { kind: 'usage', inputTokens: 1200, cachedTokens: 800, outputTokens: 50, contextTokens: 1250, contextWindow: 10000 },
            { kind: 'usage', inputTokens: 1300, cachedTokens: 1200, outputTokens: 70, contextTokens: 1370, contextWindow: 10000, cost: 0.002 },
        ]);
        assert.equal(
            writer.finish(result({ answer: '' })),
            '\n_completed_\n_tokens: 2.5k in (2k cached) · 120 out · context 14% of 10k · $0.0020_\n',
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

describe('toolLabel', () => {
    it('shows a tool of an MCP server as server · tool, others as they are', () => {
        assert.equal(toolLabel('mcp__github__get_issue'), 'github · get_issue');
        assert.equal(toolLabel('mcp__my-docs__search__deep'), 'my-docs · search__deep');
        assert.equal(toolLabel('read_file'), 'read_file');
        assert.equal(stepOf({ ...base, kind: 'tool', name: 'mcp__git__status', args: { path: '.' } }), 'git · status .');
    });
});

describe('stepOf and displayUri', () => {
    it('describes steps for the progress notification', () => {
        assert.equal(stepOf({ ...base, kind: 'tool', name: 'search', args: { pattern: 'TODO' } }), 'search TODO');
        assert.equal(stepOf({ ...base, kind: 'text', text: 'x' }), 'writing the answer…');
        assert.equal(stepOf({ ...base, kind: 'edit', uri: 'file:///w/a%20b.py', applied: true }, '/w'), 'applied: a b.py');
        assert.equal(displayUri('file:///elsewhere/x.py', '/w'), '/elsewhere/x.py');
    });

    it('says a turn continues the session without its id', () => {
        const message = 'continuing session 20261207-111447-6c3f37 (1 earlier turn); start a new session for a fresh one';
        assert.equal(stepOf({ ...base, kind: 'start', continuing: true, turns: 1, message }), 'continuing the session (1 earlier turn)');
        assert.equal(stepOf({ ...base, kind: 'start', continuing: true, turns: 3, message }), 'continuing the session (3 earlier turns)');
        assert.equal(stepOf({ ...base, kind: 'start', continuing: false, turns: 0, message: '' }), undefined);
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
        assert.equal(statusBarText('qwen', true, undefined, true), '$(question) qwen · waiting for your answer');
    });
});

describe('figures', () => {
    it('writes token counts and durations short', () => {
        assert.deepEqual([950, 1000, 1250, 12_345, 999_999, 1_250_000].map(formatTokens), ['950', '1k', '1.3k', '12k', '1M', '1.3M']);
        assert.deepEqual([45, 60, 90, 120].map(formatDuration), ['45 s', '1 min', '1 min 30 s', '2 min']);
    });

    it('ignores missing figures in usage events', () => {
        const usage = addUsage(emptyUsage(), { session: 's', turn: 1, kind: 'usage', outputTokens: 5 });
        assert.equal(usageText(usage), '0 in · 5 out');
    });
});

describe('OneAtATime', () => {
    it('never cuts the turn being written: a second turn and a note wait for its end', () => {
        let out = '';
        const stream = new OneAtATime<string>((text) => {
            out += text;
        });
        stream.begin('first', '## one\n');
        stream.append('first', 'The answer is forty');
        stream.begin('second', '## two\n');
        stream.append('second', 'Busy.\n');
        stream.note('_status_\n');
        stream.append('first', '-two.\n');
        assert.equal(out, '## one\nThe answer is forty-two.\n');
        assert.equal(stream.busy, true);
        stream.end('first');
        // The second turn is still running: it is written from now on as it streams.
        assert.equal(out, '## one\nThe answer is forty-two.\n## two\nBusy.\n');
        stream.append('second', 'Done.\n');
        stream.end('second');
        assert.equal(out, '## one\nThe answer is forty-two.\n## two\nBusy.\nDone.\n_status_\n');
        assert.equal(stream.busy, false);
    });

    it('writes a turn that ended while held back whole, then moves on', () => {
        let out = '';
        const stream = new OneAtATime<number>((text) => {
            out += text;
        });
        stream.begin(1, 'a');
        stream.begin(2, 'b');
        stream.begin(3, 'c');
        stream.append(2, 'B');
        assert.equal(stream.end(2), 'bB');
        assert.equal(stream.end(1), undefined);
        assert.equal(out, 'abBc');
        stream.append(3, 'C');
        assert.equal(out, 'abBcC');
        stream.note('!');
        stream.end(3);
        assert.equal(out, 'abBcC!');
    });
});

describe('friendlyTime', () => {
    const now = new Date(2025, 5, 11, 15, 30); // a Wednesday afternoon, local time
    const at = (...parts: [number, number, number, number, number]): string => new Date(...parts).toISOString();

    it('says a moment as people say it, without ISO digits', () => {
        assert.equal(friendlyTime(at(2025, 5, 11, 9, 5), now), 'today 09:05');
        assert.equal(friendlyTime(at(2025, 5, 10, 23, 59), now), 'yesterday 23:59');
        assert.equal(friendlyTime(at(2025, 5, 6, 8, 0), now), 'Fri 08:00');
        assert.equal(friendlyTime(at(2025, 2, 12, 8, 0), now), '12 Mar');
        assert.equal(friendlyTime(at(2024, 2, 12, 8, 0), now), '12 Mar 2024');
        assert.equal(friendlyTime('soon', now), 'soon');
    });
});
