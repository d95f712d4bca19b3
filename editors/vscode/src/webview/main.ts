/**
 * The chat webview: draws the conversation the extension holds (`ChatItem`s) and sends the
 * user's actions back. Everything is a native element (buttons, a textarea, `<details>`), so
 * it works with the keyboard alone and reads well to a screen reader; colours and fonts are VS
 * Code's theme variables; icons are the bundled codicons. Runs under a strict content security
 * policy: this script (by nonce) and the bundled stylesheet and font, nothing else.
 */
import { describeArguments, formatDuration, formatTokens, toolLabel, usageText } from '../events';
import { PromptHistory } from '../chat/input';
import { createMarkdown, settledLength } from '../chat/markdown';
import type { AnswerItem, ChatAction, ChatItem, EditItem, PromptItem, QuestionItem, ReviewRef, StatusItem, ToolItem } from '../chat/model';
import { selectionLabel } from '../chat/model';
import { tokenVariable } from '../chat/tokens';
import type { ChatState, FromWebview, ToWebview } from '../chat/wire';

interface VsCodeApi {
    postMessage(message: FromWebview): void;
    getState(): { draft?: string } | undefined;
    setState(state: { draft?: string }): void;
}

declare function acquireVsCodeApi(): VsCodeApi;

const vscode = acquireVsCodeApi();
const md = createMarkdown();

const log = element('log');
const welcome = element('welcome');
const input = element('input') as HTMLTextAreaElement;
const send = element('send') as HTMLButtonElement;
const stop = element('stop') as HTMLButtonElement;
const chips = element('chips');
const sessionTitle = element('session-title');
const usage = element('usage');
const live = element('live');
const notice = element('notice');
const noticeText = element('notice-text');
const noticeActions = element('notice-actions');
const queue = element('queue');
const newMessages = element('new-messages');
const modelName = element('model-name');
const modeButton = element('mode');
const sendLabel = element('send-label');

let state: ChatState = {
    running: false,
    summary: { usage: { calls: 0, inputTokens: 0, cachedTokens: 0, outputTokens: 0 } },
    files: [],
    codebase: false,
    mode: 'agent',
    pinned: false,
    queued: [],
};
/**
 * Whether the view follows the conversation: true at the bottom, false once the user scrolls
 * up; sending a prompt follows again. Content that arrives while not following shows the
 * "new messages" marker instead of moving the view.
 */
let following = true;
let prompts = new PromptHistory();
/** The selection chip the user removed (its label): not sent until the selection changes. */
let dismissed: string | undefined;
const elements = new Map<number, HTMLElement>();
/** The items drawn, by key (a streaming answer grows by `append`). */
const drawn = new Map<number, ChatItem>();
const pending = new Map<number, ChatItem>();
let frame = 0;

function element(id: string): HTMLElement {
    const found = document.getElementById(id);
    if (!found) {
        throw new Error(`the chat page has no #${id}`);
    }
    return found;
}

type Child = Node | string | undefined | false;

function h(tag: string, attributes: Record<string, string | undefined> = {}, ...children: Child[]): HTMLElement {
    const made = document.createElement(tag);
    for (const [name, value] of Object.entries(attributes)) {
        if (value !== undefined) {
            made.setAttribute(name, value);
        }
    }
    for (const child of children) {
        if (child !== undefined && child !== false) {
            made.append(child);
        }
    }
    return made;
}

function icon(name: string, extra = ''): HTMLElement {
    return h('i', { class: `codicon codicon-${name}${extra ? ' ' + extra : ''}`, 'aria-hidden': 'true' });
}

function button(label: string, action: string, options: { icon?: string; text?: string; kind?: string; key?: number; value?: string; title?: string } = {}): HTMLElement {
    return h(
        'button',
        {
            class: options.kind ?? 'secondary',
            'data-action': action,
            'data-key': options.key !== undefined ? String(options.key) : undefined,
            'data-value': options.value,
            'aria-label': label,
            title: options.title ?? label,
        },
        options.icon ? icon(options.icon) : undefined,
        options.text !== undefined ? h('span', {}, options.text) : undefined,
    );
}

function markdown(text: string): HTMLElement {
    const body = h('div', { class: 'markdown' });
    // markdown-it runs with raw HTML off: what it returns is its own markup, the text escaped.
    body.innerHTML = md.render(text);
    return body;
}

/** The settled part of each streaming answer, drawn once: its length and its HTML. */
const settled = new Map<number, { length: number; html: string }>();

