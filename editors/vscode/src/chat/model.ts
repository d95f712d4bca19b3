/**
 * The chat view's model of one session's conversation: the items it shows (prompts, answers, tool
 * calls, edit cards, questions, notes, the end of each turn), built from `lspAgent.history` after
 * any restart and kept up to date by the turn's `lspAgent/event`s as it runs. Both paths give the
 * same items, so a reload shows what was seen live.
 *
 * Pure: no VS Code API. Each change returns what to draw again (`Change`).
 */
import { unifiedDiff } from '../edits';
import { addUsage, describeArguments, displayUri, emptyUsage, Usage } from '../events';
import { CODEBASE } from '../codebase';
import type { AgentEvent, HistoryItem, HunkFact, QuestionState } from '../protocol';

/** Tools whose calls propose edits: they show as edit cards. */
export const EDIT_TOOLS: readonly string[] = ['edit_file', 'write_file', 'apply_patch'];

/** What the user pointed at: a file, and lines in it (1-based; none: the whole file). */
export interface SelectionRef {
    path: string;
    startLine?: number;
    endLine?: number;
}

export interface HunkOutcome {
    /** `hunk 1 · replaced lines 3-4`; for the user's own lines, where they are (`line 6`). */
    label: string;
    /** `user`: lines the user changed beside the edit (theirs, not the agent's). */
    status: 'accepted' | 'rejected' | 'modified' | 'user';
}

/** A way out of an error or a failed turn, as a button. */
export interface ChatAction {
    id: 'retry' | 'openSetting' | 'chooseModel' | 'setApiKey' | 'showLog' | 'restartServer';
    label: string;
    /** For `openSetting`: the setting's full name. */
    setting?: string;
}

export interface FileOutcome {
    path: string;
    applied: boolean;
    undoable: boolean;
}

/** The review on screen for an edit card (or for an undo). */
export interface ReviewRef {
    label: string;
    files: string[];
}

interface Base {
    /** Stable for the item's life in this model: the webview keys its elements by it. */
    key: number;
    turn: number;
    /** Its turn was rewound: the model no longer sees it (the chat shows it folded). */
    rewound?: boolean;
}

export interface PromptItem extends Base {
    kind: 'prompt';
    text: string;
    /** Files added as context with `#`. */
    files: string[];
    /** Problems added as context with `#problems`, one line each. */
    problems: string[];
    /** `#codebase`: the workspace was searched for the prompt's terms first. */
    codebase: boolean;
    selection?: SelectionRef;
    /** Asked in ask mode: an answer without changes. */
    mode?: 'ask';
    /** Whether the chat offers a rewind to before this prompt (no turn runs, it was not rewound). */
    rewind: boolean;
}

export interface AnswerItem extends Base {
    kind: 'answer';
    /** The model's Markdown. */
    text: string;
    streaming: boolean;
}

export interface ToolItem extends Base {
    kind: 'tool';
    name: string;
    args: unknown;
    /** The arguments in one short line. */
    line: string;
    /** `stopped`: its turn was stopped before it finished. */
    state: 'running' | 'done' | 'failed' | 'stopped';
    summary?: string;
    /** The text the model got. */
    result?: string;
    /** How the permission was decided, when it was asked or denied. */
    permission?: string;
}

export interface EditItem extends Base {
    kind: 'edit';
    name: string;
    args: unknown;
    line: string;
    /** `stopped`: its turn was stopped before the edit was decided. */
    state: 'running' | 'review' | 'applied' | 'partial' | 'rejected' | 'failed' | 'stopped';
    summary?: string;
    result?: string;
    permission?: string;
    files: FileOutcome[];
    hunks: HunkOutcome[];
    /** The diff of what landed, from the result. */
    diff?: string;
    /** The diff the agent proposed, from its arguments (what Details shows before it landed). */
    proposal?: string;
    review?: ReviewRef;
}

export interface QuestionItem extends Base {
    kind: 'question';
    id?: string | number;
    name: string;
    text: string;
    actions: string[];
    /** `answering`: the user clicked, the server has not said yet. */
    state: QuestionState | 'answering';
    answer?: string | null;
    timeoutSeconds?: number;
    /** What `Allow for this session` allows. */
    covers?: string;
}

export interface NoteItem extends Base {
    kind: 'note';
    text: string;
    tone: 'info' | 'warning' | 'error';
    actions?: ChatAction[];
}

export interface StatusItem extends Base {
    kind: 'status';
    status: string;
    error?: string;
    usage?: Usage;
    /** Whether the turn's edits can be undone from here. */
    undo: 'none' | 'available' | 'running' | 'done';
    /** For a failed turn: the ways out (Retry, Open Settings, Choose Model…). */
    actions?: ChatAction[];
}

