/**
 * Pure helpers that turn what the server reports into text: the Markdown written to the output
 * channel for each `lspAgent/event`, the one-line step shown in the progress notification, and
 * the status bar text.
 */
import type { AgentEvent, AskResult, Status } from './protocol';

/** Tool arguments worth showing, in this order, before falling back to the whole object. */
const SHOWN_ARGUMENTS = ['path', 'pattern', 'command', 'name', 'glob'];

const MAX_ARGUMENTS = 80;

function shorten(text: string, limit: number): string {
    const flat = text.replace(/\s*\n\s*/g, ' ');
    return flat.length > limit ? flat.slice(0, limit - 1) + '…' : flat;
}

/** A tool call's arguments in one short line. */
export function describeArguments(args: unknown): string {
    if (args === undefined || args === null) {
        return '';
    }
    if (typeof args !== 'object' || Array.isArray(args)) {
        return shorten(typeof args === 'string' ? args : JSON.stringify(args), MAX_ARGUMENTS);
    }
    const record = args as Record<string, unknown>;
    if (typeof record.patch === 'string') {
        const files = [...record.patch.matchAll(/^\+\+\+ (?:b\/)?(.+?)\s*$/gm)].map((match) => match[1]);
        const shown = files.filter((file) => file !== '/dev/null');
        if (shown.length > 0) {
            return shorten(shown.join(', '), MAX_ARGUMENTS);
        }
    }
    for (const key of SHOWN_ARGUMENTS) {
        const value = record[key];
        if (typeof value === 'string') {
            return shorten(value, MAX_ARGUMENTS);
        }
    }
    return shorten(JSON.stringify(record), MAX_ARGUMENTS);
}

/** A file URI as a short name: relative to `root` when inside it, else the path. */
export function displayUri(uri: string, root?: string): string {
    let shown = uri;
    if (shown.startsWith('file://')) {
        try {
            shown = decodeURIComponent(new URL(shown).pathname);
        } catch {
            // keep the URI as it is
        }
    }
    if (root) {
        const prefix = root.endsWith('/') ? root : root + '/';
        if (shown.startsWith(prefix)) {
            return shown.slice(prefix.length);
        }
    }
    return shown;
}

/**
 * Writes a turn as Markdown, one piece at a time. Streamed text is appended where the previous
 * chunk stopped; everything else starts on a line of its own.
 */
export class TurnWriter {
    /** True when the output ends inside streamed text (no line break written after it). */
    private inText = false;
    /** True when streamed text was written since `begin`. */
    private sawText = false;
    /** True once the `status` event was written. */
    private sawStatus = false;

    constructor(private readonly root?: string) {}

    /** The heading of a new question, with what the user pointed at. */
    begin(prompt: string, where?: string): string {
        this.inText = false;
        this.sawText = false;
        this.sawStatus = false;
        const lines = prompt.split(/\r?\n/).map((line, i) => (i === 0 ? '## ' : '   ') + line);
        if (where) {
            lines.push(`_(${where})_`);
        }
        return '\n' + lines.join('\n') + '\n';
    }

    /** What to append for one event ('' for events that show nothing). */
    event(event: AgentEvent): string {
        switch (event.kind) {
            case 'text': {
                const start = this.inText ? '' : '\n';
                this.inText = event.text.length > 0 ? !event.text.endsWith('\n') : this.inText;
                this.sawText ||= event.text.length > 0;
                return event.text.length > 0 ? start + event.text : '';
            }
            case 'tool':
                return this.line(`- \`${event.name}\` ${describeArguments(event.args)}`.trimEnd(), true);
            case 'toolResult':
                return this.line(`  ${event.ok ? '✓' : '✗'} ${shorten(event.summary ?? '', 200)}`.trimEnd());
            case 'edit':
                return this.line(
                    `  edit ${displayUri(event.uri, this.root)}: ${event.applied ? 'applied' : 'not applied'}`,
                );
            case 'permission':
                return this.line(`  permission for \`${event.name}\`: ${event.decision}`);
            case 'compaction':
                return this.line(
                    `_context compacted (${event.strategy}): ${event.before} → ${event.after} tokens_`,
                    true,
                );
            case 'status':
                this.sawStatus = true;
                return this.line(
                    event.error ? `**${event.status}**: ${event.error}` : `_${event.status}_`,
                    true,
                );
            default:
                return '';
        }
    }

    /** What to append when the `lspAgent.ask` answer arrives. */
    finish(result: AskResult): string {
        let out = '';
        if (!this.sawText && result.answer) {
            out += '\n' + result.answer + (result.answer.endsWith('\n') ? '' : '\n');
            this.inText = false;
        }
        if (!this.sawStatus) {
            out += this.line(result.error ? `**${result.status}**: ${result.error}` : `_${result.status}_`, true);
        }
        const edits = result.edits;
        if (edits && edits.proposed > 0) {
            out += this.line(
                `_edits: ${edits.proposed} proposed, ${edits.applied} applied, ${edits.rejected} rejected_`,
            );
        }
        return out;
    }

    /** What to append when the `lspAgent.ask` request failed. */
    fail(message: string): string {
        return this.line(`**error**: ${message}`, true);
    }

    private line(text: string, paragraph = false): string {
        const start = this.inText ? (paragraph ? '\n\n' : '\n') : paragraph ? '\n' : '';
        this.inText = false;
        return start + text + '\n';
    }
}

/** The current step of a turn, for the progress notification (undefined: keep the last one). */
export function stepOf(event: AgentEvent, root?: string): string | undefined {
    switch (event.kind) {
        case 'text':
            return 'writing the answer…';
        case 'tool':
            return shorten(`${event.name} ${describeArguments(event.args)}`.trim(), 100);
        case 'toolResult':
            return shorten(`${event.ok ? '✓' : '✗'} ${event.summary ?? event.name}`, 100);
        case 'edit':
            return `${event.applied ? 'applied' : 'not applied'}: ${displayUri(event.uri, root)}`;
        case 'permission':
            return `${event.name}: ${event.decision}`;
        case 'compaction':
            return `context compacted: ${event.before} → ${event.after} tokens`;
        case 'status':
            return event.status;
        default:
            return undefined;
    }
}

/** Share of the context window in use by `session` (or the busiest session), 0..1, or undefined. */
export function contextUse(status: Status, session?: string): number | undefined {
    if (!status.contextWindow || status.contextWindow <= 0) {
        return undefined;
    }
    const sessions = status.sessions ?? [];
    const chosen = session ? sessions.find((s) => s.session === session) : undefined;
    const tokens = chosen?.contextTokens ?? (session ? undefined : Math.max(0, ...sessions.map((s) => s.contextTokens ?? 0)));
    if (tokens === undefined || (!chosen && tokens === 0)) {
        return undefined;
    }
    return tokens / status.contextWindow;
}

/** The status bar text: `$(hubot) model · idle|running[ · NN% context]`. */
export function statusBarText(model: string | null | undefined, running: boolean, use?: number): string {
    const parts = [`${running ? '$(sync~spin)' : '$(hubot)'} ${model || 'no model'}`, running ? 'running' : 'idle'];
    if (use !== undefined) {
        parts.push(`${Math.round(use * 100)}% context`);
    }
    return parts.join(' · ');
}
