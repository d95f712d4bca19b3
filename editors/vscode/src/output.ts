/**
 * What the user sees of a turn: the "LSP Agent" output channel (Markdown), the progress
 * notification with its Cancel button, and the status bar item.
 */
import * as vscode from 'vscode';
import { contextUse, statusBarText, stepOf, TurnWriter } from './events';
import type { AgentEvent, Status } from './protocol';

export const OUTPUT_CHANNEL_NAME = 'LSP Agent';

export class Output implements vscode.Disposable {
    readonly channel: vscode.OutputChannel;
    private readonly statusItem: vscode.StatusBarItem;
    private writer: TurnWriter;
    private status: Status | undefined;
    private session: string | undefined;
    private runningCount = 0;

    constructor(private readonly root?: string) {
        this.channel = vscode.window.createOutputChannel(OUTPUT_CHANNEL_NAME, 'markdown');
        this.writer = new TurnWriter(root);
        this.statusItem = vscode.window.createStatusBarItem('lsp-agent.status', vscode.StatusBarAlignment.Right, 100);
        this.statusItem.name = 'LSP Agent';
        this.statusItem.command = 'lsp-agent.status';
        this.render();
        this.statusItem.show();
    }

    /** A new question: its heading, and the channel shown without taking the focus. */
    begin(prompt: string, where?: string): TurnWriter {
        this.writer = new TurnWriter(this.root);
        this.channel.append(this.writer.begin(prompt, where));
        this.channel.show(true);
        return this.writer;
    }

    /** Append what `writer` produced, when its turn is the one on screen. */
    append(writer: TurnWriter, text: string): void {
        if (writer === this.writer && text) {
            this.channel.append(text);
        }
    }

    note(markdown: string): void {
        this.channel.append('\n' + markdown.trimEnd() + '\n');
    }

    show(): void {
        this.channel.show(true);
    }

    setRunning(count: number): void {
        this.runningCount = count;
        void vscode.commands.executeCommand('setContext', 'lspAgent.running', count > 0);
        this.render();
    }

    setStatus(status: Status | undefined, session: string | undefined): void {
        this.status = status;
        this.session = session;
        this.render();
    }

    private render(): void {
        const status = this.status;
        const use = status ? contextUse(status, this.session) : undefined;
        this.statusItem.text = statusBarText(status?.model, this.runningCount > 0, use);
        const tooltip = new vscode.MarkdownString(undefined, true);
        tooltip.appendMarkdown('**LSP Agent**\n\n');
        if (status) {
            tooltip.appendMarkdown(`model: \`${status.model ?? 'none'}\` (${status.provider})\n\n`);
            tooltip.appendMarkdown(`endpoint: ${status.baseUrl}\n\n`);
            tooltip.appendMarkdown(`sandbox: ${status.sandbox}\n\n`);
            if (use !== undefined) {
                tooltip.appendMarkdown(`context: ${Math.round(use * 100)}% of ${status.contextWindow} tokens\n\n`);
            }
        } else {
            tooltip.appendMarkdown('server not started\n\n');
        }
        if (this.session) {
            tooltip.appendMarkdown(`session: \`${this.session}\`\n\n`);
        }
        tooltip.appendMarkdown('Click for the status.');
        this.statusItem.tooltip = tooltip;
    }

    dispose(): void {
        this.channel.dispose();
        this.statusItem.dispose();
    }
}

/**
 * The progress notification of one turn: its message follows the turn's steps, and its Cancel
 * button calls `onCancel`. Resolves `done` to close it.
 */
export class TurnProgress {
    private report: ((message: string) => void) | undefined;
    private close: (() => void) | undefined;
    private readonly closed: Promise<void>;

    constructor(title: string, onCancel: () => void, private readonly root?: string) {
        this.closed = new Promise<void>((resolve) => {
            this.close = resolve;
        });
        void vscode.window.withProgress(
            { location: vscode.ProgressLocation.Notification, title: 'LSP Agent', cancellable: true },
            (progress, token) => {
                this.report = (message) => progress.report({ message });
                progress.report({ message: title });
                token.onCancellationRequested(onCancel);
                return this.closed;
            },
        );
    }

    step(event: AgentEvent): void {
        const message = stepOf(event, this.root);
        if (message !== undefined) {
            this.report?.(message);
        }
    }

    message(text: string): void {
        this.report?.(text);
    }

    done(): void {
        this.close?.();
    }
}
