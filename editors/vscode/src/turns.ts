/**
 * The commands that talk to the agent: Ask (with or without the selection), Cancel, sessions,
 * transcript and status. Each is one `workspace/executeCommand` of the server.
 *
 * A turn is shown by views (`TurnView`): the output channel today; a chat view is another view of
 * the same turns and events.
 */
import * as vscode from 'vscode';
import { CancellationTokenSource, ExecuteCommandRequest, LanguageClient } from 'vscode-languageclient/node';
import { traceError } from './common/log';
import { Server } from './common/server';
import { notify } from './notify';
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
}

/** What an Ask sends besides the prompt, when it does not read the active editor itself. */
export interface AskOptions {
    uri?: string;
    range?: Range;
    selection?: SelectionRef;
    fromChat?: boolean;
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
    request: CancellationTokenSource;
    cancelling: boolean;
}

export class Turns {
    /** The session the next Ask continues (undefined: the server's most recent one). */
    private session: string | undefined;
    private readonly running = new Set<Running>();
    private readonly sessionChanged = new vscode.EventEmitter<string | undefined>();
    /** Fires the session the next Ask continues, when it changes. */
    readonly onDidChangeSession = this.sessionChanged.event;

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
        const busy = [...this.running].find(
            (turn) => turn.target === this.session || (this.session !== undefined && turn.session === this.session),
        );
        if (busy) {
            // The server runs one turn per session: a second Ask would only be refused.
            const message = `LSP Agent: the agent is still working on “${shorten(busy.prompt)}”. Wait for its answer, or cancel it first.`;
            void notify('info', message, [{ title: 'Cancel Turn', run: () => this.cancelTurn(busy) }]);
            return undefined;
        }
        if (this.server.failed !== undefined && !(await this.server.ensure())) {
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
            if (selectionRef) {
                where = selectionRef.startLine
                    ? `${selectionRef.path}, lines ${selectionRef.startLine}-${selectionRef.endLine ?? selectionRef.startLine}`
                    : selectionRef.path;
            }
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
                selectionRef = { path: where, startLine: selection.start.line + 1, endLine: selection.end.line + 1 };
                where += `, lines ${selection.start.line + 1}-${selection.end.line + 1}`;
            }
        }
        if (typeof prompt !== 'string' || !prompt.trim()) {
            prompt = await vscode.window.showInputBox({
                title: withSelection ? 'LSP Agent: Ask About Selection' : 'LSP Agent: Ask',
                prompt: 'Your question or task for the agent',
                placeHolder: this.session ? `continues session ${this.session}` : 'continues the most recent session',
                ignoreFocusOut: true,
            });
        }
        if (!prompt?.trim()) {
            return undefined;
        }
        const client = await this.server.ensure();
        if (!client) {
            return undefined;
        }
        const question: AskArguments = { ...args, prompt };
        if (this.session) {
            question.session = this.session;
        }
        const turn: Running = {
            prompt,
            where,
            selection: selectionRef,
            fromChat: options.fromChat,
            target: this.session,
            session: this.session,
            progress: new TurnProgress(shorten(prompt), () => void this.cancelTurn(turn), undefined, options.fromChat),
            request: new CancellationTokenSource(),
            cancelling: false,
        };
        this.running.add(turn);
        this.onRunning(this.running.size);
        this.views.forEach((view) => view.turnStarted(turn));
        try {
            const result = (await client.sendRequest(
                ExecuteCommandRequest.type,
                { command: ASK, arguments: [question] },
                turn.request.token,
            )) as AskResult;
            turn.session = result.session;
            if (this.session === turn.target) {
                this.select(result.session);
            }
            this.views.forEach((view) => view.turnEnded(turn, { result }));
            if (result.status === 'failed' && !turn.fromChat) {
                void notify('error', `LSP Agent: ${result.error ?? 'the turn failed'}`, [
                    { title: 'Show Output', run: () => vscode.commands.executeCommand('lsp-agent.showOutput') },
                ]);
            }
            return result;
        } catch (error) {
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
            this.running.delete(turn);
            turn.progress.done();
            turn.request.dispose();
            this.onRunning(this.running.size);
            this.questions.endTurn(turn.session, this.running.size > 0);
            if (this.running.size === 0) {
                this.review.dismiss('the turn ended before the edit was decided');
            }
            void this.refreshStatus();
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
        const turn = turns.find((t) => t.session === event.session) ?? turns.find((t) => t.session === undefined);
        if (!turn) {
            return;
        }
        if (turn.session === undefined) {
            turn.session = event.session;
            if (this.session === turn.target) {
                // The next Ask continues this turn's session, and knows it is busy.
                this.select(event.session);
            }
        }
        this.views.forEach((view) => view.turnEvent(turn, event));
        turn.progress.step(event);
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
            this.note(`_new session ${result.session}_`);
            if (!quietly) {
                void vscode.window.showInformationMessage(`LSP Agent: new session ${result.session}; the next Ask continues it.`);
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
                    session.turns !== undefined ? `${session.turns} turns` : undefined,
                    session.started,
                ]
                    .filter(Boolean)
                    .join(' · '),
                detail: session.session,
                session,
            })),
        ];
        const picked = await vscode.window.showQuickPick(items, {
            title: 'LSP Agent: Sessions',
            placeHolder: 'Pick the session the next Ask continues',
            matchOnDetail: true,
        });
        if (picked?.create) {
            await this.newSession(quietly);
        } else if (picked?.session) {
            this.select(picked.session.session);
            if (!quietly) {
                void vscode.window.showInformationMessage(`LSP Agent: the next Ask continues session ${this.session}.`);
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
        this.review.dismiss('the turn was cancelled');
        const client = this.server.running;
        if (turn.session && client) {
            try {
                await client.sendRequest(ExecuteCommandRequest.type, { command: CANCEL, arguments: [{ session: turn.session }] });
                return;
            } catch (error) {
                traceError('lspAgent.cancel failed', error);
            }
        }
        // No event yet, so no session known: cancelling the request cancels the turn.
        turn.request.cancel();
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
