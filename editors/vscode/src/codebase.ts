/**
 * `#codebase` in a prompt: the server searches the workspace for the prompt's terms before the
 * model is first asked (the chat's `#` picker puts the word first; Ask… may type it anywhere).
 */
export const CODEBASE = '#codebase';
const CODEBASE_WORD = /(^|\s)#codebase(?=\s|$)/;

/** Whether a prompt asks for `#codebase`, as a word. */
export function asksCodebase(prompt: string): boolean {
    return CODEBASE_WORD.test(prompt);
}
