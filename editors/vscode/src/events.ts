/**
 * Pure helpers that turn what the server reports into text: the Markdown written to the output
 * channel for each `lspAgent/event`, the one-line step shown in the progress notification, the
 * token use of a turn, and the status bar text.
 */
import type { AgentEvent, AskResult, Status, UsageEvent } from './protocol';

/** Tool arguments worth showing, in this order, before falling back to the whole object. */
const SHOWN_ARGUMENTS = ['path', 'pattern', 'command', 'name', 'glob'];

const MAX_ARGUMENTS = 80;

function shorten(text: string, limit: number): string {
    const flat = text.replace(/\s*\n\s*/g, ' ');
    return flat.length > limit ? flat.slice(0, limit - 1) + '…' : flat;
}

/** A tool's name as the user reads it: an MCP server's tool (`mcp__<server>__<tool>`) as
 * `server · tool`, every other name as it is. */
export function toolLabel(name: string): string {
    const match = /^mcp__(.+?)__(.+)$/.exec(name);
    return match ? `${match[1]} · ${match[2]}` : name;
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

/** What the model calls of one turn used, summed; `contextTokens`/`contextWindow` from the last. */
export interface Usage {
    calls: number;
    inputTokens: number;
    cachedTokens: number;
    outputTokens: number;
    contextTokens?: number;
    contextWindow?: number;
    /** Summed cost, when the server knows prices; undefined when no call reported one. */
    cost?: number;
}

export function emptyUsage(): Usage {
    return { calls: 0, inputTokens: 0, cachedTokens: 0, outputTokens: 0 };
}

/** `usage` with one more `usage` event added. */
export function addUsage(usage: Usage, event: UsageEvent): Usage {
    const count = (value: unknown): number => (typeof value === 'number' && Number.isFinite(value) ? value : 0);
    const sum: Usage = {
        calls: usage.calls + 1,
        inputTokens: usage.inputTokens + count(event.inputTokens),
        cachedTokens: usage.cachedTokens + count(event.cachedTokens),
        outputTokens: usage.outputTokens + count(event.outputTokens),
        contextTokens: typeof event.contextTokens === 'number' ? event.contextTokens : usage.contextTokens,
        contextWindow: typeof event.contextWindow === 'number' ? event.contextWindow : usage.contextWindow,
    };
    const cost = typeof event.cost === 'number' ? (usage.cost ?? 0) + event.cost : usage.cost;
    if (cost !== undefined) {
        sum.cost = cost;
    }
    return sum;
}

/** A token count in a few characters: 950, 12.3k, 1.2M. */
export function formatTokens(tokens: number): string {
    if (tokens < 1000) {
        return String(Math.round(tokens));
    }
    if (tokens < 999_500) {
        return `${trimZero((tokens / 1000).toFixed(tokens < 10_000 ? 1 : 0))}k`;
    }
    return `${trimZero((tokens / 1_000_000).toFixed(1))}M`;
}

function trimZero(figure: string): string {
    return figure.endsWith('.0') ? figure.slice(0, -2) : figure;
}

/** A turn's use in one line: `12.3k in (9k cached) · 456 out · context 14% of 128k · $0.0123`. */
export function usageText(usage: Usage): string {
    const parts = [
        `${formatTokens(usage.inputTokens)} in${usage.cachedTokens > 0 ? ` (${formatTokens(usage.cachedTokens)} cached)` : ''}`,
        `${formatTokens(usage.outputTokens)} out`,
    ];
    if (usage.contextTokens !== undefined && usage.contextWindow) {
        const share = Math.round((usage.contextTokens / usage.contextWindow) * 100);
        parts.push(`context ${share}% of ${formatTokens(usage.contextWindow)}`);
    }
    if (usage.cost !== undefined) {
        parts.push(`$${usage.cost < 0.01 ? usage.cost.toFixed(4) : usage.cost.toFixed(2)}`);
    }
    return parts.join(' · ');
}

/**
 * Writes a turn as Markdown, one piece at a time. Streamed text is written exactly as the model
 * wrote it, each chunk where the previous one stopped; everything else starts on a line of its
 * own, and a paragraph of the model's text after a tool line starts after a blank line.
 */
export class TurnWriter {
    /** True when the output ends inside a line (the last thing written had no final line break). */
    private midLine = false;
    /** True when the last thing written was streamed text (the next chunk continues it). */
    private inText = false;
    /** True when streamed text was written since `begin`. */
    private sawText = false;
    /** True once the `status` event was written. */
    private sawStatus = false;
    /** Files of applied edits that landed otherwise than proposed (the user untick a hunk…). */
    private partly = 0;
    /** What the turn's model calls used so far. */
    usage: Usage = emptyUsage();

    constructor(private readonly root?: string) {}

    /** The heading of a new question, with what the user pointed at. */
    begin(prompt: string, where?: string): string {
        this.midLine = false;
        this.inText = false;
        this.sawText = false;
        this.sawStatus = false;
        this.partly = 0;
        this.usage = emptyUsage();
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
                if (event.text.length === 0) {
                    return '';
                }
                // Only a chunk after something else gets a break: the model's own line breaks are
                // its text, and a chunk that ends in one must not add another.
                const start = this.inText ? '' : '\n';
                this.inText = true;
                this.sawText = true;
                this.midLine = !event.text.endsWith('\n');
                return start + event.text;
            }
            case 'start':
                return event.continuing && event.message ? this.line(`_${event.message}_`) : '';
            case 'tool':
                return this.line(`- \`${toolLabel(event.name)}\` ${describeArguments(event.args)}`.trimEnd(), true);
            case 'toolResult':
                return this.line(`  ${event.ok ? '✓' : '✗'} ${shorten(event.summary ?? '', 200)}`.trimEnd());
            case 'edit':
                if (event.applied && event.outcome) {
                    this.partly++;
                }
                return this.line(`  edit ${displayUri(event.uri, this.root)}: ${editWords(event)}`);
            case 'permission':
                return this.line(`  permission for \`${event.name}\`: ${event.decision}`);
            case 'question':
                return this.questionLine(event.state, event.name, event.timeoutSeconds);
            case 'usage':
                this.usage = addUsage(this.usage, event);
                return '';
            case 'compaction':
                if (event.phase !== undefined) {
                    return ''; // a compaction starting: its figures come when it is done
                }
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
            this.midLine = false;
            this.inText = false;
        }
        if (!this.sawStatus) {
            out += this.line(result.error ? `**${result.status}**: ${result.error}` : `_${result.status}_`, true);
        }
        const edits = result.edits;
        if (edits && edits.proposed > 0) {
            const partly = this.partly > 0 ? ` (${this.partly} not as proposed)` : '';
            out += this.line(
                `_edits: ${edits.proposed} proposed, ${edits.applied} applied${partly}, ${edits.rejected} rejected_`,
            );
        }
        if (this.usage.calls > 0) {
            out += this.line(`_tokens: ${usageText(this.usage)}_`);
        }
        return out;
    }

    /** What to append when the `lspAgent.ask` request failed. */
    fail(message: string): string {
        return this.line(`**error**: ${message}`, true);
    }

    private questionLine(state: string, name: string, timeoutSeconds?: number): string {
        switch (state) {
            case 'open': {
                const limit = timeoutSeconds ? ` (no answer in ${formatDuration(timeoutSeconds)} counts as Deny)` : '';
                return this.line(`  question for \`${name}\`: waiting for your answer${limit}`);
            }
            case 'timedOut':
                return this.line(`  question for \`${name}\`: nobody answered in time, so it counts as Deny`);
            case 'withdrawn':
                return this.line(`  question for \`${name}\`: withdrawn (the turn ended)`);
            default:
                return '';
        }
    }

    private line(text: string, paragraph = false): string {
        const start = this.midLine ? (paragraph ? '\n\n' : '\n') : paragraph ? '\n' : '';
        this.midLine = false;
        this.inText = false;
        return start + text + '\n';
    }
}

