/**
 * The commands that talk to the agent: Ask (with or without the selection), Cancel, sessions,
 * transcript and status. Each is one `workspace/executeCommand` of the server.
 *
 * A turn is shown by views (`TurnView`): the output channel and the chat view. Every turn is
 * shown, wherever it was asked: the palette, the chat, a code action of the light bulb (its
 * command comes through here, `fromCommand`), and a turn this extension did not ask for at all
 * (another client of the server): its events make it a turn of its own, ended by its `status`.
 *
 * A prompt asked where it cannot run now (its session is busy, or the server is not running)
 * waits in a queue, in sight in the chat and removable, and is sent when it can run.
 */
import * as vscode from 'vscode';
import { CancellationTokenSource, ExecuteCommandRequest, LanguageClient } from 'vscode-languageclient/node';
import { traceError } from './common/log';
import { asksCodebase } from './codebase';
import { Server } from './common/server';
import { notify } from './notify';
import { friendlyTime } from './events';
import { TurnProgress } from './progress';
import {
    AgentEvent,
    ASK,
    AskArguments,
    AskResult,
    CANCEL,
    NEW_SESSION,
    SESSIONS,
    SessionInfo,
    Range,
    START,
    STATUS,
    Status,
} from './protocol';
import { Questions } from './questions';
import { Review } from './review';
import type { SelectionRef } from './chat/model';

/** One Ask, from the prompt to its result. */
export interface Turn {
    prompt: string;
    /** What the user pointed at (`file, lines A-B`), for Ask About Selection. */
    where?: string;
    /** The session the Ask was sent to (undefined: the server's most recent one). */
    readonly target?: string;
    /** The session it runs in, once the server said (first event, or the result). */
    session?: string;
    /** What the user pointed at, as a file and lines. */
    selection?: SelectionRef;
    /** Asked from the chat view (which shows it): no notification, no output channel brought up. */
    fromChat?: boolean;
    /** `ask`: an answer without changes. */
    mode?: 'ask';
    /** Not asked by this extension (another client of the server): known by its events only. */
    external?: boolean;
}

/** What an Ask sends besides the prompt, when it does not read the active editor itself. */
export interface AskOptions {
    uri?: string;
    range?: Range;
    selection?: SelectionRef;
    fromChat?: boolean;
    mode?: 'ask';
    /** When it cannot run now (busy session, no server), queue it instead of refusing. */
    queue?: boolean;
    /** Told the session once the server has said it (for `lspAgent.start`'s answer). */
    onSession?: (session: string) => void;
}

/** A prompt waiting to be sent. */
export interface Queued {
    id: number;
    prompt: string;
    options: AskOptions;
    /** The session it continues (undefined: the server's most recent one). */
    session: string | undefined;
    /** Why it waits: its session runs a turn, or the server is not running. */
    why: 'busy' | 'server';
    /** The turn before it was stopped: it is sent only when the user says so. */
    held: boolean;
}

/** Something that shows turns as they run. */
export interface TurnView {
    turnStarted(turn: Turn): void;
    turnEvent(turn: Turn, event: AgentEvent): void;
    /** The turn ended: with the server's result, or with the error that ended the request. */
    turnEnded(turn: Turn, outcome: { result: AskResult } | { error: string; cancelled: boolean }): void;
    /** A line of the extension's own (status, new session), shown between turns. */
    note(markdown: string): void;
}

interface Running extends Turn {
    progress: TurnProgress;
    /** The `lspAgent.ask` request (none for an external turn). */
    request?: CancellationTokenSource;
    cancelling: boolean;
    onSession?: (session: string) => void;
}

export class Turns {
    /** The session the next Ask continues (undefined: the server's most recent one). */
    private session: string | undefined;
    private readonly running = new Set<Running>();
    private readonly sessionChanged = new vscode.EventEmitter<string | undefined>();
    /** Fires the session the next Ask continues, when it changes. */
    readonly onDidChangeSession = this.sessionChanged.event;
    private queue: Queued[] = [];
    private queueIds = 0;
    private readonly queueChanged = new vscode.EventEmitter<void>();
    /** Fires when a prompt is queued, sent or removed. */
    readonly onDidChangeQueue = this.queueChanged.event;
    private readonly started = new vscode.EventEmitter<Turn>();
    /** Fires each turn as it starts (an external one too). */
    readonly onDidStartTurn = this.started.event;

