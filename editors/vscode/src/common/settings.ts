/**
 * The extension's settings: what is sent to the server (only what the user set, so that the
 * server's other sources still apply), the review mode, and the inputs of the server command.
 */
import * as os from 'node:os';
import * as vscode from 'vscode';
import { SERVER_SETTINGS, SETTINGS_SECTION, USER_ONLY_SETTINGS } from '../protocol';

export type ReviewMode = 'diff' | 'refactorPreview' | 'auto';

export const SERVER_COMMAND_SETTING = 'server.command';
export const REVIEW_SETTING = 'review';
export const MODEL_SETTING = 'model';

/** The value the user set for `key` (folder, workspace or user), or undefined for the default. */
function explicitValue<T>(config: vscode.WorkspaceConfiguration, key: string): T | undefined {
    const inspected = config.inspect<T>(key);
    if (!inspected) {
        return undefined;
    }
    if ((USER_ONLY_SETTINGS as readonly string[]).includes(key)) {
        // Whatever a workspace's settings file holds (see USER_ONLY_SETTINGS).
        return inspected.globalValue;
    }
    return inspected.workspaceFolderValue ?? inspected.workspaceValue ?? inspected.globalValue;
}

/**
 * The `lspAgent` section for the server: each server setting the user set, flat, camelCase.
 * Defaults are left out so that environment variables and `~/.agents/env` keep their say;
 * an empty string counts as not set. The API key is not here: it goes in the environment.
 */
export function serverSettings(scope?: vscode.ConfigurationScope): Record<string, unknown> {
    const config = vscode.workspace.getConfiguration(SETTINGS_SECTION, scope);
    const section: Record<string, unknown> = {};
    for (const key of SERVER_SETTINGS) {
        const value = explicitValue<unknown>(config, key);
        if (value === undefined || value === null || (typeof value === 'string' && value.trim() === '')) {
            continue;
        }
        section[key] = value;
    }
    return section;
}

export function reviewMode(): ReviewMode {
    const inspected = vscode.workspace.getConfiguration(SETTINGS_SECTION).inspect<string>(REVIEW_SETTING);
    const chosen = inspected?.workspaceFolderValue ?? inspected?.workspaceValue ?? inspected?.globalValue;
    // A workspace may choose how an edit is reviewed, never that it is not: `auto` counts only
    // from the user's own settings (a cloned repository's .vscode/settings.json cannot set it).
    const value = chosen === 'auto' && inspected?.globalValue !== 'auto' ? inspected?.globalValue : chosen;
    return value === 'refactorPreview' || value === 'auto' ? value : 'diff';
}

/** The raw `lspAgent.server.command` value (validated by `resolveServerCommand`): the user's. */
export function serverCommandSetting(): unknown {
    return explicitValue<unknown>(vscode.workspace.getConfiguration(SETTINGS_SECTION), SERVER_COMMAND_SETTING);
}

/** `python.defaultInterpreterPath` when the user set it (its default `python` is not a choice). */
export function pythonInterpreter(): string | undefined {
    const config = vscode.workspace.getConfiguration('python');
    const value = explicitValue<string>(config, 'defaultInterpreterPath');
    return typeof value === 'string' && value.trim() ? value : undefined;
}

export function workspaceRoot(): vscode.WorkspaceFolder | undefined {
    return vscode.workspace.workspaceFolders?.[0];
}

export function userHome(): string {
    return os.homedir();
}