/** What became of one file of an edit: `applied`, `not applied`, or how it landed otherwise. */
export function editWords(event: { applied: boolean; outcome?: string }): string {
    if (!event.applied) {
        return 'not applied';
    }
    return event.outcome ?? 'applied';
}

/**
 * A moment as people say it, in local time: `today 14:03`, `yesterday 09:12`, `Mon 10:00` within
 * the week, `12 Mar` this year, `12 Mar 2024` before. An unreadable time is given as it came.
 */
export function friendlyTime(iso: string, now: Date): string {
    const when = new Date(iso);
    if (Number.isNaN(when.getTime())) {
        return iso;
    }
    const pad = (n: number): string => String(n).padStart(2, '0');
    const clock = `${pad(when.getHours())}:${pad(when.getMinutes())}`;
    const midnight = new Date(now.getFullYear(), now.getMonth(), now.getDate()).getTime();
    const day = 24 * 60 * 60 * 1000;
    const months = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
    if (when.getTime() >= midnight) {
        return `today ${clock}`;
    }
    if (when.getTime() >= midnight - day) {
        return `yesterday ${clock}`;
    }
    if (when.getTime() >= midnight - 6 * day) {
        return `${['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'][when.getDay()]} ${clock}`;
    }
    const date = `${when.getDate()} ${months[when.getMonth()]}`;
    return when.getFullYear() === now.getFullYear() ? date : `${date} ${when.getFullYear()}`;
}