    constructor(
        private readonly server: Server,
        private readonly views: readonly TurnView[],
        private readonly review: Review,
        private readonly questions: Questions,
        private readonly onStatus: (status: Status | undefined, session: string | undefined) => void,
        private readonly onRunning: (count: number) => void,
    ) {
        review.onDidChangeReviewing((message) => {
            for (const turn of this.running) {
                turn.progress.message(message ?? 'thinking…');
            }
        });
    }

    /** The session the next Ask continues (undefined: the server's most recent one). */
    get currentSession(): string | undefined {
        return this.session;
    }

    /** Make `session` the one the next Ask continues. */
    select(session: string | undefined): void {
        if (session !== this.session) {
            this.session = session;
            this.sessionChanged.fire(session);
        }
    }

    /** Whether a turn of `session` runs (undefined: a turn whose session is not known yet). */
    isRunning(session: string | undefined): boolean {
        return [...this.running].some((turn) => turn.session === session || (turn.session === undefined && turn.target === session));
    }

    /** The running turn of `session`, if any. */
    runningTurn(session: string): Turn | undefined {
        return [...this.running].find((turn) => turn.session === session);
    }

    /** Cancel the running turn of `session`. */
    async cancelSession(session: string | undefined): Promise<void> {
        const turn = [...this.running].find((t) => t.session === session || (t.session === undefined && t.target === session));
        if (turn) {
            await this.cancelTurn(turn);
        }
    }

    /** The session of the one turn running, for a question that arrives now. */
    sessionOfRunningTurn(): string | undefined {
        const turns = [...this.running];
        return turns.length === 1 ? turns[0]?.session : undefined;
    }