/**
 * A streaming answer: its settled part from the cache (each newly settled part rendered once),
 * the rest rendered again. The finished answer is rendered whole, as the history shows it.
 */
function answerBody(item: AnswerItem): HTMLElement {
    if (!item.streaming) {
        settled.delete(item.key);
        return markdown(item.text);
    }
    const cut = settledLength(item.text);
    let cached = settled.get(item.key) ?? { length: 0, html: '' };
    if (cut > cached.length) {
        cached = { length: cut, html: cached.html + md.render(item.text.slice(cached.length, cut)) };
        settled.set(item.key, cached);
    }
    const body = h('div', { class: 'markdown' });
    body.innerHTML = cached.html + md.render(item.text.slice(cached.length));
    return body;
}

function pre(text: string, label: string): HTMLElement {
    return h('pre', { class: 'plain', 'aria-label': label, tabindex: '0' }, text);
}

function render(item: ChatItem): HTMLElement {
    switch (item.kind) {
        case 'prompt':
            return prompt(item);
        case 'answer': {
            const article = h('article', { class: `item answer${item.streaming ? ' streaming' : ''}`, 'aria-label': 'The agent answered', 'aria-busy': item.streaming ? 'true' : 'false' });
            article.append(h('div', { class: 'who' }, icon('hubot'), h('span', {}, 'LSP Agent')), answerBody(item));
            return article;
        }
        case 'tool':
            return tool(item);
        case 'edit':
            return edit(item);
        case 'question':
            return question(item);
        case 'note':
            return h(
                'div',
                { class: `item note tone-${item.tone}`, role: item.tone === 'error' ? 'alert' : undefined },
                icon(item.tone === 'error' ? 'error' : item.tone === 'warning' ? 'warning' : 'info'),
                h('span', {}, item.text),
                item.actions && item.actions.length > 0 ? actionButtons(item.key, item.actions) : undefined,
            );
        case 'status':
            return status(item);
        case 'review':
            return h(
                'article',
                { class: 'item card review-card', 'aria-label': `${item.title}: waiting for your review` },
                h('div', { class: 'card-title' }, icon('discard'), h('span', {}, item.title), h('span', { class: 'badge state-review' }, 'waiting for your review')),
                reviewButtons(item.review),
            );
        default:
            return h('div');
    }
}

function prompt(item: PromptItem): HTMLElement {
    const context =
        item.selection || item.files.length > 0 || item.problems.length > 0 || item.codebase
            ? h(
                  'div',
                  { class: 'chips', 'aria-label': 'Context sent with the prompt' },
                  item.codebase ? chip('#codebase', 'codebase', false, "The workspace was searched for the prompt's terms first") : undefined,
                  item.selection ? chip(selectionLabel(item.selection), 'selection') : undefined,
                  item.problems.length > 0 ? chip(`problems (${item.problems.length})`, 'problems', false, item.problems.join('\n')) : undefined,
                  ...item.files.map((file) => chip(file, 'file')),
              )
            : undefined;
    return h(
        'article',
        { class: 'item prompt', 'aria-label': item.mode === 'ask' ? 'You asked (ask mode)' : 'You asked' },
        h(
            'div',
            { class: 'who' },
            icon('account'),
            h('span', {}, 'You'),
            item.mode === 'ask' ? h('span', { class: 'badge mode-badge', title: 'Asked in ask mode: an answer without changes' }, 'Ask') : undefined,
            item.rewound ? h('span', { class: 'badge rewound-badge', title: 'The conversation was rewound to before this turn: the agent no longer sees it' }, 'Rewound') : undefined,
            item.rewound
                ? button(unfolded.has(item.turn) ? `Hide rewound turn ${item.turn}` : `Show rewound turn ${item.turn}`, 'foldRewound', {
                      icon: unfolded.has(item.turn) ? 'fold-up' : 'fold-down',
                      key: item.turn,
                      kind: 'icon-button fold-rewound',
                  })
                : undefined,
            item.rewind
                ? button(`Rewind: go back to before this prompt (turn ${item.turn})`, 'rewind', {
                      icon: 'history',
                      key: item.turn,
                      kind: 'icon-button rewind',
                      title: 'Rewind the files and the conversation to before this prompt',
                  })
                : undefined,
        ),
        h('div', { class: 'prompt-text' }, item.text),
        context,
    );
}

const CHIP_ICONS: Record<string, string> = { selection: 'selection', file: 'file', problems: 'warning', codebase: 'search' };
const CHIP_REMOVE: Record<string, string> = { selection: 'dropSelection', problems: 'removeProblems', codebase: 'removeCodebase' };

