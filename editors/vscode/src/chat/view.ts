/**
 * The chat view: a webview in its own activity-bar container (and, on demand, in an editor tab)
 * that shows the conversation of the session the next Ask continues, and takes the next prompt.
 *
 * It is one more view of the turns (`TurnView`): a turn asked from the palette shows here as
 * well as one asked here. The conversation itself comes from the server (`lspAgent.history`)
 * whenever the session changes or the window reloads, then follows the turn's events. Edits are
 * still reviewed in the diff editor (`Review`) and questions answered through the
 * `window/showMessageRequest` the extension holds (`Questions`): the chat's buttons decide them.
 */
import { randomBytes } from 'node:crypto';
import * as path from 'node:path';
import * as vscode from 'vscode';
import { ExecuteCommandRequest } from 'vscode-languageclient/node';
import { traceError } from '../common/log';
import type { Server, ServerState } from '../common/server';
import { AgentEvent, AskResult, HISTORY, HistoryItem, SESSIONS, SessionInfo, STATUS, Status, UNDO_TURN, UndoResult } from '../protocol';
import type { Questions } from '../questions';
import type { Review } from '../review';
import type { Turn, Turns, TurnView } from '../turns';
import { Change, ChatItem, ChatModel, SelectionRef, withContextFiles } from './model';
import type { ChatState, FromWebview, ToWebview } from './wire';

export const CHAT_VIEW = 'lspAgent.chat';
export const CHAT_PANEL = 'lspAgent.chatPanel';
const SESSION_KEY = 'lspAgent.chat.session';
const PROMPTS_KEY = 'lspAgent.chat.prompts';
const PROMPTS_KEPT = 100;
/** Files the `#` picker lists at most. */
const FILES_LISTED = 5000;

/** The active editor's file and selection, as the next prompt would send it. */
interface EditorContext {
    ref: SelectionRef;
    uri: string;
    range?: { start: { line: number; character: number }; end: { line: number; character: number } };
}

export class ChatView implements TurnView, vscode.WebviewViewProvider, vscode.WebviewPanelSerializer, vscode.Disposable {
    private readonly model: ChatModel;
    private readonly webviews = new Set<vscode.Webview>();
    private readonly disposables: vscode.Disposable[] = [];
    private turns: Turns | undefined;
    private view: vscode.WebviewView | undefined;
    private panel: vscode.WebviewPanel | undefined;
    /** The turn of the session shown that runs now. */
    private shown: Turn | undefined;
    /** Whether the model holds the session `Turns` continues (else it loads when a view opens). */
    private loaded = false;
    private loading: Promise<void> | undefined;
    /** Files added with `#` for the next prompt (relative paths). */
    private files: string[] = [];
    private editor: vscode.TextEditor | undefined;
    private offline: string | undefined;
    private lastState = '';
    /** How much of each streaming answer the webviews have: the rest goes as `append`. */
    private readonly sentText = new Map<number, number>();

    constructor(
        private readonly context: vscode.ExtensionContext,
        private readonly server: Server,
        private readonly questions: Questions,
        private readonly review: Review,
        private readonly root: string | undefined,
    ) {
        this.model = new ChatModel(root);
        this.editor = fileEditor(vscode.window.activeTextEditor);
        this.disposables.push(
            vscode.window.registerWebviewViewProvider(CHAT_VIEW, this),
            vscode.window.registerWebviewPanelSerializer(CHAT_PANEL, this),
            review.onDidChangeReview((shown) => {
                this.push(this.model.setReview(shown));
                if (shown) {
                    this.announce(`An edit of ${shown.files.join(', ') || shown.label} waits for your review: Accept or Reject.`);
                }
            }),
            vscode.window.onDidChangeActiveTextEditor((editor) => {
                // The chat in an editor tab, the output, a review's proposed side: the file the
                // user was in stays the context.
                this.editor = fileEditor(editor) ?? (this.editor && vscode.window.visibleTextEditors.includes(this.editor) ? this.editor : undefined);
                this.pushState();
            }),
            vscode.window.onDidChangeTextEditorSelection((change) => {
                if (change.textEditor === this.editor) {
                    this.pushState();
                }
            }),
            vscode.window.onDidChangeVisibleTextEditors((editors) => {
                if (this.editor && !editors.includes(this.editor)) {
                    this.editor = undefined;
                    this.pushState();
                }
            }),
        );
    }