    /**
     * Ask the agent; `prompt` skips the input box. With `withSelection`, sends the active editor's
     * file and selection; `options` sends what the chat view chose instead.
     */
    async ask(prompt?: string, withSelection = false, options: AskOptions = {}): Promise<AskResult | undefined> {
        const busy = this.busyTurn(this.session);
        if (busy && !options.queue) {
            // The server runs one turn per session: a second Ask would only be refused.
            const message = `LSP Agent: the agent is still working on “${shorten(busy.prompt)}”. Wait for its answer, or cancel it first.`;
            void notify('info', message, [{ title: 'Cancel Turn', run: () => this.cancelTurn(busy) }]);
            return undefined;
        }
        if (this.server.failed !== undefined && !options.queue && !(await this.server.ensure())) {
            return undefined; // the server still does not start, and the user was just told why
        }
        let where: string | undefined;
        let selectionRef = options.selection;
        const args: Partial<AskArguments> = {};
        if (options.uri) {
            args.uri = options.uri;
            if (options.range) {
                args.range = options.range;
            }
            selectionRef ??= selectionOf(options.uri, options.range);
            where = selectionRef.startLine
                ? `${selectionRef.path}, lines ${selectionRef.startLine}-${selectionRef.endLine ?? selectionRef.startLine}`
                : selectionRef.path;
        } else if (withSelection) {
            const editor = vscode.window.activeTextEditor;
            if (!editor || editor.document.uri.scheme !== 'file') {
                void vscode.window.showWarningMessage('LSP Agent: open a file and select the code to ask about.');
                return undefined;
            }
            const selection = editor.selection;
            args.uri = editor.document.uri.toString();
            where = vscode.workspace.asRelativePath(editor.document.uri, false);
            selectionRef = { path: where };
            if (!selection.isEmpty) {
                args.range = {
                    start: { line: selection.start.line, character: selection.start.character },
                    end: { line: selection.end.line, character: selection.end.character },
                };
                selectionRef = selectionOf(args.uri, args.range);
                where += `, lines ${selectionRef.startLine}-${selectionRef.endLine}`;
            }
        }
        if (typeof prompt !== 'string' || !prompt.trim()) {
            prompt = await vscode.window.showInputBox({
                title: withSelection ? 'LSP Agent: Ask About Selection' : 'LSP Agent: Ask',
                prompt: 'Your question or task for the agent',
                placeHolder: this.session ? 'continues the session shown in the chat' : 'continues the most recent session',
                ignoreFocusOut: true,
            });
        }
        if (!prompt?.trim()) {
            return undefined;
        }
        const queued: AskOptions = { ...options, uri: args.uri, range: args.range, selection: selectionRef };
        if (busy) {
            this.enqueue(prompt, queued, 'busy');
            return undefined;
        }
        if (this.server.failed !== undefined && !(await this.server.ensure())) {
            // The server still does not start, and the user was just told why: the prompt waits.
            if (options.queue) {
                this.enqueue(prompt, queued, 'server');
            }
            return undefined;
        }
        const client = await this.server.ensure();
        if (!client) {
            if (options.queue) {
                this.enqueue(prompt, queued, 'server');
            }
            return undefined;
        }
        const question: AskArguments = { ...args, prompt };
        if (this.session) {
            question.session = this.session;
        }
        if (options.mode) {
            question.mode = options.mode;
        }
        if (asksCodebase(prompt)) {
            question.codebase = true;
        }
        const turn: Running = {
            prompt,
            where,
            selection: selectionRef,
            fromChat: options.fromChat,
            mode: options.mode,
            target: this.session,
            session: this.session,
            progress: new TurnProgress(shorten(prompt), () => void this.cancelTurn(turn), undefined, options.fromChat),
            request: new CancellationTokenSource(),
            cancelling: false,
            onSession: options.onSession,
        };
        const request = turn.request as CancellationTokenSource;
        this.running.add(turn);
        this.onRunning(this.running.size);
        this.views.forEach((view) => view.turnStarted(turn));
        this.started.fire(turn);
        let cancelled = false;
        try {
            const result = (await client.sendRequest(
                ExecuteCommandRequest.type,
                { command: ASK, arguments: [question] },
                request.token,
            )) as AskResult;
            this.knowSession(turn, result.session);
            cancelled = result.status === 'cancelled';
            this.views.forEach((view) => view.turnEnded(turn, { result }));
            if (result.status === 'failed' && !turn.fromChat) {
                void notify('error', `LSP Agent: ${result.error ?? 'the turn failed'}`, [
                    { title: 'Show Output', run: () => vscode.commands.executeCommand('lsp-agent.showOutput') },
                ]);
            }
            return result;
        } catch (error) {
            cancelled = turn.cancelling;
            const message = turn.cancelling ? 'cancelled' : errorMessage(error);
            this.views.forEach((view) => view.turnEnded(turn, { error: message, cancelled: turn.cancelling }));
            // A server that stopped has said so in its own notification.
            if (!turn.cancelling && this.server.failed === undefined && !turn.fromChat) {
                void notify('error', `LSP Agent: ${message}`, [
                    { title: 'Show Output', run: () => vscode.commands.executeCommand('lsp-agent.showOutput') },
                ]);
            }
            return undefined;
        } finally {
            this.ended(turn, cancelled);
            request.dispose();
        }
    }

    /**
     * A command of the server's run by VS Code (the light bulb's code actions run
     * `lspAgent.start`; anything may run `lspAgent.ask`): the turn goes through here, so it is
     * shown like any other and queued when its session is busy. Undefined: not such a command.
     */
    runCommand(command: string, args: unknown[]): Promise<unknown> | undefined {
        if (command !== START && command !== ASK) {
            return undefined;
        }
        const argument = args.length === 1 && typeof args[0] === 'object' && args[0] !== null ? (args[0] as Partial<AskArguments>) : undefined;
        const words = args.every((word) => typeof word === 'string') ? (args as string[]).join(' ') : undefined;
        const prompt = argument?.prompt ?? words;
        if (typeof prompt !== 'string' || !prompt.trim() || (argument?.session !== undefined && argument.session !== this.session)) {
            return undefined; // not one to show as the chat's (another session): as it came
        }
        const options: AskOptions = { uri: argument?.uri, range: argument?.range, queue: true };
        if (command === ASK) {
            return this.ask(prompt, false, options);
        }
        return new Promise((resolve) => {
            options.onSession = (session) => resolve({ session });
            void this.ask(prompt, false, options).then((result) => resolve(result ? { session: result.session } : {}));
        });
    }