function chip(text: string, kind: 'selection' | 'file' | 'problems' | 'codebase', removable = false, title = text, action?: string): HTMLElement {
    const remove = action ?? CHIP_REMOVE[kind] ?? 'removeFile';
    return h(
        'span',
        { class: `chip chip-${kind}`, title },
        icon(CHIP_ICONS[kind] ?? 'file'),
        h('span', { class: 'chip-text' }, text),
        removable ? h('button', { class: 'chip-remove', 'data-action': remove, 'data-value': text, 'aria-label': `Do not send ${text}`, title: 'Remove' }, icon('close')) : undefined,
    );
}

function actionButtons(key: number, actions: readonly ChatAction[], action = 'action'): HTMLElement {
    return h(
        'span',
        { class: 'buttons item-actions' },
        ...actions.map((choice, index) =>
            button(choice.setting && choice.label.startsWith('Open') ? `${choice.label} (${choice.setting})` : choice.label, action, {
                text: choice.label,
                kind: index === 0 ? 'primary small' : 'secondary small',
                key,
                value: String(index),
                icon: ACTION_ICONS[choice.id],
            }),
        ),
    );
}

const ACTION_ICONS: Record<string, string> = {
    retry: 'debug-restart',
    openSetting: 'gear',
    chooseModel: 'hubot',
    setApiKey: 'key',
    showLog: 'output',
    restartServer: 'debug-restart',
};

const TOOL_ICONS: Record<string, string> = {
    bash: 'terminal',
    read_file: 'file',
    search: 'search',
    list_files: 'list-tree',
    todo: 'checklist',
    load_skill: 'book',
};

function stateIcon(state: string): HTMLElement {
    switch (state) {
        case 'running':
        case 'review':
            return icon('loading', 'codicon-modifier-spin state-icon');
        case 'stopped':
            return icon('circle-slash', 'state-icon stopped');
        case 'failed':
        case 'rejected':
            return icon('error', 'state-icon failed');
        case 'partial':
            return icon('warning', 'state-icon partial');
        default:
            return icon('check', 'state-icon ok');
    }
}

function tool(item: ToolItem): HTMLElement {
    const stateWord = item.state === 'running' ? 'running' : item.state === 'failed' ? 'failed' : item.state === 'stopped' ? 'stopped' : 'done';
    const details = h('details', { class: 'item tool' });
    const summary = h(
        'summary',
        { 'aria-label': `${toolLabel(item.name)} ${item.line}: ${stateWord}${item.summary ? `, ${item.summary}` : ''}` },
        stateIcon(item.state),
        icon(TOOL_ICONS[item.name] ?? 'tools'),
        h('span', { class: 'tool-name' }, toolLabel(item.name)),
        h('span', { class: 'tool-line' }, item.line),
        item.summary ? h('span', { class: 'tool-summary' }, item.summary) : item.state === 'stopped' ? h('span', { class: 'tool-summary' }, 'stopped') : undefined,
    );
    details.append(summary, toolDetails(item));
    return details;
}

function toolDetails(item: ToolItem | EditItem): HTMLElement {
    const body = h('div', { class: 'details' });
    if (item.kind === 'tool') {
        body.append(h('div', { class: 'label' }, 'Arguments'), pre(argumentsText(item.args), `${item.name} arguments`));
    }
    if (item.permission) {
        body.append(h('div', { class: 'label' }, 'Permission'), h('div', {}, item.permission));
    }
    if (item.result !== undefined) {
        body.append(h('div', { class: 'label' }, 'What the agent was told'), pre(item.result, `${item.name} result`));
    }
    return body;
}

function argumentsText(args: unknown): string {
    if (typeof args === 'string') {
        return args;
    }
    if (args && typeof args === 'object') {
        // Multi-line strings (a patch, a command) read better as they are than JSON-escaped.
        return Object.entries(args as Record<string, unknown>)
            .map(([key, value]) => `${key}: ${typeof value === 'string' ? value : JSON.stringify(value, null, 2)}`)
            .join('\n');
    }
    return describeArguments(args);
}

const EDIT_STATES: Record<EditItem['state'], string> = {
    running: 'proposing…',
    review: 'waiting for your review',
    applied: 'applied',
    partial: 'partly applied',
    rejected: 'rejected',
    failed: 'not applied',
    stopped: 'not applied: stopped',
};