    /** Follow `turns`: the session it continues is the one shown (restored from the last window). */
    attach(turns: Turns): void {
        this.turns = turns;
        const saved = this.context.workspaceState.get<string>(SESSION_KEY);
        if (saved && turns.currentSession === undefined) {
            turns.select(saved);
        }
        this.disposables.push(turns.onDidChangeSession((session) => this.sessionChanged(session)));
    }

    /** Whether a question of `session` is in sight in the conversation. */
    showsQuestionsOf(session: string | undefined): boolean {
        const visible = this.view?.visible === true || this.panel?.visible === true;
        return visible && this.loaded && (session === undefined || session === this.model.session);
    }

    /** Show the chat in its view (and put the cursor in the input). */
    async show(): Promise<void> {
        await vscode.commands.executeCommand(`${CHAT_VIEW}.focus`);
        this.post({ type: 'focus' });
    }

    /** Show the chat in an editor tab. */
    openInEditor(): void {
        if (this.panel) {
            this.panel.reveal();
            return;
        }
        const panel = vscode.window.createWebviewPanel(CHAT_PANEL, 'LSP Agent Chat', vscode.ViewColumn.Beside, {
            enableScripts: true,
            localResourceRoots: [this.webviewRoot()],
        });
        this.setUpPanel(panel);
    }

    async deserializeWebviewPanel(panel: vscode.WebviewPanel): Promise<void> {
        this.setUpPanel(panel);
    }

    resolveWebviewView(view: vscode.WebviewView): void {
        this.view = view;
        this.setUp(view.webview);
        view.onDidDispose(() => {
            this.webviews.delete(view.webview);
            if (this.view === view) {
                this.view = undefined;
            }
        });
    }

    /** The server's state: when it is not running, the input says so. */
    setServer(state: ServerState, message?: string): void {
        this.offline = state === 'failed' ? (message ?? 'The server is not running.') : undefined;
        this.pushState();
    }

    /** Undo `turn` of the session shown (undefined: its last turn with edits), through the review. */
    async undo(turn?: number): Promise<void> {
        const session = this.model.session ?? this.turns?.currentSession;
        if (!session) {
            void vscode.window.showInformationMessage('LSP Agent: no session to undo a turn of yet.');
            return;
        }
        if (this.turns?.isRunning(session)) {
            void vscode.window.showInformationMessage('LSP Agent: wait for the turn to end (or stop it) before undoing one.');
            return;
        }
        turn ??= this.model.session === session ? this.model.lastUndoable() : undefined;
        if (turn !== undefined) {
            this.push(this.model.setUndo(turn, 'running'));
        }
        const answer = await this.request<UndoResult>(UNDO_TURN, turn !== undefined ? { session, turn } : { session });
        if ('error' in answer) {
            if (turn !== undefined) {
                this.push(this.model.setUndo(turn, 'failed'));
            }
            this.push(this.model.addNote(`Undo: ${answer.error}`, 'warning'));
            return;
        }
        const result = answer.value;
        const refused = (result.refused ?? []).map((r) => `${r.path} (${r.why})`).join('; ');
        this.push(this.model.setUndo(result.turn, result.applied ? 'done' : 'failed', result.files));
        if (!result.proposed) {
            this.push(this.model.addNote(`Turn ${result.turn} was not undone: ${refused || 'nothing to restore'}.`, 'warning'));
        } else if (!result.applied) {
            this.push(this.model.addNote(`The undo of turn ${result.turn} was not applied.`, 'warning'));
        } else if (refused) {
            this.push(this.model.addNote(`Left as they are: ${refused}.`, 'warning'));
        }
        this.announce(result.applied ? `Turn ${result.turn} undone.` : `Turn ${result.turn} was not undone.`);
    }

    turnStarted(turn: Turn): void {
        if (this.shown || turn.target !== this.model.session || !this.loaded) {
            return;
        }
        this.shown = turn;
        this.push(this.model.beginTurn(turn.prompt, turn.selection));
    }