    /** The prompts waiting to be sent in `session` (all of them when undefined). */
    queued(session?: string): Queued[] {
        return this.queue.filter((entry) => session === undefined || entry.session === session || entry.session === undefined);
    }

    /** Take a prompt out of the queue; it is not sent. */
    unqueue(id: number): Queued | undefined {
        const entry = this.queue.find((e) => e.id === id);
        if (entry) {
            this.queue = this.queue.filter((e) => e !== entry);
            this.queueChanged.fire();
        }
        return entry;
    }

    /** Send a queued prompt held after a stop, when its session is free (else it waits, unheld). */
    sendQueued(id: number): void {
        const entry = this.queue.find((e) => e.id === id);
        if (entry) {
            entry.held = false;
            this.queueChanged.fire();
            this.drain(entry.session);
        }
    }

    /** The server runs (again): the prompts that waited for it go. */
    serverRunning(): void {
        for (const entry of this.queue) {
            if (entry.why === 'server') {
                entry.why = 'busy';
            }
        }
        this.drain(this.session);
    }

    private enqueue(prompt: string, options: AskOptions, why: Queued['why']): void {
        const { queue: _queue, onSession: _onSession, ...kept } = options;
        this.queue.push({ id: ++this.queueIds, prompt, options: kept, session: this.session, why, held: false });
        this.queueChanged.fire();
    }

    /** Send the next queued prompt of `session` when nothing runs there. */
    private drain(session: string | undefined): void {
        if (this.busyTurn(session) || (this.server.failed !== undefined && !this.server.running)) {
            return;
        }
        const next = this.queue.find(
            (entry) => !entry.held && entry.why === 'busy' && (entry.session === session || entry.session === undefined || session === undefined),
        );
        if (!next) {
            return;
        }
        this.queue = this.queue.filter((entry) => entry !== next);
        this.queueChanged.fire();
        void this.ask(next.prompt, false, { ...next.options, queue: true });
    }

    /** The running turn that a new Ask on `session` would meet. */
    private busyTurn(session: string | undefined): Running | undefined {
        return [...this.running].find((turn) => turn.target === session || (session !== undefined && turn.session === session));
    }

    /** A turn has ended: its bookkeeping, and the next queued prompt (unless it was stopped). */
    private ended(turn: Running, cancelled: boolean): void {
        this.running.delete(turn);
        turn.progress.done();
        this.onRunning(this.running.size);
        this.questions.endTurn(turn.session, this.running.size > 0);
        if (this.running.size === 0) {
            this.review.dismiss('the turn ended before the edit was decided');
        }
        void this.refreshStatus();
        if (cancelled) {
            // Stopped: what was queued behind it waits for the user's word.
            let held = false;
            for (const entry of this.queue) {
                if (entry.session === turn.session || entry.session === turn.target || entry.session === undefined) {
                    held = entry.held = true;
                }
            }
            if (held) {
                this.queueChanged.fire();
            }
            return;
        }
        this.drain(turn.session ?? turn.target);
    }

    /** The server said which session `turn` runs in. */
    private knowSession(turn: Running, session: string): void {
        if (turn.session === undefined || turn.onSession) {
            const first = turn.session === undefined;
            turn.session = session;
            if (first && this.session === turn.target) {
                // The next Ask continues this turn's session, and knows it is busy.
                this.select(session);
            }
            if (turn.target === undefined) {
                // Queued behind it while its session was not known yet: that session.
                this.queue.forEach((entry) => (entry.session ??= session));
            }
            turn.onSession?.(session);
            turn.onSession = undefined;
        }
    }