const HUNK_ICONS: Record<string, string> = { accepted: 'check', rejected: 'close', modified: 'edit', user: 'person' };
const HUNK_WORDS: Record<string, string> = { accepted: 'accepted', rejected: 'rejected', modified: 'changed by you', user: 'your change' };

function edit(item: EditItem): HTMLElement {
    const target = item.files.map((file) => file.path).join(', ') || item.line;
    const card = h('article', { class: `item card edit state-${item.state}`, 'aria-label': `Edit of ${target}: ${EDIT_STATES[item.state]}` });
    card.append(
        h(
            'div',
            { class: 'card-title' },
            stateIcon(item.state),
            icon('diff'),
            h('span', { class: 'edit-target' }, target),
            h('span', { class: `badge state-${item.state}` }, EDIT_STATES[item.state]),
        ),
    );
    if (item.review) {
        card.append(reviewButtons(item.review));
    }
    if (item.summary && item.state !== 'running') {
        card.append(h('div', { class: 'edit-summary' }, item.summary));
    }
    if (item.hunks.length > 0) {
        card.append(
            h(
                'ul',
                { class: 'hunks', 'aria-label': 'What became of each hunk' },
                ...item.hunks.map((hunk) =>
                    h('li', { class: `hunk hunk-${hunk.status}` }, icon(HUNK_ICONS[hunk.status] ?? 'edit'), h('span', {}, `${hunk.label}: ${HUNK_WORDS[hunk.status] ?? hunk.status}`)),
                ),
            ),
        );
    }
    // Details: the diff — of what landed once it did, else of what the agent proposed.
    const more = h('details', { class: 'edit-details' }, h('summary', {}, 'Details'));
    const diff = item.diff ?? item.proposal;
    if (diff) {
        more.append(
            h('div', { class: 'label' }, item.diff ? 'What changed' : 'What the agent proposed'),
            markdown('```diff\n' + diff + '\n```'),
        );
    }
    more.append(toolDetails(item));
    card.append(more);
    return card;
}

function reviewButtons(review: ReviewRef): HTMLElement {
    return h(
        'div',
        { class: 'buttons', role: 'group', 'aria-label': `Review of ${review.label}` },
        button(`Review ${review.files.join(', ') || review.label} in the diff editor`, 'review', { icon: 'go-to-file', text: 'Review', value: 'show' }),
        button('Accept the edit', 'review', { icon: 'check', text: 'Accept', kind: 'primary', value: 'accept' }),
        button('Reject the edit', 'review', { icon: 'close', text: 'Reject', value: 'reject' }),
    );
}

const QUESTION_STATES: Record<string, string> = {
    answering: 'sending your answer…',
    timedOut: 'nobody answered in time: counts as Deny',
    withdrawn: 'withdrawn: the turn no longer waits for it',
};

function question(item: QuestionItem): HTMLElement {
    const open = item.state === 'open' || item.state === 'answering';
    const said = item.state === 'answered' ? `answered: ${item.answer ?? 'dismissed (Deny)'}` : (QUESTION_STATES[item.state] ?? item.state);
    const outcome = h(
        'span',
        { class: 'question-outcome' },
        icon(item.answer === 'Deny' || item.state === 'timedOut' ? 'circle-slash' : item.state === 'answered' ? 'check' : 'info'),
        h('span', {}, said),
    );
    if (!open) {
        // Answered: one line, the question inside it for whoever wants to read it again.
        const folded = h('details', { class: `item question folded state-${item.state}`, 'aria-label': `The agent asked about ${toolLabel(item.name)}: ${said}` });
        folded.append(
            h('summary', {}, icon('shield'), h('span', { class: 'tool-name' }, `Permission: ${toolLabel(item.name)}`), outcome),
            h('div', { class: 'details' }, h('div', { class: 'question-text' }, item.text)),
        );
        return folded;
    }
    const card = h('article', { class: `item card question state-${item.state}`, role: 'group', 'aria-label': `The agent asks about ${item.name}` });
    // What Allow for this session covers ends the question's text: said once, under the buttons.
    const text = item.covers && item.text.endsWith(item.covers) ? item.text.slice(0, -item.covers.length).trimEnd() : item.text;
    card.append(
        h('div', { class: 'card-title' }, icon('shield'), h('span', {}, `Permission: ${toolLabel(item.name)}`)),
        h('div', { class: 'question-text' }, text),
    );
    if (item.state === 'open' && item.actions.length > 0) {
        card.append(
            h(
                'div',
                { class: 'buttons' },
                ...item.actions.map((action, index) =>
                    button(action, 'answer', {
                        text: action,
                        kind: index === 0 ? 'primary' : 'secondary',
                        key: item.key,
                        value: action,
                        title: action === 'Allow for this session' && item.covers ? item.covers : action,
                    }),
                ),
            ),
        );
        if (item.covers) {
            card.append(h('div', { class: 'muted covers' }, icon('info'), h('span', {}, item.covers)));
        }
        if (item.timeoutSeconds) {
            card.append(h('div', { class: 'muted' }, `No answer in ${formatDuration(item.timeoutSeconds)} counts as Deny.`));
        }
    } else {
        card.append(outcome);
    }
    return card;
}

