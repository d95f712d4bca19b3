/**
 * The chat view: a webview in its own activity-bar container (and, on demand, in an editor tab)
 * that shows the conversation of the session the next Ask continues, and takes the next prompt.
 *
 * It is one more view of the turns (`TurnView`): every turn shows here as it runs, wherever it
 * was asked. The conversation itself comes from the server (`lspAgent.history`) whenever the
 * session changes or the window reloads, then follows the turn's events. Edits are reviewed in
 * the diff editor (`Review`) and questions answered through the `window/showMessageRequest` the
 * extension holds (`Questions`): the chat's buttons decide them. What the next prompt carries
 * besides its text is `PromptContext`'s; the model picker is `models.ts`'s.
 */
import * as path from 'node:path';
import * as vscode from 'vscode';
import { ExecuteCommandRequest } from 'vscode-languageclient/node';
import { createLog, traceError } from '../common/log';
import type { Server, ServerState } from '../common/server';
import { chooseModel, configuredModel } from '../models';
import { contributedSettings, openSetting } from '../notify';
import { AgentEvent, AskResult, HISTORY, HistoryItem, SESSIONS, SessionInfo, STATUS, Status, UNDO_TURN, UndoResult } from '../protocol';
import type { Questions } from '../questions';
import type { Review } from '../review';
import { onDidChangeTokenColors, themeTokenColors } from '../theme';
import type { AskOptions, Turn, Turns, TurnView } from '../turns';
import { errorActions } from './actions';
import { placeCode } from './apply';
import { EditorContext, PromptContext } from './context';
import { page } from './page';
import { Change, ChatAction, ChatItem, ChatModel, PromptItem, splitContext, withContext } from './model';
import type { ChatState, FromWebview, ToWebview } from './wire';

export const CHAT_VIEW = 'lspAgent.chat';
export const CHAT_PANEL = 'lspAgent.chatPanel';
const SESSION_KEY = 'lspAgent.chat.session';
const PROMPTS_KEY = 'lspAgent.chat.prompts';
const MODE_KEY = 'lspAgent.chat.mode';
const PROMPTS_KEPT = 100;
const SERVER_COMMAND_KEY = 'lspAgent.server.command';