    /** Handler of `lspAgent/event`: the step goes to the turn it belongs to. */
    onEvent(event: AgentEvent): void {
        if (event.kind === 'question') {
            this.questions.onEvent(event);
        } else if (event.kind === 'edit') {
            this.review.onEditOutcome(event.uri, event.applied);
        }
        const turns = [...this.running];
        let turn =
            turns.find((t) => t.session === event.session) ??
            turns.find((t) => t.session === undefined && !(event.kind === 'start' && t.target !== undefined && t.target !== event.session));
        if (!turn) {
            if (event.kind !== 'start') {
                return; // a step of a turn that began before this window
            }
            turn = this.external(event.session, event.prompt ?? '', event.mode === 'ask' ? 'ask' : undefined);
        }
        if (turn.session === undefined) {
            this.knowSession(turn, event.session);
        }
        this.views.forEach((view) => view.turnEvent(turn, event));
        turn.progress.step(event);
        if (turn.external && event.kind === 'status') {
            const result: AskResult = {
                session: event.session,
                status: event.status as AskResult['status'],
                answer: '',
                edits: { proposed: 0, applied: 0, rejected: 0 },
                error: event.error,
            };
            this.views.forEach((view) => view.turnEnded(turn, { result }));
            this.ended(turn, event.status === 'cancelled');
        }
    }

    /**
     * A turn this extension did not ask for (another client of the same server asked it): it is
     * shown from its first event to its `status`, like any other.
     */
    private external(session: string, prompt: string, mode: 'ask' | undefined): Running {
        const turn: Running = {
            prompt,
            mode,
            external: true,
            target: session,
            session,
            progress: new TurnProgress(shorten(prompt), () => void this.cancelTurn(turn)),
            cancelling: false,
        };
        if (!this.busyTurn(this.session) && this.session !== session) {
            this.select(session); // the chat follows the conversation that is moving
        }
        this.running.add(turn);
        this.onRunning(this.running.size);
        this.views.forEach((view) => view.turnStarted(turn));
        this.started.fire(turn);
        return turn;
    }

    /** Cancel every running turn. */
    async cancel(): Promise<void> {
        if (this.running.size === 0) {
            void vscode.window.showInformationMessage('LSP Agent: no turn is running.');
            return;
        }
        await Promise.all([...this.running].map((turn) => this.cancelTurn(turn)));
    }

    /** Start a new session; `quietly`: without a notification (the chat view shows it). */
    async newSession(quietly = false): Promise<void> {
        const result = await this.execute<{ session: string }>(NEW_SESSION, {});
        if (result) {
            this.select(result.session);
            this.note('_a new session_');
            if (!quietly) {
                void vscode.window.showInformationMessage('LSP Agent: a new session started; the next Ask continues it.');
            }
            void this.refreshStatus();
        }
    }

    /** Pick a stored session: the next Ask continues it; `quietly`: without a notification. */
    async showSessions(quietly = false): Promise<void> {
        const sessions = await this.execute<SessionInfo[]>(SESSIONS, {});
        if (!sessions) {
            return;
        }
        type Item = vscode.QuickPickItem & { session?: SessionInfo; create?: boolean };
        const items: Item[] = [
            { label: '$(add) New Session', create: true },
            ...sessions.map((session) => ({
                label: session.title || '(no question yet)',
                description: [
                    session.session === this.session ? 'current' : undefined,
                    session.turns !== undefined ? `${session.turns} turn${session.turns === 1 ? '' : 's'}` : undefined,
                    session.started ? friendlyTime(session.started, new Date()) : undefined,
                ]
                    .filter(Boolean)
                    .join(' · '),
                session,
            })),
        ];
        const picked = await vscode.window.showQuickPick(items, {
            title: 'LSP Agent: Sessions',
            placeHolder: 'Pick the session the next Ask continues',
            matchOnDescription: true,
        });
        if (picked?.create) {
            await this.newSession(quietly);
        } else if (picked?.session) {
            this.select(picked.session.session);
            if (!quietly) {
                void vscode.window.showInformationMessage(`LSP Agent: the next Ask continues “${shorten(picked.session.title || 'the session')}”.`);
            }
            void this.refreshStatus();
        }
    }

    /** Open the transcript of the current session (else the most recent one). */
    async showTranscript(): Promise<void> {
        const sessions = await this.execute<SessionInfo[]>(SESSIONS, {});
        if (!sessions) {
            return;
        }
        const session = sessions.find((s) => s.session === this.session) ?? sessions[0];
        if (!session?.transcript) {
            void vscode.window.showInformationMessage('LSP Agent: no session has a transcript yet.');
            return;
        }
        const document = await vscode.workspace.openTextDocument(vscode.Uri.file(session.transcript));
        await vscode.window.showTextDocument(document, { preview: true });
    }