const STATUS_ICONS: Record<string, string> = { completed: 'pass', cancelled: 'circle-slash', failed: 'error', max_turns: 'warning' };

function status(item: StatusItem): HTMLElement {
    const words = item.status === 'max_turns' ? 'stopped at the turn limit' : item.status;
    const line = h('div', { class: `item status status-${item.status}`, role: item.status === 'failed' ? 'alert' : undefined });
    line.append(icon(STATUS_ICONS[item.status] ?? 'info'), h('span', { class: 'status-word' }, words));
    if (item.error) {
        line.append(h('span', { class: 'status-error' }, item.error));
    }
    if (item.usage) {
        line.append(h('span', { class: 'status-usage', title: 'Tokens this turn used' }, usageText(item.usage)));
    }
    if (item.undo === 'available') {
        line.append(button(`Undo turn ${item.turn}: restore the files its edits changed`, 'undo', { icon: 'discard', text: 'Undo turn', key: item.turn, kind: 'secondary small' }));
    } else if (item.undo === 'running') {
        line.append(h('span', { class: 'muted' }, icon('loading', 'codicon-modifier-spin'), ' undoing…'));
    } else if (item.undo === 'done') {
        line.append(h('span', { class: 'muted' }, icon('discard'), ' undone'));
    }
    if (item.actions && item.actions.length > 0) {
        line.append(actionButtons(item.key, item.actions));
    }
    return line;
}

/** Whether the view is at the bottom of the conversation (within a few pixels). */
function atBottom(): boolean {
    return log.scrollHeight - log.scrollTop - log.clientHeight < 24;
}

/** After new content: follow it when following, else say there is more below. */
function arrived(): void {
    if (following) {
        toBottom();
    } else if (!atBottom()) {
        newMessages.hidden = false;
    }
}

function toBottom(): void {
    following = true;
    log.scrollTop = log.scrollHeight;
    newMessages.hidden = true;
}

log.addEventListener('scroll', () => {
    // The user's own scrolling decides; reaching the bottom follows the conversation again.
    following = atBottom();
    if (following) {
        newMessages.hidden = true;
    }
});

/** Rewound turns whose items the user unfolded (their prompt row always shows). */
const unfolded = new Set<number>();

function place(item: ChatItem, before?: number): void {
    const made = render(item);
    made.dataset.key = String(item.key);
    if (item.rewound) {
        made.classList.add('rewound');
        made.dataset.turn = String(item.turn);
        made.hidden = item.kind !== 'prompt' && !unfolded.has(item.turn);
    }
    const old = elements.get(item.key);
    if (old) {
        // A <details> the user opened stays open when its item is drawn again.
        const opened = [...old.querySelectorAll('details')].map((d) => d.open);
        if (old instanceof HTMLDetailsElement) {
            (made as HTMLDetailsElement).open = old.open;
        } else {
            made.querySelectorAll('details').forEach((d, i) => (d.open = opened[i] ?? false));
        }
        const hadFocus = old.contains(document.activeElement);
        old.replaceWith(made);
        if (hadFocus) {
            // The card changed under the keyboard (a question answered): the focus stays near.
            const next = made.querySelector('button:not([disabled]), summary') as HTMLElement | null;
            (next ?? input).focus();
        }
    } else {
        const next = before !== undefined ? elements.get(before) : undefined;
        if (next) {
            log.insertBefore(made, next);
        } else {
            log.append(made);
        }
    }
    elements.set(item.key, made);
    drawn.set(item.key, item);
}

function drawPending(): void {
    frame = 0;
    for (const [, item] of pending) {
        place(item);
    }
    pending.clear();
    arrived();
}

function flushPending(): void {
    if (frame) {
        cancelAnimationFrame(frame);
        drawPending();
    }
}