export class ChatView implements TurnView, vscode.WebviewViewProvider, vscode.WebviewPanelSerializer, vscode.Disposable {
    private readonly model: ChatModel;
    private readonly webviews = new Set<vscode.Webview>();
    private readonly disposables: vscode.Disposable[] = [];
    private readonly prompt: PromptContext;
    private turns: Turns | undefined;
    private view: vscode.WebviewView | undefined;
    private panel: vscode.WebviewPanel | undefined;
    /** The turn of the session shown that runs now. */
    private shown: Turn | undefined;
    /** Whether the model holds the session `Turns` continues (else it loads when a view opens). */
    private loaded = false;
    private loading: Promise<void> | undefined;
    private offline: string | undefined;
    /** The model in effect, as the server last said (the header's picker shows it). */
    private currentModel: string | undefined = configuredModel();
    private lastState = '';
    /** Whether the chat's input has the keyboard. */
    private focused = false;
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
        this.prompt = new PromptContext(() => this.pushState());
        this.disposables.push(
            this.prompt,
            vscode.window.registerWebviewViewProvider(CHAT_VIEW, this),
            vscode.window.registerWebviewPanelSerializer(CHAT_PANEL, this),
            review.onDidChangeReview((shown) => {
                this.push(this.model.setReview(shown));
                if (shown) {
                    this.announce(`An edit of ${shown.files.join(', ') || shown.label} waits for your review: Accept or Reject.`);
                }
            }),
            onDidChangeTokenColors(() => void this.sendTokenColors()),
        );
    }

    /** Follow `turns`: the session it continues is the one shown (restored from the last window). */
    attach(turns: Turns): void {
        this.turns = turns;
        const saved = this.context.workspaceState.get<string>(SESSION_KEY);
        if (saved && turns.currentSession === undefined) {
            turns.select(saved);
        }
        this.disposables.push(
            turns.onDidChangeSession((session) => this.sessionChanged(session)),
            turns.onDidChangeQueue(() => this.pushState()),
        );
    }

    /** Where the chat's input has the keyboard, if it has (a review then opens without taking it). */
    get inputFocus(): 'view' | 'panel' | undefined {
        if (!this.focused) {
            return undefined;
        }
        return this.panel?.active === true ? 'panel' : this.view?.visible === true ? 'view' : undefined;
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

    /** The server's state: when it is not running, the input says so, with the ways out. */
    setServer(state: ServerState, message?: string): void {
        this.offline = state === 'failed' ? (message ?? 'The server is not running.') : undefined;
        this.pushState();
    }

    /** The model in effect, from the server's status. */
    setModel(model: string | null | undefined): void {
        this.currentModel = model ?? undefined;
        this.pushState();
    }

    /** The model picker (the header's button, Choose Model in an error). */
    async chooseModel(): Promise<void> {
        const model = await chooseModel(this.server);
        if (model) {
            this.setModel(model);
            vscode.window.setStatusBarMessage(`$(hubot) LSP Agent: the next turn uses ${model}`, 5000);
        }
        this.post({ type: 'focus' });
    }

    /**
     * Undo `turn` of the session shown (undefined: its last turn with edits), through the
     * review; `rewind`: that turn and every later one, the files as before its prompt;
     * `conversation` (with `rewind`): the conversation too goes back to before the prompt, and
     * the prompt comes back into the input.
     */
    async undo(turn?: number, rewind = false, conversation = false): Promise<void> {
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
            this.push(this.model.setUndo(turn, 'running', undefined, undefined, rewind));
        }
        const argument = turn === undefined ? { session } : rewind ? { session, turn, rewind, ...(conversation ? { conversation } : {}) } : { session, turn };
        const answer = await this.request<UndoResult>(UNDO_TURN, argument);
        if ('error' in answer) {
            if (turn !== undefined) {
                this.push(this.model.setUndo(turn, 'failed'));
            }
            this.push(this.model.addNote(`${rewind ? 'Rewind' : 'Undo'}: ${answer.error}`, 'warning'));
            return;
        }
        const result = answer.value;
        const refused = (result.refused ?? []).map((r) => `${r.path} (${r.why})`).join('; ');
        const what = rewind ? `The rewind to before turn ${result.turn}` : `The undo of turn ${result.turn}`;
        this.push(this.model.setUndo(result.turn, result.applied ? 'done' : 'failed', result.files, result.turns));
        if (result.conversation) {
            this.push(this.model.setRewound(result.turn, result.rewound ?? []));
            if (refused) {
                this.push(this.model.addNote(`Left as they are: ${refused}.`, 'warning'));
            }
            // The prompt goes back into the input, to be changed and sent again: the keyboard too.
            if (this.panel?.active) {
                this.panel.reveal();
            } else {
                await vscode.commands.executeCommand(`${CHAT_VIEW}.focus`);
            }
            const { text, ...added } = splitContext(result.prompt ?? '');
            this.prompt.restore(added, this.selectionOf(result.turn));
            this.post({ type: 'restorePrompt', text });
            this.announce(`${what} is done: the conversation is back to before that prompt, which is in the input again.`);
            return;
        }
        if (conversation) {
            const why = result.reason ?? (result.applied ? 'the conversation stays as it was' : 'the files were not restored');
            this.push(this.model.addNote(`${what}: ${why}.`, 'warning'));
        } else if (!result.proposed) {
            this.push(this.model.addNote(`${what} changed nothing: ${refused || 'nothing to restore'}.`, 'warning'));
        } else if (!result.applied) {
            this.push(this.model.addNote(`${what} was not applied.`, 'warning'));
        } else if (refused) {
            this.push(this.model.addNote(`Left as they are: ${refused}.`, 'warning'));
        }
        this.announce(result.applied ? `${what} is applied.` : `${what} was not applied.`);
    }

    turnStarted(turn: Turn): void {
        if (this.shown || turn.target !== this.model.session || !this.loaded) {
            return;
        }
        this.shown = turn;
        this.push(this.model.beginTurn(turn.prompt, turn.selection, turn.mode));
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
        let change: Change;
        let error: string | undefined;
        if ('result' in outcome) {
            const { status, answer } = outcome.result;
            error = outcome.result.error;
            change = this.model.endTurn({ status, answer, error });
            this.announce(status === 'completed' ? 'The answer is complete.' : `The turn ended: ${status}${error ? `: ${error}` : ''}.`);
        } else {
            const status = outcome.cancelled ? 'cancelled' : 'failed';
            error = outcome.cancelled ? undefined : outcome.error;
            change = this.model.endTurn({ status, error });
            this.announce(`The turn ended: ${status}.`);
        }
        this.push(change);
        // The turn's last line (from its `status` event, or made just now).
        const status = [...this.model.items].reverse().find((item) => item.kind === 'status');
        if (status?.kind === 'status' && status.status === 'failed' && error) {
            // A way out of the error, and the prompt one click from being asked again.
            this.push(this.model.setActions(status.key, errorActions(error, contributedSettings(), !turn.external)));
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
                await this.sendTokenColors(webview);
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
            case 'chooseModel':
                await this.chooseModel();
                break;
            case 'setMode':
                await this.context.workspaceState.update(MODE_KEY, message.mode);
                this.pushState();
                break;
            case 'addContext':
                await this.prompt.pick();
                this.post({ type: 'focus' });
                break;
            case 'removeFile':
                this.prompt.removeFile(message.path);
                break;
            case 'removeProblems':
                this.prompt.removeProblems();
                break;
            case 'removeCodebase':
                this.prompt.removeCodebase();
                break;
            case 'unpinSelection':
                this.prompt.unpin();
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
            case 'rewind':
                await this.rewind(message.turn);
                break;
            case 'action':
                await this.act(message.key, message.index);
                break;
            case 'offlineAction':
                await this.run(this.offlineActions()[message.index]);
                break;
            case 'unqueue': {
                const removed = this.turns?.unqueue(message.id);
                if (removed) {
                    this.post({ type: 'draft', text: splitContext(removed.prompt).text }); // not lost: back in the input
                }
                break;
            }
            case 'sendQueued':
                this.turns?.sendQueued(message.id);
                break;
            case 'copy':
                await vscode.env.clipboard.writeText(message.text);
                vscode.window.setStatusBarMessage('$(copy) LSP Agent: code copied', 3000);
                break;
            case 'insert':
                await this.insert(message.text);
                break;
            case 'apply':
                await this.apply(message.text);
                break;
            case 'open':
                await this.open(message.target);
                break;
            case 'inputFocus':
                this.focused = message.focused;
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
        const options: AskOptions = { fromChat: true, queue: true };
        const selected = useSelection ? this.prompt.selection() : undefined;
        if (selected) {
            options.uri = selected.uri;
            options.range = selected.range;
            options.selection = selected.ref;
        }
        if (this.mode() === 'ask') {
            options.mode = 'ask';
        }
        const prompt = withContext(text.trim(), this.prompt.take());
        await turns.ask(prompt, false, options);
    }

    /** Ask the prompt of a failed turn again, with what it carried. */
    private async retry(turn: number): Promise<void> {
        const asked = this.model.items.find((item): item is PromptItem => item.kind === 'prompt' && item.turn === turn);
        if (!asked || !this.turns) {
            return;
        }
        const options: AskOptions = { fromChat: true, queue: true, mode: asked.mode };
        if (asked.selection && this.root) {
            const uri = vscode.Uri.file(path.join(this.root, asked.selection.path)).toString();
            options.uri = uri;
            options.selection = asked.selection;
            if (asked.selection.startLine) {
                const end = asked.selection.endLine ?? asked.selection.startLine;
                options.range = { start: { line: asked.selection.startLine - 1, character: 0 }, end: { line: end, character: 0 } };
            }
        }
        await this.turns.ask(withContext(asked.text, asked), false, options);
    }

    /** The selection the prompt of `turn` carried, to pin again (its whole lines). */
    private selectionOf(turn: number): EditorContext | undefined {
        const asked = this.model.items.find((item): item is PromptItem => item.kind === 'prompt' && item.turn === turn);
        const ref = asked?.selection;
        if (!ref || !this.root) {
            return undefined;
        }
        const uri = vscode.Uri.file(path.join(this.root, ref.path)).toString();
        if (!ref.startLine) {
            return { ref, uri };
        }
        const end = ref.endLine ?? ref.startLine;
        return { ref, uri, range: { start: { line: ref.startLine - 1, character: 0 }, end: { line: end, character: 0 } } };
    }

    /** Rewind the files to before the prompt of `turn`, after the user says yes. */
    /** The prompt row's rewind: the files and the conversation (the default), or the files only. */
    private async rewind(turn: number): Promise<void> {
        if (this.model.isRewound(turn)) {
            return;
        }
        const undone = this.model.rewindable(turn);
        const BOTH = 'Rewind Files and Conversation';
        const FILES = 'Rewind Files Only';
        const files =
            undone.length > 0
                ? `The edits of turn${undone.length > 1 ? 's' : ''} ${undone.join(', ')} are undone in one edit you review; what you typed since stays.`
                : 'No turn from it changed files.';
        const detail =
            `${files}\n\n${BOTH}: the agent also forgets the conversation from this prompt on (the chat keeps it, folded), ` +
            'and the prompt goes back into the input.' +
            (undone.length > 0 ? `\n${FILES}: the conversation goes on as it is.` : '');
        const choice = await vscode.window.showWarningMessage(
            `Rewind to before prompt ${turn}?`,
            { modal: true, detail },
            ...(undone.length > 0 ? [BOTH, FILES] : [BOTH]),
        );
        if (choice === BOTH) {
            await this.undo(turn, true, true);
        } else if (choice === FILES) {
            await this.undo(turn, true);
        }
    }

    /** A button of a status line or a note. */
    private async act(key: number, index: number): Promise<void> {
        const item = this.model.items.find((i) => i.key === key);
        const action = item && (item.kind === 'status' || item.kind === 'note') ? item.actions?.[index] : undefined;
        if (action?.id === 'retry' && item) {
            await this.retry(item.turn);
            return;
        }
        await this.run(action);
    }

    private async run(action: ChatAction | undefined): Promise<void> {
        switch (action?.id) {
            case 'openSetting':
                await openSetting(action.setting ?? SERVER_COMMAND_KEY);
                break;
            case 'chooseModel':
                await this.chooseModel();
                break;
            case 'setApiKey':
                await vscode.commands.executeCommand('lsp-agent.setApiKey');
                break;
            case 'showLog':
                createLog().show();
                break;
            case 'restartServer':
                await this.server.restart();
                break;
            default:
                break;
        }
    }

    /** The ways out when the server does not run: its command, its log, another try. */
    private offlineActions(): ChatAction[] {
        if (this.offline === undefined) {
            return [];
        }
        return [
            { id: 'openSetting', label: 'Open Settings', setting: SERVER_COMMAND_KEY },
            { id: 'showLog', label: 'Show Log' },
            { id: 'restartServer', label: 'Try Again' },
        ];
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

    private async insert(text: string): Promise<void> {
        const editor = this.prompt.editor;
        if (!editor) {
            void vscode.window.showInformationMessage('LSP Agent: open a file and put the cursor where the code goes, then Insert again.');
            return;
        }
        const selections = editor.selections;
        await editor.edit((edit) => selections.forEach((selection) => edit.replace(selection, text)));
        await vscode.window.showTextDocument(editor.document, editor.viewColumn);
    }

    /** Apply a code block to the file the user was in, as an edit they review. */
    private async apply(code: string): Promise<void> {
        const editor = this.prompt.editor;
        if (!editor) {
            void vscode.window.showInformationMessage('LSP Agent: open the file the code goes in (select the lines it replaces), then Apply again.');
            return;
        }
        const document = editor.document;
        const text = document.getText();
        const selection = { start: document.offsetAt(editor.selection.start), end: document.offsetAt(editor.selection.end) };
        const placed = placeCode(text, code, selection);
        const rel = vscode.workspace.asRelativePath(document.uri, false);
        if (placed.text === text) {
            vscode.window.setStatusBarMessage(`$(info) LSP Agent: ${rel} already holds that code`, 5000);
            return;
        }
        const applied = await this.review.propose(document.uri, placed.text, `lsp-agent: apply code to ${rel}`);
        this.push(this.model.addNote(applied ? `Code applied to ${rel}.` : `The code was not applied to ${rel}.`, applied ? 'info' : 'warning'));
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
                note = `The conversation could not be read: ${answer.error}`;
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
            if ('value' in status) {
                this.currentModel = status.value.model ?? undefined;
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

    private mode(): 'agent' | 'ask' {
        return this.context.workspaceState.get<string>(MODE_KEY) === 'ask' ? 'ask' : 'agent';
    }

    private state(): ChatState {
        const session = this.model.session;
        const queued = (this.turns?.queued(session) ?? []).map((entry) => ({
            id: entry.id,
            text: splitContext(entry.prompt).text,
            why: entry.why,
            held: entry.held,
        }));
        return {
            session,
            title: this.model.title,
            running: this.model.running,
            offline: this.offline,
            offlineActions: this.offlineActions(),
            summary: this.model.summary(),
            model: this.currentModel,
            mode: this.mode(),
            selection: this.prompt.selection()?.ref,
            pinned: this.prompt.isPinned,
            files: [...this.prompt.files],
            problems: this.prompt.problems,
            codebase: this.prompt.codebase,
            queued,
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

    /** The theme's token colours to `webview` (every webview when none: the theme changed). */
    private async sendTokenColors(webview?: vscode.Webview): Promise<void> {
        const { colors, styles } = await themeTokenColors();
        const message: ToWebview = { type: 'tokenColors', colors, styles };
        for (const target of webview ? [webview] : this.webviews) {
            void target.postMessage(message);
        }
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