/** Seconds as the user says them: 45 s, 2 min, 1 min 30 s. */
export function formatDuration(seconds: number): string {
    const whole = Math.max(0, Math.round(seconds));
    if (whole < 60) {
        return `${whole} s`;
    }
    const minutes = Math.floor(whole / 60);
    const rest = whole % 60;
    return rest ? `${minutes} min ${rest} s` : `${minutes} min`;
}

/**
 * One stream of text (the output channel) shared by turns that may run at the same time: one
 * turn writes at a time. Another turn's text, and notes, are held back and written whole once the
 * turn being written has ended, so no turn's text is ever cut in the middle.
 */
export class OneAtATime<Turn> {
    /** The turn being written now. */
    private owner: Turn | undefined;
    /** What waits, in order: turns (ended or not) and notes. */
    private readonly held: Array<{ turn?: Turn; parts: string[]; ended: boolean }> = [];

    constructor(private readonly write: (text: string) => void) {}

    /** True while a turn is being written. */
    get busy(): boolean {
        return this.owner !== undefined;
    }

    /** A turn starts with `text` (its heading). */
    begin(turn: Turn, text: string): void {
        if (this.owner === undefined) {
            this.owner = turn;
            this.write(text);
        } else {
            this.held.push({ turn, parts: [text], ended: false });
        }
    }

    append(turn: Turn, text: string): void {
        if (!text) {
            return;
        }
        if (turn === this.owner) {
            this.write(text);
        } else {
            this.held.find((entry) => entry.turn === turn)?.parts.push(text);
        }
    }

    /**
     * The turn has ended: what waited behind it is written, up to the next turn still running.
     * Returns the turn's text when it is still held back behind another (else undefined).
     */
    end(turn: Turn): string | undefined {
        const entry = this.held.find((e) => e.turn === turn);
        if (entry) {
            entry.ended = true;
            return entry.parts.join('');
        }
        if (turn === this.owner) {
            this.owner = undefined;
            this.flush();
        }
        return undefined;
    }

    /** Text of no turn: now when no turn is being written, else after it. */
    note(text: string): void {
        if (this.owner === undefined) {
            this.write(text);
        } else {
            this.held.push({ parts: [text], ended: true });
        }
    }

    private flush(): void {
        let next = this.held.shift();
        while (next) {
            this.write(next.parts.join(''));
            if (!next.ended && next.turn !== undefined) {
                this.owner = next.turn;
                return;
            }
            next = this.held.shift();
        }
    }
}

/** The current step of a turn, for the progress notification (undefined: keep the last one). */
export function stepOf(event: AgentEvent, root?: string): string | undefined {
    switch (event.kind) {
        case 'text':
            return 'writing the answer…';
        case 'tool':
            return shorten(`${toolLabel(event.name)} ${describeArguments(event.args)}`.trim(), 100);
        case 'toolResult':
            return shorten(`${event.ok ? '✓' : '✗'} ${event.summary ?? event.name}`, 100);
        case 'edit':
            return `${editWords(event)}: ${displayUri(event.uri, root)}`;
        case 'permission':
            return `${event.name}: ${event.decision}`;
        case 'compaction':
            return event.phase !== undefined
                ? 'compacting the context…'
                : `context compacted: ${event.before} → ${event.after} tokens`;
        case 'status':
            return event.status;
        case 'start':
            // Not the server's message: it names the session by its id, which no one reads.
            return event.continuing ? `continuing the session (${event.turns ?? 0} earlier turn${event.turns === 1 ? '' : 's'})` : undefined;
        case 'question':
            return event.state === 'open' ? `waiting for your answer: ${event.name}` : undefined;
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

/** The status bar text: `$(hubot) model · idle|running|waiting for your answer[ · NN% context]`. */
export function statusBarText(model: string | null | undefined, running: boolean, use?: number, waiting = false): string {
    const icon = waiting ? '$(question)' : running ? '$(sync~spin)' : '$(hubot)';
    const state = waiting ? 'waiting for your answer' : running ? 'running' : 'idle';
    const parts = [`${icon} ${model || 'no model'}`, state];
    if (use !== undefined) {
        parts.push(`${Math.round(use * 100)}% context`);
    }
    return parts.join(' · ');
}
