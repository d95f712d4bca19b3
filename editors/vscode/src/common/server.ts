/**
 * Starting, restarting and stopping `lsp-agent serve` over stdio with vscode-languageclient.
 *
 * The extension starts the process itself, so that a server that cannot start is one clear
 * notification that says what was tried and what the process said (its stderr), with Open
 * Settings and Show Log, instead of the language client's cascade of "couldn't create
 * connection" toasts. Until a start succeeds, every command that needs the server says the same.
 */
import { ChildProcess, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as vscode from 'vscode';
import {
    ApplyWorkspaceEditParams,
    ApplyWorkspaceEditRequest,
    ApplyWorkspaceEditResult,
    CancellationToken,
    CloseAction,
    ConfigurationParams,
    DidChangeConfigurationNotification,
    ErrorAction,
    LanguageClient,
    LanguageClientOptions,
    MessageActionItem,
    RevealOutputChannelOn,
    ShowMessageNotification,
    ShowMessageParams,
    ShowMessageRequest,
    ShowMessageRequestParams,
    State,
} from 'vscode-languageclient/node';
import { findExecutable, resolveServerCommand, ServerCommand } from '../command';
import { describeStartFailure, lastLine, StartFailure } from '../messages';
import { notify, openSetting } from '../notify';
import { AgentEvent, CLIENT_SECTION, ClientInfo, EVENT, SETTINGS_SECTION } from '../protocol';
import { traceError, traceInfo, traceWarn } from './log';
import { pythonInterpreter, serverCommandSetting, serverSettings, userHome, workspaceRoot } from './settings';

export const CLIENT_ID = 'lspAgent';
export const CLIENT_NAME = 'LSP Agent';
const API_KEY_SECRET = 'lspAgent.apiKey';
const API_KEY_VARIABLE = 'LSP_AGENT_API_KEY';
const SERVER_COMMAND_KEY = `${SETTINGS_SECTION}.server.command`;
/** Bytes of the server's stderr kept for the message when it fails. */
const STDERR_KEPT = 8192;
/** How long a server that was asked to stop may take before it is killed. */
const STOP_GRACE_MS = 2000;
/**
 * How long a start that fell back to `lsp-agent` on PATH or Python waits for
 * `lspAgent.server.command` before saying it failed: a reloading remote window (SSH,
 * containers, code-server) may activate the extension before its machine settings arrive.
 */
const SETTING_GRACE_MS = 3000;

/** What this extension does itself, declared to the server in `initializationOptions`. */
export const CLIENT_INFO: ClientInfo = {
    events: true,
    showsAnswers: true,
    settingName: `${SETTINGS_SECTION}.%s`,
    apiKeyName: 'a key with LSP Agent: Set API Key',
};

export type ServerState = 'running' | 'stopped' | 'failed';

/** What the rest of the extension does with what the server sends. */
export interface ServerHooks {
    onEvent(event: AgentEvent): void;
    onApplyEdit(params: ApplyWorkspaceEditParams, token: CancellationToken): Promise<ApplyWorkspaceEditResult>;
    onQuestion(params: ShowMessageRequestParams, token: CancellationToken): Promise<MessageActionItem | null>;
    /** The state changed; `message` says why it failed. */
    onStateChange(state: ServerState, message?: string): void;
    /**
     * VS Code runs one of the server's commands (a code action of the light bulb, another
     * extension): the extension's own handling, or undefined to send it as it came.
     */
    onCommand?(command: string, args: unknown[]): Promise<unknown> | undefined;
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

/** The server process: started by us, its stderr's end kept, its end awaitable. */
class ServerProcess {
    private stderr = '';
    readonly closed: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;

    private constructor(readonly child: ChildProcess) {
        child.stderr?.on('data', (data: Buffer) => {
            this.stderr = (this.stderr + data.toString('utf8')).slice(-STDERR_KEPT);
        });
        this.closed = new Promise((resolve) => child.once('close', (code, signal) => resolve({ code, signal })));
    }

    /** Spawn `command`; resolves once the process runs, or with the spawn error's code. */
    static async spawn(command: ServerCommand, cwd: string, env: NodeJS.ProcessEnv): Promise<ServerProcess | string> {
        const child = spawn(command.command, command.args, { cwd, env, stdio: 'pipe' });
        return new Promise((resolve) => {
            child.once('spawn', () => resolve(new ServerProcess(child)));
            child.once('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? error.message));
        });
    }

    get stderrTail(): string {
        return this.stderr;
    }

    get alive(): boolean {
        return this.child.exitCode === null && this.child.signalCode === null;
    }

    /** The exit, waited for at most `ms` (a stuck process is not worth waiting for). */
    async exited(ms: number): Promise<{ code: number | null; signal: NodeJS.Signals | null } | undefined> {
        let timer: NodeJS.Timeout | undefined;
        const late = new Promise<undefined>((resolve) => {
            timer = setTimeout(() => resolve(undefined), ms);
        });
        try {
            return await Promise.race([this.closed, late]);
        } finally {
            clearTimeout(timer);
        }
    }

    /** Let it end on its own (its stdin closed), else kill it. */
    async stop(): Promise<void> {
        if (this.alive && (await this.exited(STOP_GRACE_MS)) === undefined) {
            this.child.kill('SIGTERM');
        }
    }
}

/** The language client, minus its own notifications: this extension reports failures itself. */
class AgentClient extends LanguageClient {
    override error(message: string, data?: unknown): void {
        super.error(message, data, false);
    }
}

export class Server implements vscode.Disposable {
    private client: LanguageClient | undefined;
    private process: ServerProcess | undefined;
    private starting: Promise<LanguageClient | undefined> | undefined;
    /** Why the last start failed (cleared by a start that works). */
    private failure: string | undefined;
    /** The command line the last start used, and where it came from. */
    private command: ServerCommand | undefined;
    private readonly disposables: vscode.Disposable[] = [];
    /** The newest version of each document the server has been sent (`didChange`), by URI. */
    private readonly sent = new Map<string, number>();
    private readonly sentChanged = new vscode.EventEmitter<void>();

    constructor(
        private readonly context: vscode.ExtensionContext,
        private readonly log: vscode.LogOutputChannel,
        private readonly hooks: ServerHooks,
    ) {
        this.disposables.push(
            vscode.workspace.onDidChangeConfiguration((change) => this.configurationChanged(change)),
        );
    }

    /**
     * The running client, started on first use (and again after a failure); undefined when it
     * cannot start, after the user was shown why.
     */
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

    /** Why the server is not running, after a start failed. */
    get failed(): string | undefined {
        return this.failure;
    }

    async restart(): Promise<LanguageClient | undefined> {
        await this.stop();
        return this.ensure();
    }

    async stop(): Promise<void> {
        const client = this.client;
        const launched = this.process;
        this.client = undefined;
        this.process = undefined;
        if (client) {
            try {
                await client.dispose(STOP_GRACE_MS);
            } catch (error) {
                traceError('stopping the server failed', error);
            }
        }
        await launched?.stop();
    }

    /**
     * Resolves once the server has been sent `uri` at `version` or later (its `didChange` is on
     * the wire, so an answer sent after this reaches the server after it), or after `ms`.
     */
    async sentVersion(uri: string, version: number, ms = STOP_GRACE_MS): Promise<void> {
        if (!this.running || (this.sent.get(uri) ?? 0) >= version) {
            return;
        }
        await new Promise<void>((resolve) => {
            const timer = setTimeout(done, ms);
            const listener = this.sentChanged.event(() => {
                if ((this.sent.get(uri) ?? 0) >= version) {
                    done();
                }
            });
            function done(): void {
                clearTimeout(timer);
                listener.dispose();
                resolve();
            }
        });
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
            this.command = command;
        } catch (error) {
            this.fail(`LSP Agent could not start its server: ${(error as Error).message}.`);
            return undefined;
        }
        const env: NodeJS.ProcessEnv = { ...process.env };
        const apiKey = await this.getApiKey();
        if (apiKey) {
            env[API_KEY_VARIABLE] = apiKey;
        }
        const line = [command.command, ...command.args].join(' ');
        traceInfo(`starting the server (${command.source}): ${line}`);
        const launched = await ServerProcess.spawn(command, folder.uri.fsPath, env);
        if (typeof launched === 'string') {
            if (command.source !== 'setting' && (await this.settingArrives())) {
                return this.start(); // the user's command came late: it is the one to run
            }
            this.startFailed({ command, spawnError: launched, pathVariable: process.env.PATH });
            return undefined;
        }
        let running = false;
        const clientOptions: LanguageClientOptions = {
            documentSelector: [{ scheme: 'file' }],
            outputChannel: this.log,
            traceOutputChannel: this.log,
            revealOutputChannelOn: RevealOutputChannelOn.Never,
            initializationOptions: { [SETTINGS_SECTION]: serverSettings(folder.uri), [CLIENT_SECTION]: CLIENT_INFO },
            initializationFailedHandler: () => false,
            errorHandler: {
                error: (_error, _message, count) => ({
                    action: (count ?? 0) <= 3 ? ErrorAction.Continue : ErrorAction.Shutdown,
                    handled: true,
                }),
                closed: () => {
                    if (running && this.process === launched) {
                        void this.stopped(command, launched);
                    }
                    return { action: CloseAction.DoNotRestart, handled: true };
                },
            },
            middleware: {
                workspace: {
                    configuration: (params, token, next) => this.configuration(params, token, next),
                },
                executeCommand: (command, args, next) => this.hooks.onCommand?.(command, args) ?? next(command, args),
                didChange: async (event, next) => {
                    await next(event);
                    const uri = event.document.uri.toString();
                    this.sent.set(uri, Math.max(this.sent.get(uri) ?? 0, event.document.version));
                    this.sentChanged.fire();
                },
            },
        };
        const client = new AgentClient(CLIENT_ID, CLIENT_NAME, () => Promise.resolve(launched.child), clientOptions);
        client.onNotification(EVENT, (event: AgentEvent) => this.hooks.onEvent(event));
        client.onNotification(ShowMessageNotification.type, (params) => this.showMessage(params));
        client.onRequest(ShowMessageRequest.type, (params, token) => this.hooks.onQuestion(params, token));
        client.onRequest(ApplyWorkspaceEditRequest.type, (params, token) => this.hooks.onApplyEdit(params, token));
        client.onDidChangeState((change) => {
            if (change.newState === State.Running) {
                this.hooks.onStateChange('running');
            } else if (change.newState === State.Stopped && this.failure === undefined) {
                this.hooks.onStateChange('stopped');
            }
        });
        this.client = client;
        this.process = launched;
        let failed: string | undefined;
        try {
            await client.start();
        } catch (error) {
            failed = error instanceof Error ? error.message : String(error);
        }
        // A connection that closes during `initialize` can leave `start()` resolved though the
        // client never ran: the state says.
        if (failed === undefined && client.state !== State.Running) {
            failed = 'the connection closed before the server answered';
        }
        if (failed !== undefined) {
            const ended = await launched.exited(STOP_GRACE_MS);
            if (this.client === client) {
                this.client = undefined;
                this.process = undefined;
            }
            void client.dispose().catch(() => undefined);
            void launched.stop();
            if (command.source !== 'setting' && (await this.settingArrives())) {
                return this.start(); // the user's command came late: it is the one to run
            }
            this.startFailed({
                command,
                exitCode: ended?.code,
                signal: ended?.signal,
                stderr: launched.stderrTail,
                error: failed,
                pathVariable: process.env.PATH,
            });
            return undefined;
        }
        if (this.client !== client) {
            return undefined;
        }
        running = true;
        this.failure = undefined;
        return client;
    }

    /** Whether `lspAgent.server.command` gives the command, or comes to within `SETTING_GRACE_MS`. */
    private async settingArrives(): Promise<boolean> {
        const isSet = (): boolean => this.configuredCommand()?.source === 'setting';
        if (isSet()) {
            return true;
        }
        return new Promise<boolean>((resolve) => {
            const timer = setTimeout(() => done(false), SETTING_GRACE_MS);
            const listener = vscode.workspace.onDidChangeConfiguration((change) => {
                if (change.affectsConfiguration(SERVER_COMMAND_KEY) && isSet()) {
                    done(true);
                }
            });
            function done(arrived: boolean): void {
                clearTimeout(timer);
                listener.dispose();
                resolve(arrived);
            }
        });
    }

    /** The server stopped on its own after it had started. */
    private async stopped(command: ServerCommand, launched: ServerProcess): Promise<void> {
        const ended = await launched.exited(STOP_GRACE_MS);
        this.client = undefined;
        this.process = undefined;
        const how = ended?.signal ? `killed by ${ended.signal}` : `exited with code ${ended?.code ?? 'unknown'}`;
        const said = lastLine(launched.stderrTail);
        const message = `LSP Agent: the server stopped (${how})${said ? `: ${said}` : ''}. The next command starts it again.`;
        traceError(`${message}\n${[command.command, ...command.args].join(' ')}`);
        this.failure = message;
        this.hooks.onStateChange('failed', message);
        await notify('error', message, [
            { title: 'Restart Server', run: () => this.restart() },
            { title: 'Show Log', run: () => this.log.show() },
        ]);
    }

    private startFailed(failure: StartFailure): void {
        const { message, detail } = describeStartFailure(failure);
        traceError(`${message}\n${detail}`);
        this.fail(message);
    }

    /** Say why the server is not running, with the way to fix it. */
    private fail(message: string): void {
        this.failure = message;
        this.hooks.onStateChange('failed', message);
        void notify(
            'error',
            message,
            [
                { title: 'Open Settings', run: () => openSetting(SERVER_COMMAND_KEY) },
                { title: 'Show Log', run: () => this.log.show() },
            ],
            [SERVER_COMMAND_KEY],
        );
    }

    /** `window/showMessage`: as the client would, plus a button for each setting it names. */
    private showMessage(params: ShowMessageParams): void {
        const severity = params.type === 1 ? 'error' : params.type === 2 ? 'warning' : 'info';
        if (severity !== 'info') {
            traceWarn(params.message);
        }
        void notify(severity, params.message);
    }

    /** The command line the settings give now (undefined when they are wrong). */
    private configuredCommand(): ServerCommand | undefined {
        try {
            return serverCommand();
        } catch {
            return undefined;
        }
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
        if (change.affectsConfiguration(SERVER_COMMAND_KEY)) {
            void this.commandChanged();
            return;
        }
        const client = this.running;
        if (client && change.affectsConfiguration(SETTINGS_SECTION)) {
            // The server reads the section again through `workspace/configuration`.
            void client.sendNotification(DidChangeConfigurationNotification.type, { settings: null });
        }
    }

    /** `lspAgent.server.command` changed: offer a restart, or start at once after a failure. */
    private async commandChanged(): Promise<void> {
        await this.starting; // a start under way used the old command: let it end first
        if (this.running && this.command && sameCommand(this.command, this.configuredCommand())) {
            return; // the start under way took the new command already
        }
        if (this.running && this.command?.source !== 'setting') {
            // The server was started before the setting was known (a reloading window may
            // activate the extension before its settings arrive) or while none was set: the
            // user's command is the one to run, without a question.
            traceInfo(`${SERVER_COMMAND_KEY} set: starting the server with it`);
            await this.restart();
        } else if (this.running) {
            const choice = await vscode.window.showInformationMessage(
                `${SERVER_COMMAND_KEY} changed: restart the LSP Agent server?`,
                'Restart',
            );
            if (choice === 'Restart') {
                await this.restart();
            }
        } else if (this.failure !== undefined) {
            // The user is fixing the command that failed: try it at once.
            traceInfo(`${SERVER_COMMAND_KEY} changed: starting the server again`);
            await this.ensure();
        }
    }
}

function sameCommand(a: ServerCommand, b: ServerCommand | undefined): boolean {
    return b !== undefined && a.command === b.command && a.args.length === b.args.length && a.args.every((arg, i) => arg === b.args[i]);
}