function drawState(): void {
    welcome.hidden = elements.size > 0;
    log.hidden = elements.size === 0;
    sessionTitle.textContent = state.title ?? 'New conversation';
    element('session').setAttribute('aria-label', `Session: ${state.title ?? 'new conversation'}. Pick another session`);
    const figures = state.summary.usage;
    const parts: string[] = [];
    if (figures.calls > 0) {
        parts.push(`${formatTokens(figures.inputTokens)} in · ${formatTokens(figures.outputTokens)} out`);
    }
    if (state.summary.contextTokens !== undefined && state.summary.contextWindow) {
        parts.push(`${Math.round((state.summary.contextTokens / state.summary.contextWindow) * 100)}% context`);
    }
    if (figures.cost !== undefined) {
        parts.push(`$${figures.cost < 0.01 ? figures.cost.toFixed(4) : figures.cost.toFixed(2)}`);
    }
    usage.textContent = parts.join(' · ');
    usage.title = figures.calls > 0 ? `This session: ${usageText({ ...figures, contextTokens: state.summary.contextTokens, contextWindow: state.summary.contextWindow })}` : '';
    // While a turn runs, Send queues the prompt: it goes when the turn ends.
    sendLabel.textContent = state.running ? 'Queue' : 'Send';
    send.setAttribute('aria-label', state.running ? 'Queue the prompt: it is sent when the turn ends' : 'Send');
    stop.hidden = !state.running;
    modelName.textContent = state.model ?? 'no model';
    element('model').setAttribute('aria-label', `Model: ${state.model ?? 'none set'}. Choose the model`);
    const asking = state.mode === 'ask';
    element('mode-name').textContent = asking ? 'Ask' : 'Agent';
    modeButton.setAttribute('aria-pressed', asking ? 'true' : 'false');
    modeButton.setAttribute('aria-label', asking ? 'Mode: Ask, answers without changes. Switch to Agent' : 'Mode: Agent, may edit and run commands. Switch to Ask');
    modeButton.title = asking
        ? 'Ask: answers only; the agent reads and searches, but edits nothing and runs no command. Click for Agent'
        : 'Agent: the agent may edit files and run commands (each reviewed or asked). Click for Ask: answers only, no changes';
    modeButton.classList.toggle('asking', asking);
    input.placeholder = asking ? 'Ask a question… (answers only, no changes; # adds context)' : 'Ask the agent… (# adds context)';
    noticeText.textContent = state.offline ?? '';
    noticeActions.replaceChildren(...(state.offlineActions ?? []).map((choice, index) => button(choice.label, 'offlineAction', { text: choice.label, kind: index === 0 ? 'primary small' : 'secondary small', value: String(index) })));
    notice.hidden = !state.offline;
    const selection = state.selection ? selectionLabel(state.selection) : undefined;
    if (selection !== dismissed) {
        dismissed = undefined;
    }
    chips.replaceChildren(
        ...(selection && !dismissed ? [chip(state.pinned ? `${selection} (pinned)` : selection, 'selection', true, selection, state.pinned ? 'unpinSelection' : undefined)] : []),
        ...(state.codebase ? [chip('#codebase', 'codebase', true, "The workspace is searched for your prompt's terms first")] : []),
        ...(state.problems ? [chip(state.problems.label, 'problems', true, state.problems.lines.join('\n'))] : []),
        ...state.files.map((file) => chip(file, 'file', true)),
    );
    chips.hidden = chips.childElementCount === 0;
    queue.replaceChildren(
        ...state.queued.map((entry) =>
            h(
                'li',
                { class: `queued${entry.held ? ' held' : ''}`, 'aria-label': `Queued: ${entry.text}` },
                icon(entry.why === 'server' ? 'debug-disconnect' : 'clock'),
                h('span', { class: 'queued-why' }, entry.held ? 'held:' : entry.why === 'server' ? 'waits for the server:' : 'queued:'),
                h('span', { class: 'queued-text', title: entry.text }, entry.text),
                entry.held ? button(`Send the queued prompt now: ${entry.text}`, 'sendQueued', { icon: 'send', text: 'Send', kind: 'secondary small', key: entry.id }) : undefined,
                button(`Remove the queued prompt: ${entry.text}`, 'unqueue', { icon: 'close', kind: 'icon-button', key: entry.id, title: 'Remove from the queue (back into the input)' }),
            ),
        ),
    );
    queue.hidden = state.queued.length === 0;
}

