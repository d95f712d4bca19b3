/**
 * Questions from the server (`window/showMessageRequest` with actions: Allow, Allow for this
 * session, Deny) that a background turn waits on. Each shows as a notification, and stays in
 * sight after VS Code hides that notification: a status bar item (warning colours) reopens it as
 * a quick pick until it is answered. When the server withdraws a question (`$/cancelRequest`, a
 * `question` event saying it timed out or was withdrawn) or its turn ends, its quick pick and
 * status bar item go away, and a click on its old notification is ignored quietly.
 *
 * While the chat view is on screen, it shows each question the server announced with a `question`
 * event in the conversation, with the same answers (`answerFromChat`), and no notification is
 * raised over it.
 */
import * as vscode from 'vscode';
import type { CancellationToken, MessageActionItem, ShowMessageRequestParams } from 'vscode-languageclient/node';
import { formatDuration } from './events';
import type { QuestionEvent } from './protocol';

const MESSAGE_ERROR = 1;
const MESSAGE_WARNING = 2;

export const ANSWER_COMMAND = 'lsp-agent.answerQuestion';

class Question {
    /** The session of the turn that asked, when known (from its `question` event or the running turn). */
    session: string | undefined;
    /** The server's id of the question, from its `question` event. */
    id: string | number | undefined;
    timeoutSeconds: number | undefined;
    /** Set once answered, withdrawn or abandoned: any later answer is ignored. */
    closed: string | undefined;
    picker: vscode.QuickPick<vscode.QuickPickItem> | undefined;
    readonly answered: Promise<MessageActionItem | null>;
    private resolve: ((answer: MessageActionItem | null) => void) | undefined;

    constructor(readonly params: ShowMessageRequestParams, session: string | undefined) {
        this.session = session;
        this.answered = new Promise((resolve) => {
            this.resolve = resolve;
        });
    }

    get actions(): MessageActionItem[] {
        return this.params.actions ?? [];
    }

    /** Send `answer` to the server, unless the question is already closed. */
    answer(answer: MessageActionItem | null, why: string): boolean {
        if (this.closed !== undefined) {
            return false;
        }
        this.close(why);
        this.respond(answer);
        return true;
    }

    /** Answer the request itself (a cancelled request still gets its response: null). */
    respond(answer: MessageActionItem | null): void {
        const resolve = this.resolve;
        this.resolve = undefined;
        resolve?.(answer);
    }

    /** Close the question's UI without answering (the server gave up on it). */
    close(why: string): void {
        this.closed ??= why;
        const picker = this.picker;
        this.picker = undefined;
        picker?.hide();
        picker?.dispose();
    }
}

export class Questions implements vscode.Disposable {
    private readonly open: Question[] = [];
    /** `question` events that came before their request, by text. */
    private readonly announced = new Map<string, QuestionEvent>();
    /** Answers given in the chat before their request arrived, by the question's text. */
    private readonly early = new Map<string, string>();
    private readonly item: vscode.StatusBarItem;
    private readonly changed = new vscode.EventEmitter<number>();
    /** Fires the number of open questions when it changes. */
    readonly onDidChange = this.changed.event;

    /**
     * `sessionOfNewQuestion`: the session a question that arrives now belongs to, when one turn
     * runs; `shownInline`: whether a question of that session is in sight in the chat view.
     */
    constructor(
        private readonly sessionOfNewQuestion: () => string | undefined,
        private readonly shownInline: (session: string | undefined) => boolean = () => false,
    ) {
        this.item = vscode.window.createStatusBarItem('lsp-agent.question', vscode.StatusBarAlignment.Right, 101);
        this.item.name = 'LSP Agent question';
        this.item.command = ANSWER_COMMAND;
        this.item.backgroundColor = new vscode.ThemeColor('statusBarItem.warningBackground');
    }

    /** Handler of `window/showMessageRequest`. */
    async handle(params: ShowMessageRequestParams, token: CancellationToken): Promise<MessageActionItem | null> {
        if (!params.actions || params.actions.length === 0) {
            await show(params.type, params.message, []);
            return null;
        }
        const question = new Question(params, this.sessionOfNewQuestion());
        const announced = this.announced.get(params.message);
        this.announced.delete(params.message);
        if (announced) {
            question.id = announced.id;
            question.session = announced.session;
            question.timeoutSeconds = announced.timeoutSeconds;
        }
        this.open.push(question);
        this.render();
        const withdrawn = token.onCancellationRequested(() => {
            question.close('withdrawn');
            question.respond(null);
            this.remove(question);
        });
        const answer = this.early.get(params.message);
        this.early.delete(params.message);
        const chosen = question.actions.find((action) => action.title === answer);
        if (chosen) {
            question.answer(chosen, 'answered');
            this.remove(question);
        } else if (!announced || !this.shownInline(question.session)) {
            // The chat shows a question from its `question` event; one the server asks without
            // (before the API key goes to an endpoint) would be seen nowhere but the status bar.
            void this.notify(question);
        }
        try {
            return await question.answered;
        } finally {
            withdrawn.dispose();
        }
    }

