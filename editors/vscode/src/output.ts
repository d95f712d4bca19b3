/**
 * What the user sees of a turn: the "LSP Agent" output channel (Markdown), the progress
 * notification with its Cancel button, and the status bar item.
 *
 * The channel is one stream of text, so one turn writes at a time: a turn that starts while
 * another is being written (another session, a note such as the status) is held back and written
 * whole once the first has ended, never in the middle of its words.
 */
import * as vscode from 'vscode';
import type { ServerState } from './common/server';
import { contextUse, OneAtATime, statusBarText, TurnWriter, Usage } from './events';
import type { AgentEvent, AskResult, Status } from './protocol';
import type { Turn, TurnView } from './turns';

export const OUTPUT_CHANNEL_NAME = 'LSP Agent';

export class Output implements TurnView, vscode.Disposable {
    readonly channel: vscode.OutputChannel;
    private readonly writers = new Map<Turn, TurnWriter>();
    private readonly statusItem: vscode.StatusBarItem;
    private readonly stream: OneAtATime<TurnWriter>;
    private status: Status | undefined;
    private session: string | undefined;
    private runningCount = 0;
    private questions = 0;
    private server: { state: ServerState; message?: string } = { state: 'stopped' };
    /** Context use of the session last reported by a `usage` event (newer than `status`). */
    private liveUse: { session: string; use: number } | undefined;

    constructor(private readonly root?: string) {
        this.channel = vscode.window.createOutputChannel(OUTPUT_CHANNEL_NAME, 'markdown');
        this.stream = new OneAtATime((text) => this.channel.append(text));
        this.statusItem = vscode.window.createStatusBarItem('lsp-agent.status', vscode.StatusBarAlignment.Right, 100);
        this.statusItem.name = 'LSP Agent';
        this.statusItem.command = 'lsp-agent.status';
        this.render();
        this.statusItem.show();
    }

    /** A new question: its heading, and the channel shown without taking the focus. */
    turnStarted(turn: Turn): void {
        const writer = new TurnWriter(this.root);
        this.writers.set(turn, writer);
        this.stream.begin(writer, writer.begin(turn.prompt, turn.where));
        if (!turn.fromChat) {
            this.channel.show(true);
        }
    }

    turnEvent(turn: Turn, event: AgentEvent): void {
        const writer = this.writers.get(turn);
        if (!writer) {
            return;
        }
        this.stream.append(writer, writer.event(event));
        if (event.kind === 'usage') {
            this.setUsage(event.session, writer.usage);
        }
    }

    /** The end of a turn; what was held back behind it is written now. */
    turnEnded(turn: Turn, outcome: { result: AskResult } | { error: string }): void {
        const writer = this.writers.get(turn);
        if (!writer) {
            return;
        }
        this.writers.delete(turn);
        this.stream.append(writer, 'result' in outcome ? writer.finish(outcome.result) : writer.fail(outcome.error));
        const held = this.stream.end(writer);
        if (held !== undefined) {
            void this.heldBack(turn.prompt, held);
        }
    }

    /** A turn ended while another is being written: its answer waits, and the user hears of it. */
    private async heldBack(prompt: string, text: string): Promise<void> {
        const flat = prompt.replace(/\s+/g, ' ').trim();
        const shown = flat.length > 60 ? flat.slice(0, 59) + '…' : flat;
        const choice = await vscode.window.showInformationMessage(
            `LSP Agent: the answer to “${shown}” is ready; the output shows it after the answer being written now.`,
            'Show Now',
        );
        if (choice === 'Show Now') {
            const document = await vscode.workspace.openTextDocument({ language: 'markdown', content: text.trimStart() });
            await vscode.window.showTextDocument(document, { preview: true });
        }
    }

    /** A note of the extension's (status, new session): after the turn being written, if any. */
    note(markdown: string): void {
        this.stream.note('\n' + markdown.trimEnd() + '\n');
    }

    show(): void {
        this.channel.show(true);
    }

    setRunning(count: number): void {
        this.runningCount = count;
        void vscode.commands.executeCommand('setContext', 'lspAgent.running', count > 0);
        this.render();
    }

    setQuestions(count: number): void {
        this.questions = count;
        this.render();
    }

    setServer(state: ServerState, message?: string): void {
        this.server = { state, message };
        if (state !== 'running') {
            this.status = undefined;
        }
        this.render();
    }

    setStatus(status: Status | undefined, session: string | undefined): void {
        this.status = status;
        this.session = session;
        this.liveUse = undefined;
        this.render();
    }

    /** A `usage` event: the context use shown follows the turn as it runs. */
    setUsage(session: string, usage: Usage): void {
        if (usage.contextTokens !== undefined && usage.contextWindow) {
            this.liveUse = { session, use: usage.contextTokens / usage.contextWindow };
            this.render();
        }
    }

    private render(): void {
        const item = this.statusItem;
        const tooltip = new vscode.MarkdownString(undefined, true);
        tooltip.appendMarkdown('**LSP Agent**\n\n');
        if (this.server.state === 'failed') {
            item.text = '$(error) LSP Agent: server not running';
            item.backgroundColor = new vscode.ThemeColor('statusBarItem.errorBackground');
            tooltip.appendText(this.server.message ?? 'The server is not running.');
            tooltip.appendMarkdown('\n\nClick to try again.');
            item.tooltip = tooltip;
            return;
        }
        item.backgroundColor = undefined;
        const status = this.status;
        const live = this.liveUse && (!this.session || this.liveUse.session === this.session) ? this.liveUse.use : undefined;
        const use = live ?? (status ? contextUse(status, this.session) : undefined);
        item.text = statusBarText(status?.model, this.runningCount > 0, use, this.questions > 0);
        if (status) {
            tooltip.appendMarkdown(`model: \`${status.model ?? 'none'}\` (${status.provider})\n\n`);
            tooltip.appendMarkdown(`endpoint: ${status.baseUrl}\n\n`);
            tooltip.appendMarkdown(`sandbox: ${status.sandbox}\n\n`);
            if (use !== undefined) {
                tooltip.appendMarkdown(`context: ${Math.round(use * 100)}% of ${status.contextWindow} tokens\n\n`);
            }
        } else {
            tooltip.appendMarkdown(this.server.state === 'running' ? 'server running\n\n' : 'server not started\n\n');
        }
        if (this.questions > 0) {
            tooltip.appendMarkdown('A question is waiting for your answer.\n\n');
        }
        if (this.session) {
            tooltip.appendMarkdown(`session: \`${this.session}\`\n\n`);
        }
        tooltip.appendMarkdown('Click for the status.');
        item.tooltip = tooltip;
    }

    dispose(): void {
        this.channel.dispose();
        this.statusItem.dispose();
    }
}
