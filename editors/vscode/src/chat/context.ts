/**
 * What the chat's next prompt carries besides its text: the selection (the file the user is in,
 * followed as they move, or pinned with `#selection`), files (`#file`) and problems
 * (`#problems`), `#codebase` (the workspace searched for the prompt's terms), and the `#`
 * picker that adds them.
 */
import * as path from 'node:path';
import * as vscode from 'vscode';
import type { Range } from '../protocol';
import { AddedContext, SelectionRef, selectionLabel } from './model';

/** Files the `#` picker lists at most. */
const FILES_LISTED = 5000;
/** Problems one `#problems` adds at most. */
const PROBLEMS_ADDED = 50;

/** The active editor's file and selection, as the next prompt would send it. */
export interface EditorContext {
    ref: SelectionRef;
    uri: string;
    range?: Range;
}

export class PromptContext implements vscode.Disposable {
    /** The file the user was last in (the chat, the output or a review does not count). */
    editor: vscode.TextEditor | undefined;
    /** A selection pinned with `#selection`: sent whatever the editor shows meanwhile. */
    private pinned: EditorContext | undefined;
    /** Files added with `#`, relative paths. */
    files: string[] = [];
    /** Problems added with `#problems`. */
    problems: { label: string; lines: string[] } | undefined;
    /** `#codebase` added: the server searches the workspace for the prompt's terms first. */
    codebase = false;
    private readonly disposables: vscode.Disposable[] = [];

    /** `changed`: what the chip row shows changed. */
    constructor(private readonly changed: () => void) {
        this.editor = fileEditor(vscode.window.activeTextEditor);
        this.disposables.push(
            vscode.window.onDidChangeActiveTextEditor((editor) => {
                // The chat in an editor tab, the output, a review's proposed side: the file the
                // user was in stays the context.
                this.editor = fileEditor(editor) ?? (this.editor && vscode.window.visibleTextEditors.includes(this.editor) ? this.editor : undefined);
                this.changed();
            }),
            vscode.window.onDidChangeTextEditorSelection((change) => {
                if (change.textEditor === this.editor) {
                    this.changed();
                }
            }),
            vscode.window.onDidChangeVisibleTextEditors((editors) => {
                if (this.editor && !editors.includes(this.editor)) {
                    this.editor = undefined;
                    this.changed();
                }
            }),
        );
    }

    /** The selection the next prompt sends: the pinned one, else the editor's. */
    selection(): EditorContext | undefined {
        return this.pinned ?? editorContext(this.editor);
    }

    get isPinned(): boolean {
        return this.pinned !== undefined;
    }

    unpin(): void {
        this.pinned = undefined;
        this.changed();
    }

    removeFile(file: string): void {
        this.files = this.files.filter((f) => f !== file);
        this.changed();
    }

    removeProblems(): void {
        this.problems = undefined;
        this.changed();
    }

    removeCodebase(): void {
        this.codebase = false;
        this.changed();
    }

    /**
     * What a prompt carried, back for the next one (a rewind puts its prompt back in the
     * input): its files, problems, `#codebase`, and its selection, pinned.
     */
    restore(added: { files: readonly string[]; problems: readonly string[]; codebase: boolean }, selection?: EditorContext): void {
        this.files = [...new Set([...this.files, ...added.files])];
        if (added.problems.length > 0) {
            this.problems = { label: `problems (${added.problems.length})`, lines: [...added.problems] };
        }
        this.codebase ||= added.codebase;
        if (selection) {
            this.pinned = selection;
        }
        this.changed();
    }

    /** What was added for the prompt being sent; the next one starts without it. */
    take(): AddedContext {
        const added = { files: [...this.files], problems: [...(this.problems?.lines ?? [])], codebase: this.codebase };
        this.files = [];
        this.problems = undefined;
        this.codebase = false;
        this.pinned = undefined;
        this.changed();
        return added;
    }