function sendPrompt(): void {
    const text = input.value;
    if (!text.trim()) {
        return;
    }
    const selection = state.selection ? selectionLabel(state.selection) : undefined;
    vscode.postMessage({ type: 'send', text, useSelection: selection !== undefined && dismissed === undefined });
    prompts.add(text);
    input.value = '';
    vscode.setState({ draft: '' });
    resize();
    // What the user sends, they want to see: the view goes to the bottom and follows.
    toBottom();
}

function resize(): void {
    input.style.height = 'auto';
    input.style.height = `${Math.min(input.scrollHeight, 240)}px`;
}

window.addEventListener('message', (event: MessageEvent<ToWebview>) => {
    const message = event.data;
    switch (message.type) {
        case 'reset': {
            log.replaceChildren();
            elements.clear();
            drawn.clear();
            settled.clear();
            pending.clear();
            for (const item of message.items) {
                place(item);
            }
            state = message.state;
            prompts = new PromptHistory(message.prompts);
            drawState();
            toBottom();
            break;
        }
        case 'upsert':
            if (elements.has(message.item.key)) {
                pending.set(message.item.key, message.item);
                frame ||= requestAnimationFrame(drawPending);
            } else {
                // What changed before comes first: the DOM never shows a later item beside an
                // earlier one's stale state (the end of a turn beside its answer still streaming).
                flushPending();
                place(message.item, message.before);
                welcome.hidden = true;
                log.hidden = false;
                arrived();
            }
            break;
        case 'append': {
            const item = pending.get(message.key) ?? drawn.get(message.key);
            if (item?.kind === 'answer') {
                item.text += message.text;
                pending.set(item.key, item);
                frame ||= requestAnimationFrame(drawPending);
            }
            break;
        }
        case 'remove':
            flushPending();
            elements.get(message.key)?.remove();
            elements.delete(message.key);
            drawn.delete(message.key);
            pending.delete(message.key);
            break;
        case 'state':
            state = message.state;
            drawState();
            break;
        case 'announce':
            live.textContent = message.text;
            break;
        case 'focus':
            input.focus();
            break;
        case 'restorePrompt':
            // The prompt the conversation went back to before: in the input again, to edit and send.
            input.value = input.value.trim() ? `${message.text}\n${input.value.trim()}` : message.text;
            vscode.setState({ draft: input.value });
            resize();
            input.focus();
            input.setSelectionRange(input.value.length, input.value.length);
            break;
        case 'draft':
            // A prompt taken out of the queue: back in the input, after what is there.
            input.value = input.value.trim() ? `${input.value.trimEnd()}\n${message.text}` : message.text;
            vscode.setState({ draft: input.value });
            resize();
            input.focus();
            break;
        case 'tokenColors': {
            const root = document.documentElement.style;
            for (const [name, color] of Object.entries(message.colors)) {
                root.setProperty(tokenVariable(name), color);
            }
            for (const [name, style] of Object.entries(message.styles)) {
                root.setProperty(tokenVariable(name, 'style'), style.includes('italic') ? 'italic' : 'normal');
            }
            break;
        }
    }
});

document.addEventListener('click', (event) => {
    const target = event.target as HTMLElement;
    const link = target.closest('a');
    if (link) {
        event.preventDefault();
        const href = link.getAttribute('href');
        if (href) {
            vscode.postMessage({ type: 'open', target: href });
        }
        return;
    }
    const pressed = target.closest('button');
    if (!pressed || pressed.disabled) {
        return;
    }
    const action = pressed.dataset.action;
    const key = Number(pressed.dataset.key);
    const value = pressed.dataset.value ?? '';
    const code = (): string => pressed.closest('.code-block')?.querySelector('code')?.textContent ?? '';
    switch (action) {
        case 'copy':
            vscode.postMessage({ type: 'copy', text: code() });
            break;
        case 'insert':
            vscode.postMessage({ type: 'insert', text: code() });
            break;
        case 'apply':
            vscode.postMessage({ type: 'apply', text: code(), language: pressed.dataset.language ?? '' });
            break;
        case 'action':
            vscode.postMessage({ type: 'action', key, index: Number(value) });
            break;
        case 'offlineAction':
            vscode.postMessage({ type: 'offlineAction', index: Number(value) });
            break;
        case 'rewind':
            vscode.postMessage({ type: 'rewind', turn: key });
            break;
        case 'foldRewound':
            foldRewound(key, pressed);
            break;
        case 'unqueue':
            vscode.postMessage({ type: 'unqueue', id: key });
            break;
        case 'sendQueued':
            vscode.postMessage({ type: 'sendQueued', id: key });
            break;
        case 'removeProblems':
            vscode.postMessage({ type: 'removeProblems' });
            input.focus();
            break;
        case 'removeCodebase':
            vscode.postMessage({ type: 'removeCodebase' });
            input.focus();
            break;
        case 'unpinSelection':
            vscode.postMessage({ type: 'unpinSelection' });
            input.focus();
            break;
        case 'answer':
            vscode.postMessage({ type: 'answer', key, action: value });
            break;
        case 'review':
            vscode.postMessage({ type: 'review', action: value as 'show' | 'accept' | 'reject' });
            break;
        case 'undo':
            vscode.postMessage({ type: 'undo', turn: key });
            break;
        case 'removeFile':
            vscode.postMessage({ type: 'removeFile', path: value });
            input.focus();
            break;
        case 'dropSelection':
            dismissed = value;
            drawState();
            input.focus();
            break;
        default:
            break;
    }
});

