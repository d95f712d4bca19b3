/**
 * Pure helpers for what the extension tells the user in a notification: the settings a message
 * names (each gets a button that opens it), why the server did not start, and why a review is
 * back on screen.
 */
import type { ServerCommand } from './command';

/**
 * The settings `text` names (`lspAgent.model`, `lspAgent.server.command`), in order, once each,
 * keeping only those in `known` (the settings the extension contributes). A sentence's final dot
 * is not part of a name.
 */
export function settingsNamed(text: string, known: readonly string[], prefix = 'lspAgent'): string[] {
    const names: string[] = [];
    const pattern = new RegExp(`\\b${prefix}\\.[A-Za-z][\\w]*(?:\\.[A-Za-z][\\w]*)*`, 'g');
    for (const match of text.matchAll(pattern)) {
        // `lspAgent.model.` at the end of a sentence: the longest known name wins.
        let name = match[0];
        while (!known.includes(name) && name.includes('.', prefix.length + 1)) {
            name = name.slice(0, name.lastIndexOf('.'));
        }
        if (known.includes(name) && !names.includes(name)) {
            names.push(name);
        }
    }
    return names;
}

/** What happened when the server was started. */
export interface StartFailure {
    /** The command line tried, and where it came from. */
    command: ServerCommand;
    /** The spawn error's code (`ENOENT`, `EACCES`) when the program could not be run at all. */
    spawnError?: string;
    /** The exit code, or the signal, when the program ran and ended before answering. */
    exitCode?: number | null;
    signal?: string | null;
    /** The end of what the program wrote to stderr. */
    stderr?: string;
    /** Something else (the connection failed): its message. */
    error?: string;
    /** The PATH the editor's extension host sees (VS Code started from a desktop may lack the shell's). */
    pathVariable?: string;
}

/** The command line as the user would type it (words with spaces quoted). */
export function commandLine(command: ServerCommand): string {
    const quoted = (word: string): string => (/[\s"'\\]/.test(word) ? JSON.stringify(word) : word);
    return [command.command, ...command.args].map(quoted).join(' ');
}

/** The last line of `stderr` that says something (a traceback's last line is its error). */
export function lastLine(stderr: string | undefined): string | undefined {
    const lines = (stderr ?? '').split(/\r?\n/).map((line) => line.trim()).filter(Boolean);
    const last = lines[lines.length - 1];
    if (last === undefined) {
        return undefined;
    }
    return last.length > 300 ? last.slice(0, 299) + '…' : last;
}

/**
 * One notification's text for a server that did not start: what was tried (the command, and why
 * that one), what it said, and what to do. `detail` has the rest for the log.
 */
export function describeStartFailure(failure: StartFailure): { message: string; detail: string } {
    const command = failure.command;
    const line = commandLine(command);
    const why =
        command.source === 'setting'
            ? 'from lspAgent.server.command'
            : command.source === 'path'
              ? 'lsp-agent found on PATH'
              : 'lsp-agent is not on the PATH VS Code sees, so the Python fallback';
    let outcome: string;
    if (failure.spawnError === 'ENOENT') {
        outcome = `${command.command} was not found`;
    } else if (failure.spawnError === 'EACCES') {
        outcome = `${command.command} is not executable`;
    } else if (failure.spawnError) {
        outcome = `it could not be run (${failure.spawnError})`;
    } else {
        const said = lastLine(failure.stderr);
        let ended = 'it stopped before answering';
        if (failure.signal) {
            ended = `it was killed by ${failure.signal}`;
        } else if (typeof failure.exitCode === 'number') {
            ended = `it exited with code ${failure.exitCode}`;
        } else if (failure.error) {
            ended = `the connection failed: ${failure.error}`;
        }
        outcome = said ? `${ended}: ${said}` : ended;
    }
    const missingModule = /No module named '?lsp_agent'?/.test(failure.stderr ?? '');
    const fix =
        command.source === 'setting'
            ? 'Fix lspAgent.server.command, or clear it to use lsp-agent from PATH.'
            : missingModule
              ? `Install lsp-agent from a clone of its repository (pip install /path/to/lsp-agent) for ${command.command}, ` +
                'or set lspAgent.server.command to the lsp-agent you installed.'
              : 'Install lsp-agent from a clone of its repository (pipx install /path/to/lsp-agent), or set lspAgent.server.command to its full path.';
    const message = `LSP Agent could not start its server. Tried ${line} (${why}): ${outcome}. ${fix}`;
    const detail = [
        `command: ${line} (${command.source})`,
        failure.pathVariable !== undefined ? `PATH: ${failure.pathVariable}` : undefined,
        failure.stderr?.trim() ? `stderr:\n${failure.stderr.trimEnd()}` : undefined,
    ]
        .filter(Boolean)
        .join('\n');
    return { message, detail };
}

/** Why a review is on screen again: the edit was merged onto what the user typed meanwhile. */
export function reopenedMessage(files: readonly string[]): string {
    const names = files.join(', ');
    return (
        `LSP Agent: the edit of ${names} is back for review: ${files.length > 1 ? 'they' : 'it'} changed while you reviewed, ` +
        `so the agent's change was merged onto your text. Check it again.`
    );
}
