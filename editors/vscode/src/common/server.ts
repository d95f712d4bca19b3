/**
 * Starting, restarting and stopping `lsp-agent serve` over stdio with vscode-languageclient.
 */
import * as fs from 'node:fs';
import * as vscode from 'vscode';
import {
    ApplyWorkspaceEditParams,
    ApplyWorkspaceEditRequest,
    ApplyWorkspaceEditResult,
    CancellationToken,
    ConfigurationParams,
    DidChangeConfigurationNotification,
    LanguageClient,
    LanguageClientOptions,
    RevealOutputChannelOn,
    ServerOptions,
    State,
} from 'vscode-languageclient/node';
import { findExecutable, resolveServerCommand, ServerCommand } from '../command';
import { AgentEvent, EVENT, SETTINGS_SECTION } from '../protocol';
import { traceError, traceInfo } from './log';
import { pythonInterpreter, serverCommandSetting, serverSettings, userHome, workspaceRoot } from './settings';

export const CLIENT_ID = 'lspAgent';
export const CLIENT_NAME = 'LSP Agent';
const API_KEY_SECRET = 'lspAgent.apiKey';
const API_KEY_VARIABLE = 'LSP_AGENT_API_KEY';

/** What the rest of the extension does with what the server sends. */
export interface ServerHooks {
    onEvent(event: AgentEvent): void;
    onApplyEdit(params: ApplyWorkspaceEditParams, token: CancellationToken): Promise<ApplyWorkspaceEditResult>;
    onStateChange(running: boolean): void;
}

function isExecutable(candidate: string): boolean {
    try {
        fs.accessSync(candidate, fs.constants.X_OK);
        return fs.statSync(candidate).isFile();
    } catch {
        return false;
    }
}

/** The server's command line from the settings; throws with a sentence for a bad setting. */
export function serverCommand(): ServerCommand {
    const extensions = process.platform === 'win32' ? (process.env.PATHEXT ?? '.EXE').split(';') : [''];
    return resolveServerCommand({
        setting: serverCommandSetting(),
        findOnPath: (name) => findExecutable(name, process.env.PATH, isExecutable, { extensions }),
        python: pythonInterpreter(),
        variables: { workspaceFolder: workspaceRoot()?.uri.fsPath, userHome: userHome(), env: process.env },
    });
}

export class Server implements vscode.Disposable {
    private client: LanguageClient | undefined;
    private starting: Promise<LanguageClient | undefined> | undefined;
    private readonly disposables: vscode.Disposable[] = [];

    constructor(
        private readonly context: vscode.ExtensionContext,
        private readonly log: vscode.LogOutputChannel,
        private readonly hooks: ServerHooks,
    ) {
        this.disposables.push(
            vscode.workspace.onDidChangeConfiguration((change) => this.configurationChanged(change)),
        );
    }

    /** The running client, started on first use; undefined when it cannot start (the user is told). */
    async ensure(): Promise<LanguageClient | undefined> {
        if (this.client && this.client.state === State.Running) {
            return this.client;
        }
        this.starting ??= this.start().finally(() => {
            this.starting = undefined;
        });
        return this.starting;
    }

    /** The client if it is running now, without starting it. */
    get running(): LanguageClient | undefined {
        return this.client?.state === State.Running ? this.client : undefined;
    }

    async restart(): Promise<LanguageClient | undefined> {
        await this.stop();
        return this.ensure();
    }

    async stop(): Promise<void> {
        const client = this.client;
        this.client = undefined;
        if (client) {
            try {
                await client.dispose(2000);
            } catch (error) {
                traceError('stopping the server failed', error);
            }
        }
    }

    async getApiKey(): Promise<string | undefined> {
        return this.context.secrets.get(API_KEY_SECRET);
    }

    async setApiKey(key: string | undefined): Promise<void> {
        if (key) {
            await this.context.secrets.store(API_KEY_SECRET, key);
        } else {
            await this.context.secrets.delete(API_KEY_SECRET);
        }
    }

    dispose(): void {
        void this.stop();
        this.disposables.forEach((d) => d.dispose());
    }