    turnEvent(turn: Turn, event: AgentEvent): void {
        if (turn !== this.shown) {
            return;
        }
        if (this.model.session === undefined) {
            this.model.session = event.session; // a first turn made the session
        }
        this.push(this.model.event(event));
        if (event.kind === 'question' && event.state === 'open') {
            this.announce(`LSP Agent asks about ${event.name}: ${event.text}`);
        }
    }

    turnEnded(turn: Turn, outcome: { result: AskResult } | { error: string; cancelled: boolean }): void {
        if (turn !== this.shown) {
            return;
        }
        this.shown = undefined;
        if ('result' in outcome) {
            const { status, answer, error } = outcome.result;
            this.push(this.model.endTurn({ status, answer, error }));
            this.announce(status === 'completed' ? 'The answer is complete.' : `The turn ended: ${status}${error ? `: ${error}` : ''}.`);
        } else {
            const status = outcome.cancelled ? 'cancelled' : 'failed';
            this.push(this.model.endTurn({ status, error: outcome.cancelled ? undefined : outcome.error }));
            this.announce(`The turn ended: ${status}.`);
        }
    }

    note(): void {
        // The extension's notes (the status, a new session) belong to the output channel.
    }

    dispose(): void {
        this.panel?.dispose();
        this.disposables.forEach((d) => d.dispose());
    }

    private setUpPanel(panel: vscode.WebviewPanel): void {
        this.panel = panel;
        panel.iconPath = vscode.Uri.joinPath(this.context.extensionUri, 'media', 'chat.svg');
        panel.webview.options = { enableScripts: true, localResourceRoots: [this.webviewRoot()] };
        this.setUp(panel.webview);
        panel.onDidDispose(() => {
            this.webviews.delete(panel.webview);
            if (this.panel === panel) {
                this.panel = undefined;
            }
        });
    }

    private setUp(webview: vscode.Webview): void {
        webview.options = { enableScripts: true, localResourceRoots: [this.webviewRoot()] };
        webview.html = page(webview, this.webviewRoot(), webview === this.view?.webview ? 'view' : 'panel');
        this.webviews.add(webview);
        webview.onDidReceiveMessage((message: FromWebview) => {
            this.handle(message, webview).catch((error) => traceError(`chat: ${message.type} failed`, error));
        });
    }

    private webviewRoot(): vscode.Uri {
        return vscode.Uri.joinPath(this.context.extensionUri, 'out', 'webview');
    }

    private async handle(message: FromWebview, webview: vscode.Webview): Promise<void> {
        switch (message.type) {
            case 'ready':
                await this.ensureLoaded();
                this.reset(webview);
                break;
            case 'send':
                await this.send(message.text, message.useSelection);
                break;
            case 'stop':
                await this.turns?.cancelSession(this.model.session);
                break;
            case 'newSession':
                await this.turns?.newSession(true);
                this.post({ type: 'focus' });
                break;
            case 'pickSession':
                await this.turns?.showSessions(true);
                this.post({ type: 'focus' });
                break;
            case 'addFile':
                await this.addFile();
                break;
            case 'removeFile':
                this.files = this.files.filter((file) => file !== message.path);
                this.pushState();
                break;
            case 'answer':
                this.answer(message.key, message.action);
                break;
            case 'review':
                if (message.action === 'accept') {
                    await this.review.accept();
                } else if (message.action === 'reject') {
                    await this.review.reject();
                } else {
                    await this.review.reveal();
                }
                break;
            case 'undo':
                await this.undo(message.turn);
                break;
            case 'copy':
                await vscode.env.clipboard.writeText(message.text);
                vscode.window.setStatusBarMessage('$(copy) LSP Agent: code copied', 3000);
                break;
            case 'insert':
                await this.insert(message.text);
                break;
            case 'open':
                await this.open(message.target);
                break;
        }
    }

