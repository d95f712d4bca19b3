/** The progress of one turn on screen: a notification with Cancel, or the status bar. */
import * as vscode from 'vscode';
import { stepOf } from './events';
import type { AgentEvent } from './protocol';

/**
 * The progress notification of one turn: its message follows the turn's steps, and its Cancel
 * button calls `onCancel`. Resolves `done` to close it.
 */
export class TurnProgress {
    private report: ((message: string) => void) | undefined;
    private close: (() => void) | undefined;
    private readonly closed: Promise<void>;

    /** `quiet`: in the status bar instead of a notification (the chat view shows the turn). */
    constructor(title: string, onCancel: () => void, private readonly root?: string, quiet = false) {
        this.closed = new Promise<void>((resolve) => {
            this.close = resolve;
        });
        const location = quiet ? vscode.ProgressLocation.Window : vscode.ProgressLocation.Notification;
        void vscode.window.withProgress(
            { location, title: 'LSP Agent', cancellable: !quiet },
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
