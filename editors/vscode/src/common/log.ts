/**
 * The extension's log: the "LSP Agent Log" output channel, shared with the language client (server
 * `window/logMessage` lines and the LSP trace go there too).
 */
import * as vscode from 'vscode';

export const LOG_CHANNEL_NAME = 'LSP Agent Log';

let channel: vscode.LogOutputChannel | undefined;

export function createLog(): vscode.LogOutputChannel {
    channel ??= vscode.window.createOutputChannel(LOG_CHANNEL_NAME, { log: true });
    return channel;
}

export function traceInfo(message: string): void {
    channel?.info(message);
}

export function traceWarn(message: string): void {
    channel?.warn(message);
}

export function traceError(message: string, error?: unknown): void {
    if (error === undefined) {
        channel?.error(message);
    } else {
        channel?.error(`${message}: ${error instanceof Error ? error.message : String(error)}`);
    }
}