    /** The `#` picker: the selection, the problems, or a file of the workspace. */
    async pick(): Promise<void> {
        type Item = vscode.QuickPickItem & { run: () => Promise<void> | void };
        const items: Item[] = [];
        const selected = editorContext(this.editor);
        if (selected?.range) {
            items.push({
                label: '$(selection) Selection',
                description: selectionLabel(selected.ref),
                detail: 'These lines go along with the prompt, wherever you are when you send it',
                run: () => {
                    this.pinned = selected;
                    this.changed();
                },
            });
        }
        const here = this.editor?.document.uri;
        const inFile = here ? vscode.languages.getDiagnostics(here) : [];
        const everywhere = vscode.languages.getDiagnostics().filter(([uri]) => uri.scheme === 'file');
        const total = everywhere.reduce((sum, [, found]) => sum + found.length, 0);
        if (here && inFile.length > 0) {
            const rel = vscode.workspace.asRelativePath(here, false);
            items.push({
                label: '$(warning) Problems',
                description: `${inFile.length} in ${rel}`,
                run: () => this.addProblems(`problems: ${rel} (${inFile.length})`, [[here, inFile]]),
            });
        }
        if (total > 0 && total !== inFile.length) {
            items.push({
                label: '$(warning) Problems in the Workspace',
                description: `${total}`,
                run: () => this.addProblems(`problems (${total})`, everywhere),
            });
        }
        if (!this.codebase) {
            items.push({
                label: '$(search) Codebase',
                description: 'search the workspace for your prompt',
                detail: "The files that match the prompt's terms go along with it (what .gitignore leaves out is not searched)",
                run: () => {
                    this.codebase = true;
                    this.changed();
                },
            });
        }
        items.push({ label: '$(file) File…', description: 'a file of the workspace', run: () => this.pickFile() });
        const picked = await vscode.window.showQuickPick(items, {
            title: 'LSP Agent: Add Context',
            placeHolder: 'What goes along with your next prompt',
        });
        await picked?.run();
    }

    /** One file of the workspace, added for the next prompt. */
    async pickFile(): Promise<void> {
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
            this.changed();
        }
    }

    dispose(): void {
        this.disposables.forEach((d) => d.dispose());
    }

    private addProblems(label: string, found: ReadonlyArray<readonly [vscode.Uri, readonly vscode.Diagnostic[]]>): void {
        const lines: string[] = [];
        for (const [uri, diagnostics] of found) {
            const rel = vscode.workspace.asRelativePath(uri, false);
            for (const diagnostic of diagnostics) {
                lines.push(problemLine(rel, diagnostic));
            }
        }
        this.problems = { label, lines: lines.slice(0, PROBLEMS_ADDED) };
        this.changed();
    }
}

/** One problem as the prompt carries it: `hello.py:3:5 error: message (source code)`. */
function problemLine(rel: string, diagnostic: vscode.Diagnostic): string {
    const severity = ['error', 'warning', 'info', 'hint'][diagnostic.severity] ?? 'problem';
    const start = diagnostic.range.start;
    const code = typeof diagnostic.code === 'object' ? diagnostic.code.value : diagnostic.code;
    const source = [diagnostic.source, code].filter((part) => part !== undefined && part !== '').join(' ');
    const message = diagnostic.message.replace(/\s+/g, ' ').trim();
    return `${rel}:${start.line + 1}:${start.character + 1} ${severity}: ${message}${source ? ` (${source})` : ''}`;
}

function fileEditor(editor: vscode.TextEditor | undefined): vscode.TextEditor | undefined {
    return editor && editor.document.uri.scheme === 'file' ? editor : undefined;
}

function editorContext(editor: vscode.TextEditor | undefined): EditorContext | undefined {
    if (!editor) {
        return undefined;
    }
    const rel = vscode.workspace.asRelativePath(editor.document.uri, false);
    const selection = editor.selection;
    if (selection.isEmpty) {
        return { ref: { path: rel }, uri: editor.document.uri.toString() };
    }
    // A selection that ends at the start of a line ends on the line before: the chip and the
    // lines the server quotes say the same.
    const end =
        selection.end.character === 0 && selection.end.line > selection.start.line
            ? editor.document.lineAt(selection.end.line - 1).range.end
            : selection.end;
    return {
        ref: { path: rel, startLine: selection.start.line + 1, endLine: end.line + 1 },
        uri: editor.document.uri.toString(),
        range: {
            start: { line: selection.start.line, character: selection.start.character },
            end: { line: end.line, character: end.character },
        },
    };
}