    /** Write the status to the output and show it. */
    async showStatus(): Promise<void> {
        const status = await this.execute<Status>(STATUS, {});
        if (!status) {
            return;
        }
        this.onStatus(status, this.session);
        const lines = [
            '### LSP Agent status',
            `- model: \`${status.model ?? 'none'}\` (${status.provider}) at ${status.baseUrl}`,
            `- sandbox: ${status.sandbox}${status.sandboxReason ? ` (${status.sandboxReason})` : ''}`,
            `- context window: ${status.contextWindow} tokens`,
            `- session the next Ask continues: ${this.session ?? 'the most recent one'}`,
            ...status.sessions.map(
                (s) =>
                    `- session ${s.session}: ${s.running ? 'running' : 'idle'}, ${s.turns ?? 0} turns, ${s.contextTokens ?? 0} context tokens`,
            ),
        ];
        if (status.version) {
            lines.push(`- server version ${status.version}`);
        }
        this.note(lines.join('\n'));
        if (this.running.size > 0) {
            vscode.window.setStatusBarMessage('$(info) LSP Agent: the status follows the running answer in the output', 10_000);
        }
        void vscode.commands.executeCommand('lsp-agent.showOutput');
    }

    /** Update the status bar from the server, quietly. */
    async refreshStatus(): Promise<void> {
        const client = this.server.running;
        if (!client) {
            this.onStatus(undefined, this.session);
            return;
        }
        try {
            const status = (await client.sendRequest(ExecuteCommandRequest.type, {
                command: STATUS,
                arguments: [{}],
            })) as Status;
            this.onStatus(status, this.session);
        } catch (error) {
            traceError('reading the status failed', error);
        }
    }

    private note(markdown: string): void {
        this.views.forEach((view) => view.note(markdown));
    }

    private async cancelTurn(turn: Running): Promise<void> {
        if (turn.cancelling || !this.running.has(turn)) {
            return;
        }
        turn.cancelling = true;
        turn.progress.message('cancelling…');
        const client = this.server.running;
        // The turn is cancelled first, the review closed after: an edit under review then ends
        // with its turn (stopped), not as one the user rejected.
        if (turn.session && client) {
            try {
                await client.sendRequest(ExecuteCommandRequest.type, { command: CANCEL, arguments: [{ session: turn.session }] });
                this.review.dismiss('the turn was cancelled');
                return;
            } catch (error) {
                traceError('lspAgent.cancel failed', error);
            }
        }
        // No event yet, so no session known: cancelling the request cancels the turn.
        turn.request?.cancel();
        this.review.dismiss('the turn was cancelled');
    }

    /** Send a command to the server; an error is a notification, and undefined. */
    async execute<T>(command: string, argument: object): Promise<T | undefined> {
        const client: LanguageClient | undefined = await this.server.ensure();
        if (!client) {
            return undefined;
        }
        try {
            return (await client.sendRequest(ExecuteCommandRequest.type, { command, arguments: [argument] })) as T;
        } catch (error) {
            void notify('error', `LSP Agent: ${errorMessage(error)}`);
            return undefined;
        }
    }
}

function shorten(text: string): string {
    const flat = text.replace(/\s+/g, ' ').trim();
    return flat.length > 80 ? flat.slice(0, 79) + '…' : flat;
}

function errorMessage(error: unknown): string {
    return error instanceof Error ? error.message : String(error);
}

/** What a code action or a command points at: the file (relative) and its whole lines. */
function selectionOf(uri: string, range: Range | undefined): SelectionRef {
    const path = vscode.workspace.asRelativePath(vscode.Uri.parse(uri), false);
    if (!range) {
        return { path };
    }
    // A range that ends at the start of a line ends on the line before.
    const endLine = range.end.character === 0 && range.end.line > range.start.line ? range.end.line : range.end.line + 1;
    return { path, startLine: range.start.line + 1, endLine };
}
