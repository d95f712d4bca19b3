/**
 * Edit Selection in place (`Ctrl+I` on a selection): the agent's proposal and the decision
 * happen in a small thread under the selected lines, in the user's own editor.
 *
 * The thread is VS Code's comment widget (the Comments API). The instruction is asked in an input
 * box and goes as a turn with the selection; while it runs the thread says so (with Stop); when the agent's edit of the file arrives, it is reviewed right there: the thread shows
 * the change as a diff, with Accept, Reject and Show Diff in its header, and no diff editor opens
 * unless asked for. The review machinery is the usual one (`Review`): typing in the file during
 * the review moves the proposal onto the user's text, and the thread shows it as it now reads.
 * When the turn ends the thread keeps the answer and what became of the edit; Close removes it.
 */
import * as vscode from 'vscode';
import { unifiedDiff } from './edits';
import type { AskResult } from './protocol';
import type { Review } from './review';

export const INLINE_CONTROLLER = 'lsp-agent-inline';
export const CLOSE_COMMAND = 'lsp-agent.inlineClose';
export const RETRY_COMMAND = 'lsp-agent.inlineRetry';
export const SHOW_DIFF_COMMAND = 'lsp-agent.inlineShowDiff';

/** What the thread is doing: its `contextValue`, which chooses the buttons in its header. */
type Stage = 'working' | 'review' | 'done' | 'failed';

/** What the inline thread needs of the turns. */
export interface InlineTurns {
    /** Run the prompt about `uri` and `range` as a turn; its result, or undefined when it did not run. */
    ask(prompt: string, uri: vscode.Uri, range: vscode.Range): Promise<AskResult | undefined>;
}

const AGENT: vscode.CommentAuthorInformation = { name: 'LSP Agent' };
const YOU: vscode.CommentAuthorInformation = { name: 'You' };

class Note implements vscode.Comment {
    mode = vscode.CommentMode.Preview;
    constructor(
        public body: string | vscode.MarkdownString,
        public author: vscode.CommentAuthorInformation,
        public contextValue?: string,
    ) {}
}

/** One Edit Selection: its thread, the lines it is about, and the prompt once sent. */
class InlineEdit {
    prompt: string | undefined;
    stage: Stage = 'working';

    constructor(
        readonly thread: vscode.CommentThread,
        readonly uri: vscode.Uri,
        readonly lines: string,
    ) {
        thread.label = `Edit Selection (lines ${lines})`;
        thread.canReply = false;
        thread.contextValue = 'working';
        thread.collapsibleState = vscode.CommentThreadCollapsibleState.Expanded;
    }

    /** Show the prompt and `note` from the agent, in `stage`. */
    set(stage: Stage, note?: string | vscode.MarkdownString): void {
        this.stage = stage;
        this.thread.contextValue = stage;
        const comments: vscode.Comment[] = [];
        if (this.prompt !== undefined) {
            comments.push(new Note(this.prompt, YOU));
        }
        if (note !== undefined) {
            comments.push(new Note(note, AGENT, stage));
        }
        this.thread.comments = comments;
        this.thread.label = {
            working: `Edit Selection (lines ${this.lines}): the agent is working`,
            review: 'Review the change: Accept or Reject',
            done: `Edit Selection (lines ${this.lines})`,
            failed: `Edit Selection (lines ${this.lines}): not sent`,
        }[stage];
    }
}

export class InlineChat implements vscode.Disposable {
    private readonly controller: vscode.CommentController;
    private readonly edits = new Map<vscode.CommentThread, InlineEdit>();
    private readonly disposables: vscode.Disposable[] = [];

    constructor(
        private readonly turns: InlineTurns,
        private readonly review: Review,
    ) {
        this.controller = vscode.comments.createCommentController(INLINE_CONTROLLER, 'LSP Agent: Edit Selection');
        review.inPlace = (files) => this.takesReview(files);
        this.disposables.push(
            this.controller,
            review.onDidChangeReviewing(() => this.drawReview()),
            vscode.commands.registerCommand(CLOSE_COMMAND, (thread: vscode.CommentThread) => this.close(thread)),
            vscode.commands.registerCommand(RETRY_COMMAND, (thread: vscode.CommentThread) => this.retry(thread)),
            vscode.commands.registerCommand(SHOW_DIFF_COMMAND, () => review.reveal()),
        );
    }

