/**
 * Pure helpers that decide the command line of the language server (`lspAgent.server.command`).
 */
import * as path from 'node:path';

export interface ServerCommand {
    command: string;
    args: string[];
    /** Where it came from, for the log: the setting, `lsp-agent` on PATH, or the Python fallback. */
    source: 'setting' | 'path' | 'python';
}

export interface CommandInputs {
    /** The value of `lspAgent.server.command` (array of strings or one string; empty: default). */
    setting: unknown;
    /** The full path of an executable found on PATH, or undefined. */
    findOnPath: (name: string) => string | undefined;
    /** `python.defaultInterpreterPath` when the user set it, else undefined. */
    python: string | undefined;
    /** Values for `${workspaceFolder}`, `${userHome}` and `${env:NAME}` in the command. */
    variables: { workspaceFolder?: string; userHome?: string; env?: Record<string, string | undefined> };
}

export const SERVER_EXECUTABLE = 'lsp-agent';

/**
 * Split a command line on whitespace, honouring single and double quotes and backslash escapes
 * (outside single quotes), as a POSIX shell would for plain words. Throws on an open quote.
 */
export function splitCommandLine(line: string): string[] {
    const words: string[] = [];
    let word = '';
    let inWord = false;
    let quote: '"' | "'" | undefined;
    for (let i = 0; i < line.length; i++) {
        const char = line[i] as string;
        if (quote === "'") {
            if (char === "'") {
                quote = undefined;
            } else {
                word += char;
            }
        } else if (char === '\\' && i + 1 < line.length) {
            word += line[++i];
            inWord = true;
        } else if (quote === '"') {
            if (char === '"') {
                quote = undefined;
            } else {
                word += char;
            }
        } else if (char === '"' || char === "'") {
            quote = char;
            inWord = true;
        } else if (/\s/.test(char)) {
            if (inWord) {
                words.push(word);
                word = '';
                inWord = false;
            }
        } else {
            word += char;
            inWord = true;
        }
    }
    if (quote) {
        throw new Error(`unclosed ${quote} in the command line`);
    }
    if (inWord) {
        words.push(word);
    }
    return words;
}

/** Replace `~`, `${userHome}`, `${workspaceFolder}` and `${env:NAME}` in one word. */
export function expandVariables(word: string, variables: CommandInputs['variables']): string {
    let expanded = word;
    if (variables.userHome && (expanded === '~' || expanded.startsWith('~/'))) {
        expanded = variables.userHome + expanded.slice(1);
    }
    return expanded.replace(/\$\{(workspaceFolder|userHome|env:([A-Za-z_][A-Za-z0-9_]*))\}/g, (match, name: string, env?: string) => {
        if (env !== undefined) {
            return variables.env?.[env] ?? '';
        }
        const value = name === 'workspaceFolder' ? variables.workspaceFolder : variables.userHome;
        return value ?? match;
    });
}

/**
 * The server's command line: the setting when it holds one, else `lsp-agent serve` when
 * `lsp-agent` is on PATH, else `<python> -m lsp_agent serve`. Throws an Error whose message names
 * the setting when its value has the wrong type.
 */
export function resolveServerCommand(inputs: CommandInputs): ServerCommand {
    const words = settingWords(inputs.setting).map((word) => expandVariables(word, inputs.variables));
    if (words.length > 0) {
        const [command, ...args] = words as [string, ...string[]];
        return { command, args, source: 'setting' };
    }
    const onPath = inputs.findOnPath(SERVER_EXECUTABLE);
    if (onPath) {
        return { command: onPath, args: ['serve'], source: 'path' };
    }
    const python = inputs.python?.trim() ? expandVariables(inputs.python.trim(), inputs.variables) : 'python3';
    return { command: python, args: ['-m', 'lsp_agent', 'serve'], source: 'python' };
}

function settingWords(setting: unknown): string[] {
    if (setting === undefined || setting === null) {
        return [];
    }
    if (typeof setting === 'string') {
        try {
            return splitCommandLine(setting);
        } catch (error) {
            throw new Error(`lspAgent.server.command: ${(error as Error).message}`);
        }
    }
    if (Array.isArray(setting)) {
        setting.forEach((word, index) => {
            if (typeof word !== 'string') {
                throw new Error(`lspAgent.server.command: item ${index + 1} is not a string`);
            }
        });
        const words = setting as string[];
        if (words.length > 0 && !words[0]?.trim()) {
            throw new Error('lspAgent.server.command: the first item (the program) is empty');
        }
        return words;
    }
    throw new Error(`lspAgent.server.command must be an array of strings or a string, not ${typeof setting}`);
}

/**
 * The full path of `name` on `pathVariable` (entries separated by `delimiter`), checked with
 * `isExecutable`; on Windows each of `extensions` (from PATHEXT) is tried too.
 */
export function findExecutable(
    name: string,
    pathVariable: string | undefined,
    isExecutable: (candidate: string) => boolean,
    options: { delimiter?: string; extensions?: string[] } = {},
): string | undefined {
    const delimiter = options.delimiter ?? path.delimiter;
    const extensions = options.extensions ?? [''];
    for (const directory of (pathVariable ?? '').split(delimiter)) {
        if (!directory) {
            continue;
        }
        for (const extension of extensions) {
            const candidate = path.join(directory, name + extension);
            if (isExecutable(candidate)) {
                return candidate;
            }
        }
    }
    return undefined;
}