/** A review that belongs to no edit card (an undo's). */
export interface ReviewItem extends Base {
    kind: 'review';
    /** What is reviewed: `Undo of turn 2`, or the edit's label. */
    title: string;
    review: ReviewRef;
}

export type ChatItem = PromptItem | AnswerItem | ToolItem | EditItem | QuestionItem | NoteItem | StatusItem | ReviewItem;

/** What a change of the model asks the view to draw again. */
export interface Change {
    upsert: ChatItem[];
    remove: number[];
}

/** The session's figures for the header. */
export interface Summary {
    usage: Usage;
    contextTokens?: number;
    contextWindow?: number;
}

const CONTEXT_FILES_LEAD = 'Files the user added as context (read them):';
const CONTEXT_PROBLEMS_LEAD = 'Problems the user added as context:';

/**
 * What the user added to a prompt with `#`: files (paths), problems (one line each), and
 * `#codebase` (the server searches the workspace for the prompt's terms first).
 */
export interface AddedContext {
    files: readonly string[];
    problems: readonly string[];
    codebase?: boolean;
}

/**
 * The prompt as sent: `#codebase` first when added, what the user typed, then the problems and
 * the files they added with `#`.
 */
export function withContext(text: string, added: AddedContext): string {
    let prompt = added.codebase && !text.startsWith(`${CODEBASE} `) ? `${CODEBASE} ${text}` : text;
    if (added.problems.length > 0) {
        prompt += `\n\n${CONTEXT_PROBLEMS_LEAD}\n${added.problems.map((line) => `- ${line}`).join('\n')}`;
    }
    if (added.files.length > 0) {
        prompt += `\n\n${CONTEXT_FILES_LEAD} ${added.files.map((file) => `\`${file}\``).join(', ')}`;
    }
    return prompt;
}

/** The inverse of `withContext`: what the user typed, and what they added. */
export function splitContext(prompt: string): { text: string; files: string[]; problems: string[]; codebase: boolean } {
    const codebase = prompt.startsWith(`${CODEBASE} `);
    let text = codebase ? prompt.slice(CODEBASE.length + 1) : prompt;
    let files: string[] = [];
    const at = text.lastIndexOf(`\n\n${CONTEXT_FILES_LEAD} `);
    if (at >= 0) {
        const tail = text.slice(at + CONTEXT_FILES_LEAD.length + 3);
        const found = [...tail.matchAll(/`([^`]+)`/g)].map((match) => match[1] as string);
        if (found.length > 0 && tail.replace(/`[^`]+`(, )?/g, '') === '') {
            files = found;
            text = text.slice(0, at);
        }
    }
    let problems: string[] = [];
    const from = text.lastIndexOf(`\n\n${CONTEXT_PROBLEMS_LEAD}\n`);
    if (from >= 0) {
        const lines = text.slice(from + CONTEXT_PROBLEMS_LEAD.length + 3).split('\n');
        if (lines.length > 0 && lines.every((line) => line.startsWith('- '))) {
            problems = lines.map((line) => line.slice(2));
            text = text.slice(0, from);
        }
    }
    return { text, files, problems, codebase };
}

/**
 * The change an edit tool call proposes, as a diff to show before (or instead of) what landed:
 * `edit_file`'s old and new text, `apply_patch`'s patch, `write_file`'s new file.
 */
export function proposalDiff(name: string, args: unknown): string | undefined {
    if (!args || typeof args !== 'object') {
        return undefined;
    }
    const record = args as Record<string, unknown>;
    const path = typeof record.path === 'string' ? record.path : 'file';
    if (name === 'edit_file' && typeof record.old === 'string' && typeof record.new === 'string') {
        return [`--- a/${path}`, `+++ b/${path}`, ...lineDiff(record.old, record.new)].join('\n');
    }
    if (name === 'write_file' && typeof record.content === 'string') {
        return [`--- /dev/null`, `+++ b/${path}`, ...lineDiff('', record.content)].join('\n');
    }
    if (name === 'apply_patch' && typeof record.patch === 'string') {
        return record.patch.replace(/\n+$/, '');
    }
    return undefined;
}

/** The changed lines of `before` → `after`, each run with a line of context either side. */
function lineDiff(before: string, after: string): string[] {
    const diff = unifiedDiff(before, after, false);
    return diff === '' ? [] : diff.split('\n');
}

/** `hello.py:3-5` */
export function selectionLabel(selection: SelectionRef): string {
    if (!selection.startLine) {
        return selection.path;
    }
    const end = selection.endLine ?? selection.startLine;
    return end === selection.startLine ? `${selection.path}:${selection.startLine}` : `${selection.path}:${selection.startLine}-${end}`;
}

/**
 * What became of an edit, from the text the model was told (`toolResult.result`): applied,
 * partly, rejected or failed; each hunk's outcome; the diff of what landed.
 */
export function editOutcome(
    result: string | undefined,
    ok: boolean | undefined,
    facts?: readonly HunkFact[],
): { state: EditItem['state']; hunks: HunkOutcome[]; diff?: string } {
    const text = result ?? '';
    if (ok === false) {
        return { state: /the user rejected/.test(text) ? 'rejected' : 'failed', hunks: [] };
    }
    const start = text.search(/^--- /m);
    const landedDiff = start >= 0 ? text.slice(start).replace(/\n+$/, '') : undefined;
    if (facts && facts.length > 0) {
        // What the server says of each hunk (older servers: read from the text below).
        const several = new Set(facts.map((fact) => fact.path)).size > 1;
        const hunks = facts.map((fact): HunkOutcome => {
            const where = several ? `${fact.path} · ` : '';
            const status = (['accepted', 'rejected', 'modified', 'user'] as const).find((known) => known === fact.status) ?? 'modified';
            const label = status === 'user' ? where + fact.what : where + [fact.hunk, fact.label, fact.what].filter(Boolean).join(' · ');
            return { label, status };
        });
        const agents = hunks.filter((hunk) => hunk.status !== 'user');
        const whole = agents.every((hunk) => hunk.status === 'accepted');
        return { state: whole ? 'applied' : 'partial', hunks, diff: landedDiff };
    }
    const hunks: HunkOutcome[] = [];
    // `- hunk 2 (starting 'x = 1'): replacing line 4: not applied by the user (…)`
    const told = /^- (hunks? [\d-]+)(?: \((.+?)\))?: (.+?): (applied|not applied by the user|changed by the user before applying)\b/gm;
    const statuses: Record<string, HunkOutcome['status']> = {
        applied: 'accepted',
        'not applied by the user': 'rejected',
        'changed by the user before applying': 'modified',
    };
    for (const match of text.matchAll(told)) {
        const label = [match[1], match[2], match[3]].filter(Boolean).join(' · ');
        hunks.push({ label, status: statuses[match[4] ?? ''] ?? 'accepted' });
    }
    if (hunks.length > 0) {
        const kept = hunks.filter((hunk) => hunk.status === 'accepted').length;
        return { state: kept === hunks.length ? 'applied' : 'partial', hunks };
    }
    const diff = landedDiff;
    for (const where of changedLines(diff ?? '')) {
        hunks.push({ label: `hunk ${hunks.length + 1} · ${where}`, status: 'accepted' });
    }
    const all = /\(all (\d+) hunks as proposed\)/.exec(text);
    if (hunks.length === 0 && all) {
        for (let i = 1; i <= Number(all[1]); i++) {
            hunks.push({ label: `hunk ${i}`, status: 'accepted' });
        }
    }
    return { state: ok === undefined ? 'failed' : 'applied', hunks, diff };
}

/**
 * Where each hunk of a unified diff changed the new text, without its context lines:
 * `line 2`, `lines 3-5`, or `after line 7` for lines removed only.
 */
export function changedLines(diff: string): string[] {
    const found: string[] = [];
    let line = 0;
    let first: number | undefined;
    let last: number | undefined;
    let removedAt: number | undefined;
    const close = (): void => {
        if (first !== undefined && last !== undefined) {
            found.push(first === last ? `line ${first}` : `lines ${first}-${last}`);
        } else if (removedAt !== undefined) {
            found.push(removedAt > 1 ? `after line ${removedAt - 1}` : 'at the start');
        }
        first = last = removedAt = undefined;
    };
    let inHunk = false;
    for (const text of diff.split('\n')) {
        const header = /^@@ -\d+(?:,\d+)? \+(\d+)(?:,\d+)? @@/.exec(text);
        if (header) {
            if (inHunk) {
                close();
            }
            inHunk = true;
            line = Number(header[1]);
        } else if (!inHunk || text.startsWith('--- ') || text.startsWith('+++ ')) {
            if (inHunk && text.startsWith('--- ')) {
                close();
                inHunk = false;
            }
        } else if (text.startsWith('+')) {
            first ??= line;
            last = line;
            line++;
        } else if (text.startsWith('-')) {
            removedAt ??= line;
        } else if (text.startsWith(' ')) {
            line++;
        }
    }
    if (inHunk) {
        close();
    }
    return found;
}

/** How a permission was decided, in a few words. */
export function permissionText(permission: { decision?: string; reason?: string; scope?: string } | null | undefined): string | undefined {
    if (!permission?.decision) {
        return undefined;
    }
    const scope = permission.scope ? ` (${permission.scope})` : '';
    const reason = permission.reason ? `: ${permission.reason}` : '';
    return `${permission.decision}${scope}${reason}`;
}

function compactionText(strategy: string | undefined, before: number | undefined, after: number | undefined): string {
    const figures = before !== undefined && after !== undefined ? `: ${before} → ${after} tokens` : '';
    return `Context compacted (${strategy ?? 'compact'})${figures}`;
}

function undoText(turn: number | undefined, files: readonly string[] | undefined, turns?: readonly number[]): string {
    const list = files && files.length > 0 ? `: ${files.join(', ')}` : '';
    if (turns && turns.length > 0) {
        return `Rewound to before turn ${turn ?? turns[0]} (turn${turns.length > 1 ? 's' : ''} ${turns.join(', ')} undone)${list}`;
    }
    return `Turn ${turn ?? '?'} undone${list}`;
}

function rewoundText(to: number, turns: readonly number[]): string {
    const which = turns.length > 1 ? `turns ${turns.join(', ')}` : `turn ${turns[0] ?? to}`;
    return `Conversation rewound to before turn ${to} (${which} folded)`;
}

export class ChatModel {
    items: ChatItem[] = [];
    /** The session shown (undefined: none yet; the next turn makes one). */
    session: string | undefined;
    /** The session's title (its first prompt). */
    title: string | undefined;
    private nextKey = 1;
    /** The turn running now: its number once the server said, and its open tool call. */
    private live: { turn: number; tool?: ToolItem | EditItem; usage: Usage } | undefined;
    /** Usage read from the history, waiting for its turn's status. */
    private heldUsage = new Map<number, Usage>();
    private context: { tokens?: number; window?: number } = {};
    /** Turns undone, and turns whose undo runs now (a rewind's: to before that turn). */
    private undone = new Set<number>();
    private undoing = new Set<number>();
    private rewinding = new Set<number>();
    /** Turns the conversation was rewound over. */
    private rewound = new Set<number>();
    /** A review that came with no edit card to carry it. */
    private looseReview: ReviewItem | undefined;

    constructor(private readonly root?: string) {}

    /** Show `session` from its history (empty for a new session). */
    load(session: string | undefined, history: readonly HistoryItem[], title?: string): void {
        this.items = [];
        this.session = session;
        this.title = title;
        this.live = undefined;
        this.heldUsage.clear();
        this.undone.clear();
        this.undoing.clear();
        this.rewinding.clear();
        this.rewound.clear();
        this.looseReview = undefined;
        this.context = {};
        for (const item of history) {
            this.fromHistory(item);
        }
        this.title ??= this.items.find((item): item is PromptItem => item.kind === 'prompt')?.text;
        this.refreshUndo();
    }

    /** The session's context use, from `lspAgent.status` (after a reload: no event said it yet). */
    setContext(tokens: number | undefined, window: number | undefined): void {
        this.context = { tokens: tokens ?? this.context.tokens, window: window ?? this.context.window };
    }

    /** Every turn's usage summed, and the context use now. */
    summary(): Summary {
        let usage = emptyUsage();
        const add = (turn: Usage): void => {
            usage = {
                calls: usage.calls + turn.calls,
                inputTokens: usage.inputTokens + turn.inputTokens,
                cachedTokens: usage.cachedTokens + turn.cachedTokens,
                outputTokens: usage.outputTokens + turn.outputTokens,
                cost: turn.cost !== undefined ? (usage.cost ?? 0) + turn.cost : usage.cost,
            };
        };
        for (const item of this.items) {
            if (item.kind === 'status' && item.usage) {
                add(item.usage);
            }
        }
        if (this.live && !this.items.some((i) => i.kind === 'status' && i.turn === this.live?.turn)) {
            add(this.live.usage);
        }
        if (usage.cost === undefined) {
            delete usage.cost;
        }
        return { usage, contextTokens: this.context.tokens, contextWindow: this.context.window };
    }

    get running(): boolean {
        return this.live !== undefined;
    }

    /** A turn starts (from the chat, the palette, a code action, another client): its prompt. */
    beginTurn(prompt: string, selection?: SelectionRef, mode?: 'ask'): Change {
        this.live = { turn: this.lastTurn() + 1, usage: emptyUsage() };
        const { text, files, problems, codebase } = splitContext(prompt);
        const item = this.add<PromptItem>({ kind: 'prompt', turn: this.live.turn, text, files, problems, codebase, selection, mode, rewind: false });
        this.title ??= text;
        return { upsert: [item, ...this.refreshUndo()], remove: [] };
    }

    /** The session's last turn still runs (the history was read meanwhile): follow its events. */
    continueTurn(): void {
        this.live = { turn: this.lastTurn(), usage: emptyUsage() };
    }

    /** One `lspAgent/event` of the running turn. */
    event(event: AgentEvent): Change {
        const change: Change = { upsert: [], remove: [] };
        if (!this.live) {
            return change;
        }
        const live = this.live;
        if (live.turn !== event.turn) {
            // The server numbers the turn: the items made before it said are renumbered.
            for (const item of this.items) {
                if (item.turn === live.turn) {
                    item.turn = event.turn;
                }
            }
            live.turn = event.turn;
        }
        switch (event.kind) {
            case 'text': {
                const last = this.items[this.items.length - 1];
                if (last?.kind === 'answer' && last.streaming && last.turn === live.turn) {
                    last.text += event.text;
                    change.upsert.push(last);
                } else if (event.text) {
                    change.upsert.push(this.add<AnswerItem>({ kind: 'answer', turn: live.turn, text: event.text, streaming: true }));
                }
                break;
            }
            case 'tool': {
                this.endStreaming(change);
                const item = this.toolItem(live.turn, event.name, event.args, 'running');
                live.tool = item;
                change.upsert.push(item);
                if (item.kind === 'edit' && this.looseReview) {
                    this.moveReview(item, change);
                }
                break;
            }
            case 'permission': {
                if (live.tool) {
                    live.tool.permission = permissionText(event);
                    change.upsert.push(live.tool);
                }
                break;
            }
            case 'question':
                change.upsert.push(this.question(event));
                break;
            case 'toolResult': {
                const tool = live.tool;
                live.tool = undefined;
                if (tool) {
                    this.settleTool(tool, event.ok, event.summary, event.result, event.hunks);
                    change.upsert.push(tool);
                }
                break;
            }
            case 'edit': {
                const card = this.lastOf('edit', live.turn) as EditItem | undefined;
                if (card) {
                    addFile(card, displayUri(event.uri, this.root), event.applied, event.applied);
                    change.upsert.push(card);
                }
                break;
            }
            case 'usage':
                live.usage = addUsage(live.usage, event);
                this.setContext(event.contextTokens, event.contextWindow);
                break;
            case 'compaction':
                if (event.phase === undefined) {
                    change.upsert.push(this.note(live.turn, compactionText(event.strategy, event.before, event.after), 'info'));
                }
                break;
            case 'status':
                this.endStreaming(change);
                change.upsert.push(this.status(live.turn, event.status, event.error, live.usage));
                break;
            default:
                break;
        }
        return change;
    }

    /**
     * The turn's request ended: its status (when no `status` event said it), and the answer
     * when none streamed. `answer` is the result's answer, `error` what ended the request.
     */
    endTurn(outcome: { status: string; answer?: string; error?: string }): Change {
        const change: Change = { upsert: [], remove: [] };
        const live = this.live;
        if (!live) {
            return change;
        }
        this.endStreaming(change);
        const turnItems = this.items.filter((item) => item.turn === live.turn);
        if (outcome.answer && !turnItems.some((item) => item.kind === 'answer')) {
            const at = turnItems.findIndex((item) => item.kind === 'status');
            const answer = this.make<AnswerItem>({ kind: 'answer', turn: live.turn, text: outcome.answer, streaming: false });
            if (at >= 0) {
                // Before the status line: the answer is part of the turn.
                this.items.splice(this.items.indexOf(turnItems[at] as ChatItem), 0, answer);
                change.upsert.push(answer, ...this.items.slice(this.items.indexOf(answer) + 1));
            } else {
                this.items.push(answer);
                change.upsert.push(answer);
            }
        }
        if (!turnItems.some((item) => item.kind === 'status')) {
            change.upsert.push(this.status(live.turn, outcome.status, outcome.error, live.usage));
        }
        change.upsert.push(...this.settle(live.turn));
        this.live = undefined;
        change.upsert.push(...this.refreshUndo());
        return change;
    }

    /**
     * The turn has ended: what was still under way in it ends too, in its real state — a
     * question the server no longer waits for is withdrawn, a tool call that never reported
     * stopped, an edit never decided stopped (applied when a file of it landed).
     */
    private settle(turn: number): ChatItem[] {
        const settled: ChatItem[] = [];
        for (const item of this.items) {
            if (item.turn !== turn) {
                continue;
            }
            if (item.kind === 'question' && (item.state === 'open' || item.state === 'answering')) {
                item.state = 'withdrawn';
                settled.push(item);
            } else if (item.kind === 'tool' && item.state === 'running') {
                item.state = 'stopped';
                settled.push(item);
            } else if (item.kind === 'edit' && (item.state === 'running' || item.state === 'review')) {
                item.state = item.files.some((file) => file.applied) ? 'applied' : 'stopped';
                item.review = undefined;
                settled.push(item);
            }
        }
        return settled;
    }

    /** A note of the extension's (an error, an undo that was refused). */
    addNote(text: string, tone: NoteItem['tone'] = 'info'): Change {
        return { upsert: [this.note(this.lastTurn(), text, tone)], remove: [] };
    }

    /** The user clicked an answer: the card waits for the server to confirm. */
    answering(key: number): Change {
        const item = this.items.find((i) => i.key === key);
        if (item?.kind !== 'question' || item.state !== 'open') {
            return { upsert: [], remove: [] };
        }
        item.state = 'answering';
        return { upsert: [item], remove: [] };
    }

    /** A review opened (`review`) or closed (undefined): on the running edit card, else its own card. */
    setReview(review: ReviewRef | undefined): Change {
        const change: Change = { upsert: [], remove: [] };
        const holder = this.items.find((item): item is EditItem => item.kind === 'edit' && item.review !== undefined);
        if (holder) {
            holder.review = undefined;
            if (holder.state === 'review') {
                holder.state = 'running';
            }
            change.upsert.push(holder);
        }
        if (this.looseReview) {
            change.remove.push(this.looseReview.key);
            this.items = this.items.filter((item) => item !== this.looseReview);
            this.looseReview = undefined;
        }
        if (!review) {
            return change;
        }
        const tool = this.live?.tool;
        if (tool?.kind === 'edit' && this.undoing.size === 0) {
            tool.review = review;
            tool.state = 'review';
            change.upsert.push(tool);
        } else {
            const undoing = [...this.undoing];
            const rewinding = [...this.rewinding];
            const title =
                rewinding.length > 0
                    ? `Rewind to before turn ${rewinding.join(', ')}: ${review.label}`
                    : undoing.length > 0
                      ? `Undo of turn ${undoing.join(', ')}: ${review.label}`
                      : review.label;
            this.looseReview = this.add<ReviewItem>({ kind: 'review', turn: this.lastTurn(), title, review });
            change.upsert.push(this.looseReview);
        }
        return change;
    }

    /**
     * An undo of `turn` was asked for (`running`), or ended (`done` when it was applied);
     * `turns`: a rewind to before `turn`, which undid all of them.
     */
    setUndo(turn: number, state: 'running' | 'done' | 'failed', files?: string[], turns?: number[], rewind = false): Change {
        const change: Change = { upsert: [], remove: [] };
        const all = turns && turns.length > 0 ? turns : [turn];
        if (state === 'running') {
            this.undoing.add(turn);
            if (rewind) {
                this.rewinding.add(turn);
            }
        } else {
            this.undoing.delete(turn);
            this.rewinding.delete(turn);
        }
        if (state === 'done') {
            all.forEach((undid) => this.undone.add(undid));
            change.upsert.push(this.note(this.lastTurn(), undoText(turn, files, turns), 'info'));
        }
        change.upsert.push(...this.refreshUndo());
        return change;
    }

    /**
     * The conversation went back to before `to`'s prompt: the items of the `turns` it went back
     * over stay, marked rewound (the webview folds them); a note says so.
     */
    setRewound(to: number, turns: readonly number[]): Change {
        const change: Change = { upsert: [], remove: [] };
        const over = new Set(turns.length > 0 ? turns : [to]);
        over.forEach((turn) => this.rewound.add(turn));
        for (const item of this.items) {
            if (over.has(item.turn) && !item.rewound && item.kind !== 'note' && item.kind !== 'review') {
                item.rewound = true;
                change.upsert.push(item);
            }
        }
        change.upsert.push(this.note(this.lastTurn(), rewoundText(to, [...over]), 'info'));
        change.upsert.push(...this.refreshUndo().filter((item) => !change.upsert.includes(item)));
        return change;
    }

    /** Whether the conversation was rewound over `turn`. */
    isRewound(turn: number): boolean {
        return this.rewound.has(turn);
    }

    /** The last turn whose edits can be undone. */
    lastUndoable(): number | undefined {
        const turns = this.items.filter((item): item is StatusItem => item.kind === 'status' && item.undo === 'available');
        return turns[turns.length - 1]?.turn;
    }

    /** The turns a rewind to before `turn`'s prompt would undo (turns from it with edits left). */
    rewindable(turn: number): number[] {
        return this.items
            .filter((item): item is StatusItem => item.kind === 'status' && item.turn >= turn && item.undo === 'available')
            .map((item) => item.turn);
    }

    /** The ways out of a failed turn, on its status line. */
    setActions(key: number, actions: ChatAction[]): Change {
        const item = this.items.find((i) => i.key === key);
        if (item?.kind !== 'status' && item?.kind !== 'note') {
            return { upsert: [], remove: [] };
        }
        item.actions = actions;
        return { upsert: [item], remove: [] };
    }

    private fromHistory(item: HistoryItem): void {
        const turn = item.turn;
        switch (item.type) {
            case 'prompt': {
                const { text, files, problems, codebase } = splitContext(item.text ?? '');
                const selection = item.selection
                    ? { path: item.selection.path, startLine: item.selection.startLine || undefined, endLine: item.selection.endLine || undefined }
                    : undefined;
                const mode = item.mode === 'ask' ? 'ask' : undefined;
                this.add<PromptItem>({ kind: 'prompt', turn, text, files, problems, codebase, selection, mode, rewind: false });
                break;
            }
            case 'answer':
                this.add<AnswerItem>({ kind: 'answer', turn, text: item.text ?? '', streaming: false });
                break;
            case 'tool': {
                const tool = this.toolItem(turn, item.name ?? '?', item.args, 'running');
                tool.permission = permissionText(item.permission);
                // Without `ok` the call never reported: its result is the line the turn's end
                // wrote in its place (`error: cancelled by the user …`). It stays as it is until
                // the turn's status settles it, as it did live.
                const reported = item.ok !== undefined && item.ok !== null;
                this.settleTool(tool, item.ok ?? undefined, item.summary ?? undefined, reported ? item.result : undefined, item.hunks);
                break;
            }
            case 'question':
                this.add<QuestionItem>({
                    kind: 'question',
                    turn,
                    name: item.name ?? '',
                    text: item.text ?? '',
                    actions: [],
                    state: (item.state as QuestionState | undefined) ?? 'answered',
                    answer: item.answer,
                });
                break;
            case 'edit': {
                const card = this.lastOf('edit', turn) as EditItem | undefined;
                if (card && item.path) {
                    addFile(card, item.path, item.applied ?? true, item.undoable ?? false);
                }
                break;
            }
            case 'compaction':
                this.note(turn, compactionText(item.strategy, item.before, item.after), 'info');
                break;
            case 'undo':
                if (typeof item.undid === 'number') {
                    this.undone.add(item.undid);
                }
                (item.turns ?? []).forEach((undid) => this.undone.add(undid));
                this.note(turn, undoText(item.undid, item.files, item.turns), 'info');
                break;
            case 'rewind':
                if (typeof item.to === 'number') {
                    this.setRewound(item.to, item.turns ?? []);
                }
                break;
            case 'usage': {
                const usage: Usage = {
                    calls: item.calls ?? 0,
                    inputTokens: item.inputTokens ?? 0,
                    cachedTokens: item.cachedTokens ?? 0,
                    outputTokens: item.outputTokens ?? 0,
                };
                if (typeof item.cost === 'number') {
                    usage.cost = item.cost;
                }
                this.heldUsage.set(turn, usage);
                break;
            }
            case 'status':
                this.status(turn, item.status ?? 'completed', item.error ?? undefined, this.heldUsage.get(turn));
                this.heldUsage.delete(turn);
                this.settle(turn); // as `endTurn` does live, whatever ended the turn
                break;
            default:
                break; // an item of a newer server: not shown
        }
    }

    private toolItem(turn: number, name: string, args: unknown, state: 'running'): ToolItem | EditItem {
        const line = describeArguments(args);
        if (EDIT_TOOLS.includes(name)) {
            return this.add<EditItem>({ kind: 'edit', turn, name, args, line, state, files: [], hunks: [], proposal: proposalDiff(name, args) });
        }
        return this.add<ToolItem>({ kind: 'tool', turn, name, args, line, state });
    }

    private settleTool(
        tool: ToolItem | EditItem,
        ok: boolean | undefined,
        summary: string | undefined,
        result: string | undefined,
        facts?: readonly HunkFact[],
    ): void {
        tool.summary = summary;
        tool.result = result;
        if (ok === undefined && result === undefined) {
            return; // it never reported (its turn was stopped): it stays as it was until its turn ends
        }
        if (tool.kind === 'edit') {
            const outcome = editOutcome(result, ok, facts);
            tool.state = outcome.state;
            tool.hunks = outcome.hunks;
            tool.diff = outcome.diff;
            tool.review = undefined;
        } else {
            tool.state = ok === false || ok === undefined ? 'failed' : 'done';
        }
    }

    private question(event: Extract<AgentEvent, { kind: 'question' }>): QuestionItem {
        const found = this.items.find(
            (item): item is QuestionItem => item.kind === 'question' && item.id !== undefined && item.id === event.id,
        );
        if (found) {
            found.state = event.state;
            found.answer = event.answer ?? found.answer;
            return found;
        }
        return this.add<QuestionItem>({
            kind: 'question',
            turn: event.turn,
            id: event.id,
            name: event.name,
            text: event.text,
            actions: event.actions ?? [],
            state: event.state,
            answer: event.answer,
            timeoutSeconds: event.timeoutSeconds,
            covers: event.sessionCovers,
        });
    }

    private status(turn: number, status: string, error: string | undefined, usage: Usage | undefined): StatusItem {
        // The turn's tokens; the context's fill is the session's, in the header.
        let tokens: Usage | undefined;
        if (usage && usage.calls > 0) {
            tokens = { ...usage };
            delete tokens.contextTokens;
            delete tokens.contextWindow;
        }
        const item = this.add<StatusItem>({ kind: 'status', turn, status, error, usage: tokens, undo: 'none' });
        item.undo = this.undoState(turn);
        return item;
    }

    private undoState(turn: number): StatusItem['undo'] {
        if (this.undone.has(turn)) {
            return 'done';
        }
        if (this.undoing.has(turn)) {
            return 'running';
        }
        const changed = this.items.some(
            (item) => item.kind === 'edit' && item.turn === turn && item.files.some((file) => file.applied && file.undoable),
        );
        return changed ? 'available' : 'none';
    }

    /** Each status item's undo state again, and each prompt's rewind; the ones that changed. */
    private refreshUndo(): ChatItem[] {
        const changed: ChatItem[] = [];
        for (const item of this.items) {
            if (item.kind === 'status') {
                const undo = this.undoState(item.turn);
                if (undo !== item.undo) {
                    item.undo = undo;
                    changed.push(item);
                }
            }
        }
        const running = this.live !== undefined || this.undoing.size > 0;
        for (const item of this.items) {
            if (item.kind === 'prompt') {
                const rewind = !running && !this.rewound.has(item.turn);
                if (rewind !== item.rewind) {
                    item.rewind = rewind;
                    changed.push(item);
                }
            }
        }
        return changed;
    }

    private moveReview(card: EditItem, change: Change): void {
        const loose = this.looseReview;
        if (!loose) {
            return;
        }
        this.looseReview = undefined;
        this.items = this.items.filter((item) => item !== loose);
        change.remove.push(loose.key);
        card.review = loose.review;
        card.state = 'review';
    }

    private endStreaming(change: Change): void {
        for (const item of this.items) {
            if (item.kind === 'answer' && item.streaming) {
                item.streaming = false;
                change.upsert.push(item);
            }
        }
    }

    private note(turn: number, text: string, tone: NoteItem['tone']): NoteItem {
        return this.add<NoteItem>({ kind: 'note', turn, text, tone });
    }

    private lastOf(kind: ChatItem['kind'], turn: number): ChatItem | undefined {
        for (let i = this.items.length - 1; i >= 0; i--) {
            const item = this.items[i] as ChatItem;
            if (item.kind === kind && item.turn === turn) {
                return item;
            }
        }
        return undefined;
    }

    private lastTurn(): number {
        return this.items.reduce((last, item) => Math.max(last, item.turn), 0);
    }

    private make<T extends ChatItem>(item: Omit<T, 'key'>): T {
        return { ...item, key: this.nextKey++ } as T;
    }

    private add<T extends ChatItem>(item: Omit<T, 'key'>): T {
        const made = this.make<T>(item);
        this.items.push(made);
        return made;
    }
}

function addFile(card: EditItem, path: string, applied: boolean, undoable: boolean): void {
    const known = card.files.find((file) => file.path === path);
    if (known) {
        known.applied = applied;
        known.undoable = known.undoable || undoable;
    } else {
        card.files.push({ path, applied, undoable });
    }
}
