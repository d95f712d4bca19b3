/**
 * The commands that talk to the agent: Ask (with or without the selection), Cancel, sessions,
 * transcript and status. Each is one `workspace/executeCommand` of the server (DESIGN §3).
 */
import * as vscode from 'vscode';
import { CancellationTokenSource, ExecuteCommandRequest, LanguageClient } from 'vscode-languageclient/node';
import { traceError } from './common/log';
import { Server } from './common/server';
import { TurnWriter } from './events';
import { Output, TurnProgress } from './output';
import {
    AgentEvent,
    ASK,
    AskArguments,
    AskResult,
    CANCEL,
    NEW_SESSION,
    SESSIONS,
    SessionInfo,
    STATUS,
    Status,
} from './protocol';
import { Review } from './review';

interface Turn {
    session?: string;
    writer: TurnWriter;
    progress: TurnProgress;
    request: CancellationTokenSource;
    cancelling: boolean;
}

export class Turns {
    /** The session the next Ask continues (undefined: the server's most recent one). */
    private session: string | undefined;
    private readonly running = new Set<Turn>();

    constructor(
        private readonly server: Server,
        private readonly output: Output,
        private readonly review: Review,
    ) {
        review.onDidChangeReviewing((message) => {
            for (const turn of this.running) {
                turn.progress.message(message ?? 'thinking…');
            }
        });
    }

    /** Ask the agent; `prompt` skips the input box. With `withSelection`, sends the file and selection. */
    async ask(prompt?: string, withSelection = false): Promise<AskResult | undefined> {
        let where: string | undefined;
        const args: Partial<AskArguments> = {};
        if (withSelection) {
            const editor = vscode.window.activeTextEditor;
            if (!editor || editor.document.uri.scheme !== 'file') {
                void vscode.window.showWarningMessage('LSP Agent: open a file and select the code to ask about.');
                return undefined;
            }
            const selection = editor.selection;
            args.uri = editor.document.uri.toString();
            where = vscode.workspace.asRelativePath(editor.document.uri, false);
            if (!selection.isEmpty) {
                args.range = {
                    start: { line: selection.start.line, character: selection.start.character },
                    end: { line: selection.end.line, character: selection.end.character },
                };
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
        const turn: Turn = {
            session: this.session,
            writer: this.output.begin(prompt, where),
            progress: new TurnProgress(shorten(prompt), () => void this.cancelTurn(turn)),
            request: new CancellationTokenSource(),
            cancelling: false,
        };
        this.running.add(turn);
        this.output.setRunning(this.running.size);
        try {
            const result = (await client.sendRequest(
                ExecuteCommandRequest.type,
                { command: ASK, arguments: [question] },
                turn.request.token,
            )) as AskResult;
            this.output.append(turn.writer, turn.writer.finish(result));
            this.session = result.session;
            if (result.status === 'failed') {
                void vscode.window.showErrorMessage(`LSP Agent: ${result.error ?? 'the turn failed'}`);
            }
            return result;
        } catch (error) {
            const message = turn.cancelling ? 'cancelled' : errorMessage(error);
            this.output.append(turn.writer, turn.writer.fail(message));
            if (!turn.cancelling) {
                void vscode.window.showErrorMessage(`LSP Agent: ${message}`, 'Show Output').then((choice) => {
                    if (choice) {
                        this.output.show();
                    }
                });
            }
            return undefined;
        } finally {
            this.running.delete(turn);
            turn.progress.done();
            turn.request.dispose();
            this.output.setRunning(this.running.size);
            if (this.running.size === 0) {
                this.review.dismiss('the turn ended before the edit was decided');
            }
            void this.refreshStatus();
        }
    }

    /** Handler of `lspAgent/event`: the step goes to the turn it belongs to. */
    onEvent(event: AgentEvent): void {
        const turns = [...this.running];
        const turn = turns.find((t) => t.session === event.session) ?? turns.find((t) => t.session === undefined);
        if (!turn) {
            return;
        }
        turn.session ??= event.session;
        this.output.append(turn.writer, turn.writer.event(event));
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

    async newSession(): Promise<void> {
        const result = await this.execute<{ session: string }>(NEW_SESSION, {});
        if (result) {
            this.session = result.session;
            this.output.note(`_new session ${result.session}_`);
            void vscode.window.showInformationMessage(`LSP Agent: new session ${result.session}; the next Ask continues it.`);
            void this.refreshStatus();
        }
    }

    /** Pick a stored session: the next Ask continues it. */
    async showSessions(): Promise<void> {
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
            await this.newSession();
        } else if (picked?.session) {
            this.session = picked.session.session;
            void vscode.window.showInformationMessage(`LSP Agent: the next Ask continues session ${this.session}.`);
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
        this.output.setStatus(status, this.session);
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
        this.output.note(lines.join('\n'));
        this.output.show();
    }

    /** Update the status bar from the server, quietly. */
    async refreshStatus(): Promise<void> {
        const client = this.server.running;
        if (!client) {
            this.output.setStatus(undefined, this.session);
            return;
        }
        try {
            const status = (await client.sendRequest(ExecuteCommandRequest.type, {
                command: STATUS,
                arguments: [{}],
            })) as Status;
            this.output.setStatus(status, this.session);
        } catch (error) {
            traceError('reading the status failed', error);
        }
    }

    private async cancelTurn(turn: Turn): Promise<void> {
        if (turn.cancelling) {
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
        // No event yet, so no session known: cancelling the request cancels the turn (DESIGN §3).
        turn.request.cancel();
    }

    private async execute<T>(command: string, argument: object): Promise<T | undefined> {
        const client: LanguageClient | undefined = await this.server.ensure();
        if (!client) {
            return undefined;
        }
        try {
            return (await client.sendRequest(ExecuteCommandRequest.type, { command, arguments: [argument] })) as T;
        } catch (error) {
            void vscode.window.showErrorMessage(`LSP Agent: ${errorMessage(error)}`);
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