/** Show or hide what a rewound turn said and did (the model no longer sees it; the user can). */
function foldRewound(turn: number, pressed: HTMLElement): void {
    const open = !unfolded.has(turn);
    if (open) {
        unfolded.add(turn);
    } else {
        unfolded.delete(turn);
    }
    log.querySelectorAll<HTMLElement>(`.rewound[data-turn="${turn}"]:not(.prompt)`).forEach((made) => (made.hidden = !open));
    const label = `${open ? 'Hide' : 'Show'} rewound turn ${turn}`;
    pressed.setAttribute('aria-label', label);
    pressed.title = label;
    pressed.setAttribute('aria-expanded', String(open));
    pressed.replaceChildren(icon(open ? 'fold-up' : 'fold-down'));
}

send.addEventListener('click', sendPrompt);
stop.addEventListener('click', () => vscode.postMessage({ type: 'stop' }));
element('new').addEventListener('click', () => vscode.postMessage({ type: 'newSession' }));
element('session').addEventListener('click', () => vscode.postMessage({ type: 'pickSession' }));
element('model').addEventListener('click', () => vscode.postMessage({ type: 'chooseModel' }));
modeButton.addEventListener('click', () => vscode.postMessage({ type: 'setMode', mode: state.mode === 'ask' ? 'agent' : 'ask' }));
element('attach').addEventListener('click', () => vscode.postMessage({ type: 'addContext' }));
newMessages.addEventListener('click', () => {
    toBottom();
    input.focus();
});

/** Tell the extension where the keyboard is: a review opening then leaves it here. */
function reportFocus(): void {
    vscode.postMessage({ type: 'inputFocus', focused: document.hasFocus() && document.activeElement === input });
}
input.addEventListener('focus', reportFocus);
input.addEventListener('blur', reportFocus);
window.addEventListener('focus', reportFocus);
window.addEventListener('blur', reportFocus);

input.addEventListener('keydown', (event) => {
    if (event.isComposing) {
        return;
    }
    if (event.key === 'Enter' && !event.shiftKey && !event.altKey) {
        event.preventDefault();
        sendPrompt();
    } else if ((event.key === 'ArrowUp' || event.key === 'ArrowDown') && !event.shiftKey && !event.altKey && !event.ctrlKey && !event.metaKey) {
        if (input.selectionStart !== input.selectionEnd) {
            return;
        }
        const shown = prompts.move(event.key === 'ArrowUp' ? -1 : 1, input.value, input.selectionStart);
        if (shown !== undefined) {
            event.preventDefault();
            input.value = shown;
            const caret = event.key === 'ArrowUp' ? 0 : shown.length;
            input.setSelectionRange(caret, caret);
            resize();
        }
    } else if (event.key === 'Escape' && state.running) {
        event.preventDefault();
        vscode.postMessage({ type: 'stop' });
    }
});

input.addEventListener('input', (event) => {
    // `#` typed at the start of a word opens the context picker (the selection, problems, a
    // file); the `#` is the picker's, not the prompt's.
    const typed = (event as InputEvent).data;
    const at = input.selectionStart;
    if (typed === '#' && (at === 1 || /\s/.test(input.value.charAt(at - 2)))) {
        input.value = input.value.slice(0, at - 1) + input.value.slice(at);
        input.setSelectionRange(at - 1, at - 1);
        vscode.postMessage({ type: 'addContext' });
    }
    vscode.setState({ draft: input.value });
    resize();
});

input.value = vscode.getState()?.draft ?? '';
resize();
vscode.postMessage({ type: 'ready' });
