/**
 * The messages between the extension and the chat webview (`postMessage` both ways). The
 * extension holds the conversation (`ChatModel`); the webview draws it and sends the user's
 * actions back.
 */
import type { ChatItem, SelectionRef, Summary } from './model';

/** What the header and the input show besides the items. */
export interface ChatState {
    session?: string;
    title?: string;
    /** A turn of this session runs: Stop instead of Send. */
    running: boolean;
    /** The server is not running, with why: the input says so. */
    offline?: string;
    summary: Summary;
    /** The active editor's file and selection, offered as context. */
    selection?: SelectionRef;
    /** Files added with `#`, for the next prompt. */
    files: string[];
}

export type ToWebview =
    | { type: 'reset'; items: ChatItem[]; state: ChatState; prompts: string[] }
    /** Draw `item` again, or add it before the item keyed `before` (at the end when none). */
    | { type: 'upsert'; item: ChatItem; before?: number }
    /** More text of the streaming answer keyed `key` (it was sent whole before). */
    | { type: 'append'; key: number; text: string }
    | { type: 'remove'; key: number }
    | { type: 'state'; state: ChatState }
    /** Something to announce to screen readers. */
    | { type: 'announce'; text: string }
    | { type: 'focus' };

export type FromWebview =
    | { type: 'ready' }
    | { type: 'send'; text: string; useSelection: boolean }
    | { type: 'stop' }
    | { type: 'newSession' }
    | { type: 'pickSession' }
    | { type: 'addFile' }
    | { type: 'removeFile'; path: string }
    | { type: 'answer'; key: number; action: string }
    | { type: 'review'; action: 'show' | 'accept' | 'reject' }
    | { type: 'undo'; turn: number }
    | { type: 'copy'; text: string }
    | { type: 'insert'; text: string }
    | { type: 'open'; target: string };
