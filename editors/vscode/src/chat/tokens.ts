/**
 * The colour theme's token colours for the chat's code blocks: highlight.js names its tokens by
 * class (`hljs-keyword`), a VS Code theme colours TextMate scopes (`keyword.control`). Each class
 * is given the colour the theme gives the scopes VS Code's own grammars use for such a token,
 * chosen as VS Code chooses (the most specific matching selector, the later rule on a tie), so a
 * keyword in the chat has the colour it has in the editor. Pure: the theme's JSON comes in.
 */

/** One `tokenColors` rule of a theme (or of `editor.tokenColorCustomizations.textMateRules`). */
export interface TokenRule {
    scope?: string | string[];
    settings?: { foreground?: string; fontStyle?: string };
}

/** The scopes each highlight.js class stands for, most telling first. */
export const CLASS_SCOPES: Readonly<Record<string, readonly string[]>> = {
    keyword: ['keyword', 'storage.type', 'keyword.control'],
    'selector-tag': ['entity.name.tag.css', 'entity.name.tag'],
    built_in: ['support.function', 'support.class', 'entity.name.function'],
    type: ['entity.name.type', 'support.type', 'storage.type'],
    literal: ['constant.language'],
    number: ['constant.numeric'],
    string: ['string'],
    regexp: ['string.regexp'],
    symbol: ['constant.other.symbol', 'constant.other'],
    comment: ['comment'],
    quote: ['markup.quote', 'comment'],
    doctag: ['storage.type.class.jsdoc', 'comment'],
    meta: ['meta.preprocessor', 'keyword.control.directive', 'keyword'],
    title: ['entity.name.function', 'entity.name'],
    'title.function': ['entity.name.function'],
    'title.class': ['entity.name.type.class', 'entity.name.type', 'entity.name.class'],
    params: ['variable.parameter', 'variable'],
    variable: ['variable', 'variable.other'],
    'variable.language': ['variable.language', 'constant.language'],
    attr: ['entity.other.attribute-name', 'variable.other.property'],
    attribute: ['entity.other.attribute-name', 'support.type.property-name'],
    property: ['variable.other.property', 'support.type.property-name', 'variable'],
    tag: ['entity.name.tag'],
    name: ['entity.name.tag'],
    operator: ['keyword.operator'],
    punctuation: ['punctuation'],
    subst: ['variable', 'meta.embedded'],
    section: ['markup.heading', 'entity.name.section'],
    bullet: ['markup.list', 'punctuation.definition.list.begin.markdown'],
    link: ['markup.underline.link', 'string.other.link'],
    addition: ['markup.inserted'],
    deletion: ['markup.deleted'],
    emphasis: ['markup.italic'],
    strong: ['markup.bold'],
};

/** How well a rule's selector matches a scope: the dotted parts of the selector, 0 for none. */
function specificity(selector: string, scope: string): number {
    const trimmed = selector.trim();
    if (!trimmed || /\s/.test(trimmed)) {
        return 0; // a descendant selector (`meta.x entity.y`) needs a parent this token has not
    }
    return scope === trimmed || scope.startsWith(trimmed + '.') ? trimmed.split('.').length : 0;
}

/** The theme's foreground and font style for `scope`: the most specific rule, the later on a tie. */
export function styleOf(rules: readonly TokenRule[], scope: string): { foreground?: string; fontStyle?: string } {
    let best: { foreground?: string; fontStyle?: string } = {};
    let foreground = 0;
    let fontStyle = 0;
    for (const rule of rules) {
        const selectors = Array.isArray(rule.scope) ? rule.scope : (rule.scope ?? '').split(',');
        const score = Math.max(0, ...selectors.map((selector) => specificity(selector, scope)));
        if (score === 0 || !rule.settings) {
            continue;
        }
        if (rule.settings.foreground && score >= foreground) {
            foreground = score;
            best = { ...best, foreground: rule.settings.foreground };
        }
        if (rule.settings.fontStyle !== undefined && score >= fontStyle) {
            fontStyle = score;
            best = { ...best, fontStyle: rule.settings.fontStyle };
        }
    }
    return best;
}

/** Each highlight.js class's colour (and font style) in the theme, for the classes it colours. */
export function classColors(rules: readonly TokenRule[]): { colors: Record<string, string>; styles: Record<string, string> } {
    const colors: Record<string, string> = {};
    const styles: Record<string, string> = {};
    for (const [name, scopes] of Object.entries(CLASS_SCOPES)) {
        for (const scope of scopes) {
            const style = styleOf(rules, scope);
            if (style.foreground && colors[name] === undefined) {
                colors[name] = style.foreground;
            }
            if (style.fontStyle !== undefined && styles[name] === undefined) {
                styles[name] = style.fontStyle;
            }
        }
    }
    return { colors, styles };
}

/** The CSS custom property that carries a class's colour: `--token-title-function`. */
export function tokenVariable(name: string, what: 'color' | 'style' = 'color'): string {
    return `--token${what === 'style' ? '-style' : ''}-${name.replace(/[._]/g, '-')}`;
}

/**
 * JSON with comments and trailing commas, as theme files are written (VS Code reads them so):
 * the comments and the trailing commas go, strings are left alone.
 */
export function parseJsonc(text: string): unknown {
    const kept = scan(text, (at) => {
        if (text[at] === '/' && text[at + 1] === '/') {
            const end = text.indexOf('\n', at);
            return end < 0 ? text.length : end;
        }
        if (text[at] === '/' && text[at + 1] === '*') {
            const end = text.indexOf('*/', at + 2);
            return end < 0 ? text.length : end + 2;
        }
        return at;
    });
    const strict = scan(kept, (at) => (kept[at] === ',' && /^\s*[}\]]/.test(kept.slice(at + 1, at + 200)) ? at + 1 : at));
    return JSON.parse(strict);
}

/** `text` without what `skip(at)` skips (it returns where to go on), strings left whole. */
function scan(text: string, skip: (at: number) => number): string {
    let out = '';
    let i = 0;
    while (i < text.length) {
        if (text[i] === '"') {
            let end = i + 1;
            while (end < text.length && text[end] !== '"') {
                end += text[end] === '\\' ? 2 : 1;
            }
            out += text.slice(i, end + 1);
            i = end + 1;
            continue;
        }
        const next = skip(i);
        if (next > i) {
            i = next;
            continue;
        }
        out += text[i];
        i++;
    }
    return out;
}
