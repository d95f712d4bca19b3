/**
 * The chat input's memory of earlier prompts, as a shell has it: ↑ on the first line of the
 * input goes back one prompt, ↓ on the last line forward, and past the newest one the draft the
 * user was typing comes back. Pure: the webview feeds it keys and the input's text.
 */

/** Prompts kept, newest last. */
export const PROMPTS_KEPT = 100;

export class PromptHistory {
    private entries: string[];
    /** The entry shown, `entries.length` for the draft. */
    private index: number;
    private draft = '';

    constructor(entries: readonly string[] = []) {
        this.entries = entries.slice(-PROMPTS_KEPT);
        this.index = this.entries.length;
    }

    get all(): readonly string[] {
        return this.entries;
    }

    /** A prompt was sent: it is the newest, and the input starts a new draft. */
    add(prompt: string): void {
        if (prompt.trim() && this.entries[this.entries.length - 1] !== prompt) {
            this.entries.push(prompt);
            this.entries = this.entries.slice(-PROMPTS_KEPT);
        }
        this.index = this.entries.length;
        this.draft = '';
    }

    /**
     * ↑ (`-1`) or ↓ (`+1`) in the input holding `text` with the caret at `caret`: the text to
     * show instead, or undefined when the key moves the caret as usual (not on the first or last
     * line, or no entry that way).
     */
    move(direction: -1 | 1, text: string, caret: number): string | undefined {
        const onEdge = direction < 0 ? !text.slice(0, caret).includes('\n') : !text.slice(caret).includes('\n');
        if (!onEdge) {
            return undefined;
        }
        const next = this.index + direction;
        if (next < 0 || next > this.entries.length) {
            return undefined;
        }
        if (this.index === this.entries.length) {
            this.draft = text;
        }
        this.index = next;
        return next === this.entries.length ? this.draft : this.entries[next];
    }
}
