/**
 * The chat's Markdown: markdown-it with raw HTML off (the model's text is never markup), links
 * limited to what markdown-it validates (no `javascript:`), images left as links (nothing is
 * fetched), and fenced code highlighted by
 * highlight.js (its core, with the languages registered here), each block with Copy, Insert and
 * Apply buttons. Bundled into the webview: nothing is fetched. Pure: also runs under Node's tests.
 */
import hljs from 'highlight.js/lib/core';
import bash from 'highlight.js/lib/languages/bash';
import c from 'highlight.js/lib/languages/c';
import cpp from 'highlight.js/lib/languages/cpp';
import css from 'highlight.js/lib/languages/css';
import diff from 'highlight.js/lib/languages/diff';
import go from 'highlight.js/lib/languages/go';
import ini from 'highlight.js/lib/languages/ini';
import java from 'highlight.js/lib/languages/java';
import javascript from 'highlight.js/lib/languages/javascript';
import json from 'highlight.js/lib/languages/json';
import lua from 'highlight.js/lib/languages/lua';
import markdown from 'highlight.js/lib/languages/markdown';
import python from 'highlight.js/lib/languages/python';
import rust from 'highlight.js/lib/languages/rust';
import shell from 'highlight.js/lib/languages/shell';
import sql from 'highlight.js/lib/languages/sql';
import typescript from 'highlight.js/lib/languages/typescript';
import xml from 'highlight.js/lib/languages/xml';
import yaml from 'highlight.js/lib/languages/yaml';
import MarkdownIt from 'markdown-it';

const LANGUAGES = {
    bash,
    c,
    cpp,
    css,
    diff,
    go,
    ini,
    java,
    javascript,
    json,
    lua,
    markdown,
    python,
    rust,
    shell,
    sql,
    typescript,
    xml,
    yaml,
};

for (const [name, language] of Object.entries(LANGUAGES)) {
    if (!hljs.getLanguage(name)) {
        hljs.registerLanguage(name, language);
    }
}

/** The options the chat renders with (also what the tests check). */
export const MARKDOWN_OPTIONS = { html: false, linkify: true, typographer: false, breaks: false } as const;

/** Whether `language` (a fence's info word, or an alias such as `py`, `sh`, `ts`) is highlighted. */
export function highlighted(language: string): boolean {
    return hljs.getLanguage(language) !== undefined;
}

export function createMarkdown(): MarkdownIt.MarkdownIt {
    const md = new MarkdownIt(MARKDOWN_OPTIONS);
    // An image would be fetched from wherever the model pointed: it stays a link.
    md.disable('image');
    const escape = md.utils.escapeHtml;
    md.renderer.rules.fence = (tokens, index) => {
        const token = tokens[index];
        if (!token) {
            return '';
        }
        const language = token.info.trim().split(/\s+/)[0] ?? '';
        const code = token.content;
        let body: string;
        if (language && highlighted(language)) {
            body = hljs.highlight(code, { language, ignoreIllegals: true }).value;
        } else {
            body = escape(code);
        }
        const label = language ? escape(language) : 'text';
        // A diff is read, not put in a file: it gets Copy only.
        const into =
            language === 'diff'
                ? ''
                : `<button class="icon-button" data-action="insert" title="Insert at Cursor" aria-label="Insert the ${label} code at the cursor">` +
                  `<i class="codicon codicon-insert" aria-hidden="true"></i></button>` +
                  `<button class="icon-button" data-action="apply" data-language="${label}" title="Apply to the File (reviewed as an edit)" aria-label="Apply the ${label} code to the file">` +
                  `<i class="codicon codicon-git-pull-request-go-to-changes" aria-hidden="true"></i></button>`;
        return (
            `<div class="code-block" data-language="${label}">` +
            `<div class="code-toolbar"><span class="code-language">${label}</span>` +
            `<button class="icon-button" data-action="copy" title="Copy" aria-label="Copy the ${label} code">` +
            `<i class="codicon codicon-copy" aria-hidden="true"></i></button>` +
            into +
            `</div>` +
            `<pre><code class="hljs${language ? ` language-${label}` : ''}">${body}</code></pre></div>\n`
        );
    };
    // Links open through the extension (the webview cannot navigate): they keep their href and
    // say where they go.
    const link = md.renderer.rules.link_open ?? ((tokens, index, options, _env, self) => self.renderToken(tokens, index, options));
    md.renderer.rules.link_open = (tokens, index, options, env, self) => {
        const token = tokens[index];
        const href = token?.attrGet('href');
        if (token && href) {
            token.attrSet('title', href);
        }
        return link(tokens, index, options, env, self);
    };
    return md;
}

/**
 * Where a streaming answer's settled part ends: after the last blank line that is outside a
 * fenced code block. What comes before it no longer changes as more text arrives, so it is drawn
 * once; only the rest is drawn again at each chunk (the whole answer is drawn again at its end).
 */
export function settledLength(text: string): number {
    let settled = 0;
    let fence: string | undefined;
    let at = 0;
    while (at < text.length) {
        const end = text.indexOf('\n', at);
        if (end < 0) {
            break; // the last line is still being written
        }
        const line = text.slice(at, end);
        const marker = /^ {0,3}(`{3,}|~{3,})/.exec(line)?.[1];
        if (fence === undefined && marker) {
            fence = marker;
        } else if (fence !== undefined && marker && marker[0] === fence[0] && marker.length >= fence.length && line.trim() === marker) {
            fence = undefined;
        } else if (fence === undefined && line.trim() === '' && at > 0) {
            settled = end + 1;
        }
        at = end + 1;
    }
    return settled;
}
