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
import type { AnswerItem, ChatItem, EditItem, QuestionItem, ReviewRef, StatusItem, ToolItem } from '../chat/model';
import { selectionLabel } from '../chat/model';
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

let state: ChatState = { running: false, summary: { usage: { calls: 0, inputTokens: 0, cachedTokens: 0, outputTokens: 0 } }, files: [] };
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
            return h(
                'article',
                { class: 'item prompt', 'aria-label': 'You asked' },
                h('div', { class: 'who' }, icon('account'), h('span', {}, 'You')),
                h('div', { class: 'prompt-text' }, item.text),
                item.selection || item.files.length > 0
                    ? h(
                          'div',
                          { class: 'chips', 'aria-label': 'Context sent with the prompt' },
                          item.selection ? chip(selectionLabel(item.selection), 'selection') : undefined,
                          ...item.files.map((file) => chip(file, 'file')),
                      )
                    : undefined,
            );
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

function chip(text: string, kind: 'selection' | 'file', removable = false): HTMLElement {
    return h(
        'span',
        { class: `chip chip-${kind}`, title: text },
        icon(kind === 'selection' ? 'selection' : 'file'),
        h('span', { class: 'chip-text' }, text),
        removable
            ? h('button', { class: 'chip-remove', 'data-action': kind === 'selection' ? 'dropSelection' : 'removeFile', 'data-value': text, 'aria-label': `Do not send ${text}`, title: 'Remove' }, icon('close'))
            : undefined,
    );
}

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
    const stateWord = item.state === 'running' ? 'running' : item.state === 'failed' ? 'failed' : 'done';
    const details = h('details', { class: 'item tool' });
    const summary = h(
        'summary',
        { 'aria-label': `${toolLabel(item.name)} ${item.line}: ${stateWord}${item.summary ? `, ${item.summary}` : ''}` },
        stateIcon(item.state),
        icon(TOOL_ICONS[item.name] ?? 'tools'),
        h('span', { class: 'tool-name' }, toolLabel(item.name)),
        h('span', { class: 'tool-line' }, item.line),
        item.summary ? h('span', { class: 'tool-summary' }, item.summary) : undefined,
    );
    details.append(summary, toolDetails(item));
    return details;
}

function toolDetails(item: ToolItem | EditItem): HTMLElement {
    const body = h('div', { class: 'details' });
    body.append(h('div', { class: 'label' }, 'Arguments'), pre(argumentsText(item.args), `${item.name} arguments`));
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
};

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
                    h('li', { class: `hunk hunk-${hunk.status}` }, icon(hunk.status === 'accepted' ? 'check' : hunk.status === 'rejected' ? 'close' : 'edit'), h('span', {}, `${hunk.label}: ${hunk.status}`)),
                ),
            ),
        );
    }
    const more = h('details', { class: 'edit-details' }, h('summary', {}, 'Details'));
    if (item.diff) {
        more.append(markdown('```diff\n' + item.diff + '\n```'));
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
    const open = item.state === 'open';
    const card = h('article', { class: `item card question state-${item.state}`, role: 'group', 'aria-label': `The agent asks about ${item.name}` });
    card.append(
        h('div', { class: 'card-title' }, icon('shield'), h('span', {}, `Permission: ${toolLabel(item.name)}`)),
        h('div', { class: 'question-text' }, item.text),
    );
    if (open && item.actions.length > 0) {
        card.append(
            h(
                'div',
                { class: 'buttons' },
                ...item.actions.map((action, index) => button(action, 'answer', { text: action, kind: index === 0 ? 'primary' : 'secondary', key: item.key, value: action })),
            ),
        );
        if (item.timeoutSeconds) {
            card.append(h('div', { class: 'muted' }, `No answer in ${formatDuration(item.timeoutSeconds)} counts as Deny.`));
        }
    } else {
        const said = item.state === 'answered' ? `answered: ${item.answer ?? 'dismissed (Deny)'}` : (QUESTION_STATES[item.state] ?? item.state);
        card.append(h('div', { class: 'question-outcome' }, icon(item.answer === 'Deny' || item.state === 'timedOut' ? 'circle-slash' : item.state === 'answered' ? 'check' : 'info'), h('span', {}, said)));
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
    return line;
}

/** Keep the view at the bottom while it was there: a user who scrolled up stays where they are. */
function atBottom(): boolean {
    return log.scrollHeight - log.scrollTop - log.clientHeight < 40;
}

function place(item: ChatItem, before?: number): void {
    const made = render(item);
    made.dataset.key = String(item.key);
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
    const stick = atBottom();
    for (const [, item] of pending) {
        place(item);
    }
    pending.clear();
    if (stick) {
        log.scrollTop = log.scrollHeight;
    }
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
    send.hidden = state.running;
    stop.hidden = !state.running;
    notice.textContent = state.offline ?? '';
    notice.hidden = !state.offline;
    const selection = state.selection ? selectionLabel(state.selection) : undefined;
    if (selection !== dismissed) {
        dismissed = undefined;
    }
    chips.replaceChildren(
        ...(selection && !dismissed ? [chip(selection, 'selection', true)] : []),
        ...state.files.map((file) => chip(file, 'file', true)),
    );
    chips.hidden = chips.childElementCount === 0;
}

function sendPrompt(): void {
    const text = input.value;
    if (!text.trim() || state.running) {
        return;
    }
    const selection = state.selection ? selectionLabel(state.selection) : undefined;
    vscode.postMessage({ type: 'send', text, useSelection: selection !== undefined && dismissed === undefined });
    prompts.add(text);
    input.value = '';
    vscode.setState({ draft: '' });
    resize();
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
            log.scrollTop = log.scrollHeight;
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
                const stick = atBottom();
                place(message.item, message.before);
                welcome.hidden = true;
                log.hidden = false;
                if (stick) {
                    log.scrollTop = log.scrollHeight;
                }
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

send.addEventListener('click', sendPrompt);
stop.addEventListener('click', () => vscode.postMessage({ type: 'stop' }));
element('new').addEventListener('click', () => vscode.postMessage({ type: 'newSession' }));
element('session').addEventListener('click', () => vscode.postMessage({ type: 'pickSession' }));
element('attach').addEventListener('click', () => vscode.postMessage({ type: 'addFile' }));

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
    // `#` typed at the start of a word opens the file picker; the `#` is the picker's, not the prompt's.
    const typed = (event as InputEvent).data;
    const at = input.selectionStart;
    if (typed === '#' && (at === 1 || /\s/.test(input.value.charAt(at - 2)))) {
        input.value = input.value.slice(0, at - 1) + input.value.slice(at);
        input.setSelectionRange(at - 1, at - 1);
        vscode.postMessage({ type: 'addFile' });
    }
    vscode.setState({ draft: input.value });
    resize();
});

input.value = vscode.getState()?.draft ?? '';
resize();
vscode.postMessage({ type: 'ready' });
