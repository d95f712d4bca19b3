/**
 * The model picker: the models the endpoint lists (`lspAgent.models`, its `/models`), the one in
 * effect marked, and `lspAgent.model` following the choice (where the user set it: the
 * workspace when they set it there, else their user settings). The server reads the setting
 * again at once (`workspace/didChangeConfiguration`).
 */
import * as vscode from 'vscode';
import { ExecuteCommandRequest } from 'vscode-languageclient/node';
import type { Server } from './common/server';
import { MODEL_SETTING } from './common/settings';
import { MODELS, ModelsResult, SETTINGS_SECTION } from './protocol';

/** Show the picker; the model chosen (undefined: none, the user went back). */
export async function chooseModel(server: Server): Promise<string | undefined> {
    type Item = vscode.QuickPickItem & { model?: string; typed?: boolean };
    const picker = vscode.window.createQuickPick<Item>();
    picker.title = 'LSP Agent: Choose Model';
    picker.placeholder = 'The model the next turn uses (lspAgent.model)';
    picker.busy = true;
    picker.matchOnDescription = true;
    picker.show();
    const listed = await listModels(server);
    const current = 'value' in listed ? listed.value.current : configuredModel();
    const items: Item[] = [];
    if ('value' in listed) {
        const models = [...listed.value.models];
        if (current && !models.includes(current)) {
            models.unshift(current);
        }
        for (const model of models) {
            items.push({
                label: model,
                description: model === current ? 'current' : undefined,
                picked: model === current,
                model,
            });
        }
        if (models.length === 0) {
            items.push({ label: '$(info) The endpoint lists no models', description: listed.value.baseUrl, alwaysShow: true });
        }
    } else {
        items.push({ label: `$(warning) The models could not be listed: ${listed.error}`, alwaysShow: true });
    }
    items.push({ label: '$(edit) Type a Model Name…', typed: true, alwaysShow: true });
    picker.items = items;
    picker.activeItems = items.filter((item) => item.model === current);
    picker.busy = false;
    const picked = await new Promise<Item | undefined>((resolve) => {
        picker.onDidAccept(() => resolve(picker.selectedItems[0]));
        picker.onDidHide(() => resolve(undefined));
    });
    picker.dispose();
    let model = picked?.model;
    if (picked?.typed) {
        model = await vscode.window.showInputBox({
            title: 'LSP Agent: Choose Model',
            prompt: 'The model name, as the endpoint knows it',
            value: current ?? '',
            ignoreFocusOut: true,
        });
    }
    model = model?.trim();
    if (!model) {
        return undefined;
    }
    await setModel(model);
    return model;
}

/** The model the user set (`lspAgent.model`), if any. */
export function configuredModel(): string | undefined {
    const value = vscode.workspace.getConfiguration(SETTINGS_SECTION).get<string>(MODEL_SETTING);
    return value?.trim() ? value : undefined;
}

/** Write `lspAgent.model` where the user keeps it. */
async function setModel(model: string): Promise<void> {
    const config = vscode.workspace.getConfiguration(SETTINGS_SECTION);
    const inspected = config.inspect<string>(MODEL_SETTING);
    const target =
        inspected?.workspaceFolderValue !== undefined
            ? vscode.ConfigurationTarget.WorkspaceFolder
            : inspected?.workspaceValue !== undefined
              ? vscode.ConfigurationTarget.Workspace
              : vscode.ConfigurationTarget.Global;
    await config.update(MODEL_SETTING, model, target);
}

async function listModels(server: Server): Promise<{ value: ModelsResult } | { error: string }> {
    const client = await server.ensure();
    if (!client) {
        return { error: 'the server is not running' };
    }
    try {
        const value = (await client.sendRequest(ExecuteCommandRequest.type, { command: MODELS, arguments: [{}] })) as ModelsResult;
        return { value };
    } catch (error) {
        return { error: error instanceof Error ? error.message : String(error) };
    }
}