    private async send(text: string, useSelection: boolean): Promise<void> {
        const turns = this.turns;
        if (!turns || !text.trim()) {
            return;
        }
        await this.ensureLoaded();
        this.remember(text);
        const options: Parameters<Turns['ask']>[2] = { fromChat: true };
        const context = useSelection ? this.editorContext() : undefined;
        if (context) {
            options.uri = context.uri;
            options.range = context.range;
            options.selection = context.ref;
        }
        const prompt = withContextFiles(text.trim(), this.files);
        this.files = [];
        this.pushState();
        await turns.ask(prompt, false, options);
    }

    private answer(key: number, action: string): void {
        const item = this.model.items.find((i) => i.key === key);
        if (item?.kind !== 'question') {
            return;
        }
        if (this.questions.answerFromChat(item.id, item.text, action)) {
            this.push(this.model.answering(key));
        } else {
            vscode.window.setStatusBarMessage('$(info) LSP Agent: that question was already closed; nothing was sent.', 10_000);
        }
    }

    /** The `#` picker: one file of the workspace, added for the next prompt. */
    private async addFile(): Promise<void> {
        const found = await vscode.workspace.findFiles('**/*', '{**/node_modules/**,**/.git/**,**/.venv/**,**/__pycache__/**}', FILES_LISTED);
        const items = found
            .map((uri) => vscode.workspace.asRelativePath(uri, false))
            .filter((rel) => !this.files.includes(rel))
            .sort()
            .map((rel) => ({ label: path.basename(rel), description: path.dirname(rel) === '.' ? '' : path.dirname(rel), rel }));
        const picked = await vscode.window.showQuickPick(items, {
            title: 'LSP Agent: Add a File as Context',
            placeHolder: 'A file the agent reads with your next prompt',
            matchOnDescription: true,
        });
        if (picked) {
            this.files.push(picked.rel);
            this.pushState();
        }
        this.post({ type: 'focus' });
    }

    private async insert(text: string): Promise<void> {
        const editor = this.editor;
        if (!editor) {
            void vscode.window.showInformationMessage('LSP Agent: open a file and put the cursor where the code goes, then Insert again.');
            return;
        }
        const selections = editor.selections;
        await editor.edit((edit) => selections.forEach((selection) => edit.replace(selection, text)));
        await vscode.window.showTextDocument(editor.document, editor.viewColumn);
    }

