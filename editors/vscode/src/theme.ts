/**
 * The active colour theme's token colours (`tokenColors` of its JSON, its `include`s first, then
 * the user's `editor.tokenColorCustomizations`), for the chat's code blocks: a webview gets the
 * theme's UI colours as CSS variables, but not its syntax colours.
 */
import * as vscode from 'vscode';
import { traceWarn } from './common/log';
import { classColors, parseJsonc, TokenRule } from './chat/tokens';

/** Themes included from one another at most this deep (a loop ends here). */
const INCLUDES = 8;

interface ThemeFile {
    include?: string;
    tokenColors?: TokenRule[] | string;
}

/** The highlight.js classes' colours and font styles in the active theme. */
export async function themeTokenColors(): Promise<{ colors: Record<string, string>; styles: Record<string, string> }> {
    const rules: TokenRule[] = [];
    const file = activeThemeFile();
    if (file) {
        try {
            rules.push(...(await readRules(file, INCLUDES)));
        } catch (error) {
            traceWarn(`the colour theme's token colours could not be read (${file.toString()}): ${error instanceof Error ? error.message : String(error)}`);
        }
    }
    rules.push(...customRules());
    return classColors(rules);
}

/** Fires when the colours may have changed (another theme, the user's customizations). */
export function onDidChangeTokenColors(listener: () => void): vscode.Disposable {
    return vscode.Disposable.from(
        vscode.window.onDidChangeActiveColorTheme(listener),
        vscode.workspace.onDidChangeConfiguration((change) => {
            if (change.affectsConfiguration('editor.tokenColorCustomizations') || change.affectsConfiguration('workbench.colorTheme')) {
                listener();
            }
        }),
    );
}

/** The JSON file of the theme `workbench.colorTheme` names, from the extension that contributes it. */
function activeThemeFile(): vscode.Uri | undefined {
    const name = vscode.workspace.getConfiguration('workbench').get<string>('colorTheme');
    for (const extension of vscode.extensions.all) {
        const themes = (extension.packageJSON as { contributes?: { themes?: Array<{ id?: string; label?: string; path?: string }> } })?.contributes?.themes ?? [];
        const theme = themes.find((t) => (t.id ?? t.label) === name || t.label === name);
        if (theme?.path) {
            return vscode.Uri.joinPath(extension.extensionUri, theme.path);
        }
    }
    return undefined;
}

async function readRules(file: vscode.Uri, depth: number): Promise<TokenRule[]> {
    const theme = parseJsonc(Buffer.from(await vscode.workspace.fs.readFile(file)).toString('utf8')) as ThemeFile;
    const rules: TokenRule[] = [];
    if (theme.include && depth > 0) {
        rules.push(...(await readRules(vscode.Uri.joinPath(file, '..', theme.include), depth - 1)));
    }
    if (Array.isArray(theme.tokenColors)) {
        rules.push(...theme.tokenColors);
    } else if (typeof theme.tokenColors === 'string' && depth > 0) {
        // A tmTheme file: not read (no VS Code theme shipped today uses one).
        traceWarn(`token colours in ${theme.tokenColors} are not read: code blocks keep the chat's own colours`);
    }
    return rules;
}

/** `editor.tokenColorCustomizations`: its TextMate rules, for all themes and for this one. */
function customRules(): TokenRule[] {
    const name = vscode.workspace.getConfiguration('workbench').get<string>('colorTheme') ?? '';
    const custom = vscode.workspace.getConfiguration('editor').get<Record<string, unknown>>('tokenColorCustomizations') ?? {};
    const rules = (value: unknown): TokenRule[] =>
        value && typeof value === 'object' && Array.isArray((value as { textMateRules?: unknown }).textMateRules)
            ? ((value as { textMateRules: TokenRule[] }).textMateRules)
            : [];
    return [...rules(custom), ...rules(custom[`[${name}]`])];
}