    /**
     * `Ctrl+I`: what to do with the selected lines, asked in an input box that has the keyboard
     * (a comment thread's reply box cannot be given it through VS Code's API, and keys meant
     * for it would land in the file); the thread under the lines then follows the turn.
     */
    async start(): Promise<void> {
        const editor = vscode.window.activeTextEditor;
        if (!editor || editor.document.uri.scheme !== 'file' || editor.selection.isEmpty) {
            void vscode.window.showInformationMessage('LSP Agent: select the lines to change, then Edit Selection (Ctrl+I).');
            return;
        }
        const selection = editor.selection;
        // A selection that ends at the start of a line ends on the line before.
        const last = selection.end.character === 0 && selection.end.line > selection.start.line ? selection.end.line - 1 : selection.end.line;
        const range = new vscode.Range(selection.start.line, 0, last, editor.document.lineAt(last).text.length);
        const lines = range.start.line === range.end.line ? `${range.start.line + 1}` : `${range.start.line + 1}-${range.end.line + 1}`;
        const prompt = await vscode.window.showInputBox({
            title: `LSP Agent: Edit Selection (${vscode.workspace.asRelativePath(editor.document.uri, false)}, lines ${lines})`,
            prompt: 'What to do with the selected lines; the change comes back under them for your review',
            placeHolder: 'e.g. add type hints',
            ignoreFocusOut: true,
        });
        if (!prompt?.trim()) {
            return;
        }
        for (const [thread, edit] of this.edits) {
            if (edit.uri.toString() === editor.document.uri.toString() && (edit.stage === 'done' || edit.stage === 'failed')) {
                this.drop(thread); // the file's last Edit Selection made way for this one
            }
        }
        const thread = this.controller.createCommentThread(editor.document.uri, range, []);
        const edit = new InlineEdit(thread, editor.document.uri, lines);
        edit.prompt = prompt.trim();
        this.edits.set(thread, edit);
        await this.run(edit);
    }

    /** Send the prompt of a thread whose turn could not run, again. */
    async retry(thread: vscode.CommentThread): Promise<void> {
        const edit = this.edits.get(thread);
        if (edit?.prompt !== undefined && edit.stage !== 'working' && edit.stage !== 'review') {
            await this.run(edit);
        }
    }

    close(thread: vscode.CommentThread): void {
        const edit = this.edits.get(thread);
        if (edit && (edit.stage === 'working' || edit.stage === 'review')) {
            return; // Stop first: the turn and its review go on
        }
        this.drop(thread);
    }

    dispose(): void {
        this.review.inPlace = undefined;
        [...this.edits.keys()].forEach((thread) => this.drop(thread));
        this.disposables.forEach((d) => d.dispose());
    }

    private async run(edit: InlineEdit): Promise<void> {
        edit.set('working', working());
        const range = edit.thread.range ?? new vscode.Range(0, 0, 0, 0);
        let result: AskResult | undefined;
        try {
            result = await this.turns.ask(edit.prompt as string, edit.uri, range);
        } catch (error) {
            edit.set('failed', `The prompt could not be sent: ${error instanceof Error ? error.message : String(error)}. Retry sends it again.`);
            return;
        }
        if (!this.edits.has(edit.thread)) {
            return;
        }
        if (result === undefined) {
            edit.set('failed', 'The prompt was not sent (the agent is busy with another prompt, or its server does not run). Retry sends it again.');
            return;
        }
        edit.set(result.status === 'failed' ? 'failed' : 'done', outcome(result));
    }

    /** An edit's review opens: it is shown in the thread when it changes the thread's file. */
    private takesReview(files: readonly vscode.Uri[]): boolean {
        const edit = this.working(files);
        if (!edit) {
            return false;
        }
        edit.stage = 'review';
        this.drawReview();
        return true;
    }

    /** The review in the thread, as the proposal reads now (it follows the user's typing). */
    private drawReview(): void {
        const edit = [...this.edits.values()].find((e) => e.stage === 'review');
        if (!edit) {
            return;
        }
        const proposals = this.review.proposals();
        if (proposals.length === 0) {
            edit.set('working', working()); // decided: the turn goes on
            return;
        }
        const body = new vscode.MarkdownString(undefined, true);
        for (const proposal of proposals) {
            if (proposals.length > 1) {
                body.appendMarkdown(`**${escapeMarkdown(proposal.label)}**\n\n`);
            }
            const diff = unifiedDiff(proposal.base, proposal.proposed);
            body.appendCodeblock(diff || '(no change)', 'diff');
        }
        edit.set('review', body);
    }

    private working(files: readonly vscode.Uri[]): InlineEdit | undefined {
        const names = new Set(files.map((uri) => uri.toString()));
        return [...this.edits.values()].find((edit) => edit.stage === 'working' && names.has(edit.uri.toString()));
    }

    private drop(thread: vscode.CommentThread): void {
        this.edits.delete(thread);
        thread.dispose();
    }
}

function working(): vscode.MarkdownString {
    return new vscode.MarkdownString('$(loading~spin) Working on it…', true);
}

/** What the thread says when the turn ended: what became of the edit, then the answer. */
function outcome(result: AskResult): vscode.MarkdownString {
    const { applied, rejected, proposed } = result.edits;
    const said: string[] = [];
    if (applied > 0) {
        said.push(`$(check) Applied (${applied} edit${applied === 1 ? '' : 's'}).`);
    }
    if (rejected > 0) {
        said.push(`$(close) Rejected (${rejected} edit${rejected === 1 ? '' : 's'}).`);
    }
    if (proposed === 0 && result.status === 'completed') {
        said.push('No change was proposed.');
    }
    if (result.status === 'cancelled') {
        said.push('Stopped.');
    } else if (result.status === 'failed') {
        said.push(`The turn failed: ${result.error ?? 'see the output'}.`);
    }
    const body = new vscode.MarkdownString(undefined, true);
    body.appendMarkdown(said.join(' '));
    if (result.answer.trim()) {
        body.appendMarkdown(`\n\n${result.answer.trim()}`);
    }
    return body;
}

function escapeMarkdown(text: string): string {
    return text.replace(/[\\`*_{}[\]()#+\-.!|]/g, '\\$&');
}