    private async open(target: string): Promise<void> {
        const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(target)?.[1]?.toLowerCase();
        if (scheme === 'http' || scheme === 'https' || scheme === 'mailto') {
            await vscode.env.openExternal(vscode.Uri.parse(target));
            return;
        }
        if (scheme !== undefined && scheme !== 'file') {
            return; // nothing else leaves the chat
        }
        const [file, line] = target.replace(/^file:\/\//, '').split(/#L?|:(?=\d+$)/);
        if (!file) {
            return;
        }
        const uri = path.isAbsolute(file) || !this.root ? vscode.Uri.file(file) : vscode.Uri.file(path.join(this.root, file));
        const document = await vscode.workspace.openTextDocument(uri);
        const at = Math.max(0, Number(line ?? 1) - 1);
        await vscode.window.showTextDocument(document, { selection: new vscode.Range(at, 0, at, 0), preview: true });
    }

    private editorContext(): EditorContext | undefined {
        const editor = this.editor;
        if (!editor) {
            return undefined;
        }
        const rel = vscode.workspace.asRelativePath(editor.document.uri, false);
        const selection = editor.selection;
        if (selection.isEmpty) {
            return { ref: { path: rel }, uri: editor.document.uri.toString() };
        }
        // A selection that ends at the start of a line ends on the line before.
        const endLine = selection.end.character === 0 && selection.end.line > selection.start.line ? selection.end.line : selection.end.line + 1;
        return {
            ref: { path: rel, startLine: selection.start.line + 1, endLine },
            uri: editor.document.uri.toString(),
            range: {
                start: { line: selection.start.line, character: selection.start.character },
                end: { line: selection.end.line, character: selection.end.character },
            },
        };
    }

    /** The session `Turns` continues changed: show it (a turn that made it is shown already). */
    private sessionChanged(session: string | undefined): void {
        void this.context.workspaceState.update(SESSION_KEY, session);
        if (session === this.model.session) {
            return;
        }
        if (this.shown && this.model.session === undefined && this.shown.session === session) {
            this.model.session = session; // the turn shown made it: nothing else to show
            this.pushState();
            return;
        }
        this.loaded = false;
        if (this.webviews.size > 0) {
            void this.ensureLoaded().then(() => this.resetAll());
        }
    }

    /** Load the session `Turns` continues (the most recent stored one when none), once. */
    private ensureLoaded(): Promise<void> {
        if (this.loaded) {
            return Promise.resolve();
        }
        this.loading ??= this.load().finally(() => {
            this.loading = undefined;
        });
        return this.loading;
    }

    private async load(): Promise<void> {
        const turns = this.turns;
        if (!turns) {
            return;
        }
        let session = turns.currentSession;
        if (session === undefined) {
            const sessions = await this.request<SessionInfo[]>(SESSIONS, {});
            session = 'value' in sessions ? sessions.value[0]?.session : undefined;
            if (session !== undefined && turns.currentSession === undefined) {
                turns.select(session); // what the server would continue anyway, now in sight
            }
        }
        let history: HistoryItem[] = [];
        let note: string | undefined;
        if (session !== undefined) {
            const answer = await this.request<HistoryItem[]>(HISTORY, { session });
            if ('value' in answer) {
                history = answer.value;
            } else {
                note = `The conversation of session ${session} could not be read: ${answer.error}`;
            }
        }
        if (session !== turns.currentSession) {
            return this.load(); // the session changed meanwhile
        }
        this.shown = undefined;
        this.model.load(session, history);
        if (note) {
            this.model.addNote(note, 'warning');
        }
        if (session !== undefined && turns.isRunning(session)) {
            this.model.continueTurn();
            this.shown = turns.runningTurn(session);
        }
        this.loaded = true;
        if (session !== undefined) {
            const status = await this.request<Status>(STATUS, { session });
            const entry = 'value' in status ? status.value.sessions.find((s) => s.session === session) : undefined;
            if (entry) {
                this.model.setContext(entry.contextTokens, entry.contextWindow ?? ('value' in status ? status.value.contextWindow : undefined));
            }
        }
    }

    /** Send a command to the server; what went wrong as a sentence (no notification). */
    private async request<T>(command: string, argument: object): Promise<{ value: T } | { error: string }> {
        const client = await this.server.ensure();
        if (!client) {
            return { error: 'the server is not running' };
        }
        try {
            return { value: (await client.sendRequest(ExecuteCommandRequest.type, { command, arguments: [argument] })) as T };
        } catch (error) {
            return { error: error instanceof Error ? error.message : String(error) };
        }
    }

    private remember(prompt: string): void {
        const prompts = this.prompts().filter((p) => p !== prompt);
        prompts.push(prompt);
        void this.context.workspaceState.update(PROMPTS_KEY, prompts.slice(-PROMPTS_KEPT));
    }

    private prompts(): string[] {
        return this.context.workspaceState.get<string[]>(PROMPTS_KEY) ?? [];
    }

    private state(): ChatState {
        const session = this.model.session;
        return {
            session,
            title: this.model.title,
            running: this.model.running,
            offline: this.offline,
            summary: this.model.summary(),
            selection: this.editorContext()?.ref,
            files: [...this.files],
        };
    }

    private reset(webview: vscode.Webview): void {
        this.lastState = JSON.stringify(this.state());
        this.sentText.clear();
        for (const item of this.model.items) {
            if (item.kind === 'answer' && item.streaming) {
                this.sentText.set(item.key, item.text.length);
            }
        }
        void webview.postMessage({ type: 'reset', items: this.model.items, state: this.state(), prompts: this.prompts() } satisfies ToWebview);
    }

    private resetAll(): void {
        this.webviews.forEach((webview) => this.reset(webview));
    }

    private push(change: Change): void {
        for (const key of change.remove) {
            this.post({ type: 'remove', key });
        }
        const sent = new Set<ChatItem>();
        for (const item of change.upsert) {
            const at = this.model.items.indexOf(item);
            if (at < 0 || sent.has(item)) {
                continue;
            }
            sent.add(item);
            const had = this.sentText.get(item.key);
            if (item.kind === 'answer' && item.streaming && had !== undefined && had <= item.text.length) {
                // A streamed chunk (the model only appends to it): only what is new crosses over.
                this.post({ type: 'append', key: item.key, text: item.text.slice(had) });
                this.sentText.set(item.key, item.text.length);
                continue;
            }
            if (item.kind === 'answer' && item.streaming) {
                this.sentText.set(item.key, item.text.length);
            } else {
                this.sentText.delete(item.key);
            }
            this.post({ type: 'upsert', item, before: this.model.items[at + 1]?.key });
        }
        this.pushState();
    }

    private pushState(): void {
        const state = this.state();
        const json = JSON.stringify(state);
        if (json !== this.lastState) {
            this.lastState = json;
            this.post({ type: 'state', state });
        }
    }

    private announce(text: string): void {
        this.post({ type: 'announce', text });
    }

    private post(message: ToWebview): void {
        for (const webview of this.webviews) {
            webview.postMessage(message).then(undefined, (error: unknown) => traceError('chat: postMessage failed', error));
        }
    }
}

function fileEditor(editor: vscode.TextEditor | undefined): vscode.TextEditor | undefined {
    return editor && editor.document.uri.scheme === 'file' ? editor : undefined;
}

/** The chat's page: the bundled script (by nonce) and stylesheet, nothing else allowed. */
function page(webview: vscode.Webview, root: vscode.Uri, host: 'view' | 'panel'): string {
    const nonce = randomBytes(18).toString('base64');
    const script = webview.asWebviewUri(vscode.Uri.joinPath(root, 'chat.js'));
    const style = webview.asWebviewUri(vscode.Uri.joinPath(root, 'chat.css'));
    const csp = [
        "default-src 'none'",
        `img-src ${webview.cspSource} data:`,
        `style-src ${webview.cspSource}`,
        `font-src ${webview.cspSource}`,
        `script-src 'nonce-${nonce}'`,
    ].join('; ');
    return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="UTF-8">
<meta http-equiv="Content-Security-Policy" content="${csp}">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<link rel="stylesheet" href="${style}">
<title>LSP Agent Chat</title>
</head>
<body class="in-${host}">
<header class="chat-header">
  <button id="session" class="session-button" title="Pick a session (new, or an earlier one)" aria-label="Pick a session">
    <i class="codicon codicon-comment-discussion" aria-hidden="true"></i><span id="session-title">New conversation</span><i class="codicon codicon-chevron-down" aria-hidden="true"></i>
  </button>
  <span id="usage" class="usage"></span>
  <button id="new" class="icon-button in-panel-only" title="New Session" aria-label="New session"><i class="codicon codicon-add" aria-hidden="true"></i></button>
</header>
<main id="log" aria-label="Conversation"></main>
<div id="welcome" hidden>
  <i class="codicon codicon-hubot" aria-hidden="true"></i>
  <h2>Ask the agent about your code</h2>
  <p>The file and selection you are in go along with your prompt; <kbd>#</kbd> adds more files. Every change the agent wants is shown for your review before it lands.</p>
</div>
<footer class="composer">
  <div id="notice" role="alert" hidden></div>
  <div id="chips" class="chips" aria-label="Context sent with the prompt" hidden></div>
  <textarea id="input" rows="3" aria-label="Ask the agent" aria-describedby="hint" placeholder="Ask the agent… (# adds a file)"></textarea>
  <div class="actions">
    <button id="attach" class="icon-button" title="Add a File as Context (#)" aria-label="Add a file as context"><i class="codicon codicon-attach" aria-hidden="true"></i></button>
    <span id="hint" class="hint">Enter sends · Shift+Enter new line · ↑ ↓ earlier prompts</span>
    <button id="send" class="primary" aria-label="Send"><i class="codicon codicon-send" aria-hidden="true"></i><span>Send</span></button>
    <button id="stop" class="secondary" aria-label="Stop the turn" hidden><i class="codicon codicon-debug-stop" aria-hidden="true"></i><span>Stop</span></button>
  </div>
</footer>
<div id="live" class="sr-only" aria-live="polite"></div>
<script nonce="${nonce}" src="${script}"></script>
</body>
</html>`;
}