    private async start(): Promise<LanguageClient | undefined> {
        const folder = workspaceRoot();
        if (!folder) {
            void vscode.window.showWarningMessage(
                'LSP Agent works on a folder: open a folder (File > Open Folder…), then ask again.',
            );
            return undefined;
        }
        let command: ServerCommand;
        try {
            command = serverCommand();
        } catch (error) {
            void this.startFailed((error as Error).message);
            return undefined;
        }
        const env: NodeJS.ProcessEnv = { ...process.env };
        const apiKey = await this.getApiKey();
        if (apiKey) {
            env[API_KEY_VARIABLE] = apiKey;
        }
        traceInfo(`starting the server (${command.source}): ${[command.command, ...command.args].join(' ')}`);
        const serverOptions: ServerOptions = {
            command: command.command,
            args: command.args,
            // No `transport`: TransportKind.stdio would append `--stdio`, which `serve` refuses.
            options: { cwd: folder.uri.fsPath, env },
        };
        const clientOptions: LanguageClientOptions = {
            documentSelector: [{ scheme: 'file' }],
            outputChannel: this.log,
            traceOutputChannel: this.log,
            revealOutputChannelOn: RevealOutputChannelOn.Never,
            initializationOptions: {
                [SETTINGS_SECTION]: serverSettings(folder.uri),
                lspAgentClient: { events: true, showsAnswers: true, settingName: 'lspAgent.%s' },
            },
            middleware: {
                workspace: {
                    configuration: (params, token, next) => this.configuration(params, token, next),
                },
            },
        };
        const client = new LanguageClient(CLIENT_ID, CLIENT_NAME, serverOptions, clientOptions);
        client.onNotification(EVENT, (event: AgentEvent) => this.hooks.onEvent(event));
        client.onRequest(ApplyWorkspaceEditRequest.type, (params, token) => this.hooks.onApplyEdit(params, token));
        client.onDidChangeState((change) => this.hooks.onStateChange(change.newState === State.Running));
        this.client = client;
        try {
            await client.start();
        } catch (error) {
            if (this.client === client) {
                this.client = undefined;
            }
            void client.dispose().catch(() => undefined);
            void this.startFailed(
                `could not start ${command.command}: ${error instanceof Error ? error.message : String(error)}`,
            );
            return undefined;
        }
        return this.client === client ? client : undefined;
    }

    /** Answer `workspace/configuration`: the `lspAgent` section is ours (only what the user set). */
    private async configuration(
        params: ConfigurationParams,
        token: CancellationToken,
        next: (params: ConfigurationParams, token: CancellationToken) => unknown,
    ): Promise<unknown[]> {
        const defaults = await Promise.resolve(next(params, token));
        const answers = Array.isArray(defaults) ? [...defaults] : params.items.map(() => null);
        params.items.forEach((item, index) => {
            if (item.section === SETTINGS_SECTION) {
                const scope = item.scopeUri ? vscode.Uri.parse(item.scopeUri) : workspaceRoot()?.uri;
                answers[index] = serverSettings(scope);
            }
        });
        return answers;
    }

    private configurationChanged(change: vscode.ConfigurationChangeEvent): void {
        const client = this.running;
        if (change.affectsConfiguration(`${SETTINGS_SECTION}.server.command`)) {
            if (client) {
                void vscode.window
                    .showInformationMessage('lspAgent.server.command changed: restart the LSP Agent server?', 'Restart')
                    .then((choice) => (choice === 'Restart' ? this.restart() : undefined));
            }
            return;
        }
        if (client && change.affectsConfiguration(SETTINGS_SECTION)) {
            // The server reads the section again through `workspace/configuration`.
            void client.sendNotification(DidChangeConfigurationNotification.type, { settings: null });
        }
    }

    private async startFailed(message: string): Promise<void> {
        traceError(message);
        const choice = await vscode.window.showErrorMessage(
            `LSP Agent: ${message}. Install lsp-agent (pip install lsp-agent) or set lspAgent.server.command.`,
            'Open Settings',
            'Show Log',
        );
        if (choice === 'Open Settings') {
            await vscode.commands.executeCommand('workbench.action.openSettings', 'lspAgent.server.command');
        } else if (choice === 'Show Log') {
            this.log.show();
        }
    }
}
