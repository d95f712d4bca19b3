/**
 * Notifications to the user. One that names a setting of ours (`lspAgent.model`, …) gets a button
 * that opens the Settings editor on it, besides the buttons its caller gives.
 */
import * as vscode from 'vscode';
import { settingsNamed } from './messages';

export const EXTENSION_ID = 'lsp-agent.lsp-agent';

export type Severity = 'error' | 'warning' | 'info';

export interface Action {
    title: string;
    run(): unknown;
}

/** The settings the extension contributes (from its package.json), with their scope. */
function contributed(): Record<string, { scope?: string }> {
    const json = vscode.extensions.getExtension(EXTENSION_ID)?.packageJSON as
        | { contributes?: { configuration?: { properties?: Record<string, { scope?: string }> } } }
        | undefined;
    return json?.contributes?.configuration?.properties ?? {};
}

/** Every setting the extension contributes. */
export function contributedSettings(): string[] {
    return Object.keys(contributed());
}

/**
 * Open the Settings editor on one setting. In a remote window (SSH, containers, code-server) a
 * machine-scoped setting lives in the Remote tab; the User tab would show "No Settings Found".
 */
export function openSetting(key: string): Thenable<unknown> {
    const scope = contributed()[key]?.scope;
    const remote = vscode.env.remoteName !== undefined && (scope === 'machine' || scope === 'machine-overridable');
    return vscode.commands.executeCommand(remote ? 'workbench.action.openRemoteSettings' : 'workbench.action.openSettings', {
        query: key,
    });
}

/** The buttons that open the settings `message` names (`Open Setting` when it names one). */
export function settingActions(message: string, skip: readonly string[] = []): Action[] {
    const named = settingsNamed(message, contributedSettings()).filter((key) => !skip.includes(key));
    return named.slice(0, 2).map((key) => ({
        title: named.length === 1 ? 'Open Setting' : `Open ${key}`,
        run: () => openSetting(key),
    }));
}

/**
 * Show `message` with `actions`, plus a button for each setting it names (except those in
 * `covered`: an action of the caller opens them); run the one clicked.
 */
export async function notify(
    severity: Severity,
    message: string,
    actions: readonly Action[] = [],
    covered: readonly string[] = [],
): Promise<void> {
    const all = [...actions, ...settingActions(message, covered)];
    const titles = all.map((action) => action.title);
    const shown =
        severity === 'error'
            ? vscode.window.showErrorMessage(message, ...titles)
            : severity === 'warning'
              ? vscode.window.showWarningMessage(message, ...titles)
              : vscode.window.showInformationMessage(message, ...titles);
    const chosen = await shown;
    await all.find((action) => action.title === chosen)?.run();
}