    /** A `question` event: learn its id and time limit, or close it when the server did. */
    onEvent(event: QuestionEvent): void {
        const question =
            this.open.find((q) => q.id !== undefined && q.id === event.id) ??
            this.open.find((q) => q.id === undefined && q.params.message === event.text);
        if (!question) {
            if (event.state === 'open') {
                this.announced.set(event.text, event);
            } else {
                this.announced.delete(event.text);
            }
            return;
        }
        question.id = event.id;
        question.session = event.session;
        question.timeoutSeconds = event.timeoutSeconds ?? question.timeoutSeconds;
        if (event.state === 'timedOut' || event.state === 'withdrawn') {
            // The server answers Deny itself and withdraws the request; answering now would only
            // reach a request it gave up on.
            question.close(event.state === 'timedOut' ? 'timed out' : 'withdrawn');
            this.remove(question);
        } else if (event.state === 'answered') {
            question.close('answered');
            this.remove(question);
        } else {
            this.render();
        }
    }

    /**
     * A turn ended: close its questions. They are not answered: the server has stopped waiting
     * for them (and a server that did not withdraw them reports an answer to a request it gave
     * up on as an error).
     */
    endTurn(session: string | undefined, othersRunning: boolean): void {
        if (!othersRunning) {
            this.announced.clear();
            this.early.clear();
        }
        for (const question of [...this.open]) {
            if (question.session === session || (question.session === undefined && !othersRunning)) {
                question.close('the turn ended');
                this.remove(question);
            }
        }
    }

    /**
     * The user answered `action` in the chat, to the question the server calls `id` (asked as
     * `text`): true when the answer was sent, or will be when the request arrives.
     */
    answerFromChat(id: string | number | undefined, text: string, action: string): boolean {
        const question =
            this.open.find((q) => id !== undefined && q.id === id) ??
            this.open.find((q) => q.params.message === text && (q.id === undefined || id === undefined));
        if (!question) {
            if (this.announced.has(text)) {
                this.early.set(text, action); // its request has not arrived yet
                return true;
            }
            return false;
        }
        const chosen = question.actions.find((a) => a.title === action);
        if (!chosen || !question.answer(chosen, 'answered')) {
            return false;
        }
        this.remove(question);
        return true;
    }

    /** The server stopped: its questions went with it. */
    closeAll(why: string): void {
        for (const question of [...this.open]) {
            question.close(why);
            this.remove(question);
        }
    }

    /** The status bar item's command: the oldest open question as a quick pick. */
    async answer(): Promise<void> {
        const question = this.open[0];
        if (!question) {
            void vscode.window.showInformationMessage('LSP Agent: no question is waiting for an answer.');
            return;
        }
        if (question.picker) {
            question.picker.show();
            return;
        }
        const picker = vscode.window.createQuickPick();
        question.picker = picker;
        picker.title = `LSP Agent asks${limitText(question)}`;
        picker.placeholder = question.params.message;
        picker.items = question.actions.map((action) => ({ label: action.title }));
        picker.ignoreFocusOut = true;
        picker.onDidAccept(() => {
            const chosen = picker.selectedItems[0];
            const action = question.actions.find((a) => a.title === chosen?.label);
            if (action && question.answer(action, 'answered')) {
                this.remove(question);
            }
        });
        picker.onDidHide(() => {
            // Escape: answer later (the status bar item stays).
            if (question.picker === picker) {
                question.picker = undefined;
                picker.dispose();
            }
        });
        picker.show();
    }

    dispose(): void {
        for (const question of [...this.open]) {
            question.answer(null, 'the extension stopped');
        }
        this.announced.clear();
        this.open.length = 0;
        this.item.dispose();
        this.changed.dispose();
    }

    private async notify(question: Question): Promise<void> {
        const choice = await show(question.params.type, question.params.message + limitText(question), question.actions);
        if (question.closed !== undefined) {
            if (choice !== undefined) {
                // A click on a notification the server no longer waits for: say so, quietly.
                vscode.window.setStatusBarMessage(
                    `$(info) LSP Agent: that question was already closed (${question.closed}); nothing was sent.`,
                    10_000,
                );
            }
            return;
        }
        if (question.answer(choice ?? null, 'answered')) {
            this.remove(question);
        }
    }

    private remove(question: Question): void {
        const index = this.open.indexOf(question);
        if (index >= 0) {
            this.open.splice(index, 1);
            this.render();
        }
    }

    private render(): void {
        const first = this.open[0];
        if (!first) {
            this.item.hide();
            this.changed.fire(0);
            return;
        }
        const more = this.open.length > 1 ? ` (+${this.open.length - 1})` : '';
        this.item.text = `$(question) LSP Agent is waiting for your answer${more}`;
        const tooltip = new vscode.MarkdownString();
        tooltip.appendText(first.params.message);
        tooltip.appendMarkdown(`\n\nClick to answer${limitText(first)}.`);
        this.item.tooltip = tooltip;
        this.item.accessibilityInformation = { label: `LSP Agent asks: ${first.params.message}. Activate to answer.` };
        this.item.show();
        this.changed.fire(this.open.length);
    }
}

/** ` (no answer in 2 min counts as Deny)` when the server said how long it waits. */
function limitText(question: Question): string {
    return question.timeoutSeconds ? ` (no answer in ${formatDuration(question.timeoutSeconds)} counts as Deny)` : '';
}

async function show(type: number, message: string, actions: MessageActionItem[]): Promise<MessageActionItem | undefined> {
    const shown =
        type === MESSAGE_ERROR
            ? vscode.window.showErrorMessage(message, ...actions)
            : type === MESSAGE_WARNING
              ? vscode.window.showWarningMessage(message, ...actions)
              : vscode.window.showInformationMessage(message, ...actions);
    return shown;
}
