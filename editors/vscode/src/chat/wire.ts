/**
 * The messages between the extension and the chat webview (`postMessage` both ways). The
 * extension holds the conversation (`ChatModel`); the webview draws it and sends the user's
 * actions back.
 */
import type { ChatAction, ChatItem, SelectionRef, Summary } from './model';

/** A prompt waiting to be sent, as the chat shows it. */
export interface QueuedPrompt {
    id: number;
    text: string;
    /** `busy`: behind the running turn; `server`: until the server runs. */
    why: 'busy' | 'server';
    /** The turn before it was stopped: it waits for Send Now. */
    held: boolean;
}

/** What the header and the input show besides the items. */
export interface ChatState {
    session?: string;
    title?: string;
    /** A turn of this session runs: Stop (and the next prompt is queued). */
    running: boolean;
    /** The server is not running, with why: the input says so, with the ways out. */
    offline?: string;
    offlineActions?: ChatAction[];
    summary: Summary;
    /** The model in effect (the header's model picker). */
    model?: string;
    /** `ask`: the next prompt asks for an answer without changes. */
    mode: 'agent' | 'ask';
    /** The active editor's file and selection, offered as context (or pinned with #selection). */
    selection?: SelectionRef;
    /** Whether `selection` was pinned with #selection (it stays when the editor moves on). */
    pinned: boolean;
    /** Files added with `#`, for the next prompt. */
    files: string[];
    /** Problems added with `#`, for the next prompt: the chip's label and the lines. */
    problems?: { label: string; lines: string[] };
    /** `#codebase` added for the next prompt. */
    codebase: boolean;
    /** Prompts waiting to be sent. */
    queued: QueuedPrompt[];
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
    | { type: 'focus' }
    /** A prompt that could not be sent goes back into the input, so it is not lost. */
    | { type: 'draft'; text: string }
    /** The prompt of a turn the conversation was rewound to before: back in the input, to edit. */
    | { type: 'restorePrompt'; text: string }
    /** The colour theme's token colours, by highlight.js class (`keyword` → `#569cd6`). */
    | { type: 'tokenColors'; colors: Record<string, string>; styles: Record<string, string> };

export type FromWebview =
    | { type: 'ready' }
    | { type: 'send'; text: string; useSelection: boolean }
    | { type: 'stop' }
    | { type: 'newSession' }
    | { type: 'pickSession' }
    | { type: 'chooseModel' }
    | { type: 'setMode'; mode: 'agent' | 'ask' }
    /** The `#` picker (the 📎 button): a file, the selection, the problems. */
    | { type: 'addContext' }
    | { type: 'removeFile'; path: string }
    | { type: 'removeProblems' }
    | { type: 'removeCodebase' }
    /** The selection chip's ×: unpins a pinned selection. */
    | { type: 'unpinSelection' }
    | { type: 'answer'; key: number; action: string }
    | { type: 'review'; action: 'show' | 'accept' | 'reject' }
    | { type: 'undo'; turn: number }
    /** Rewind the files to before the prompt of `turn`. */
    | { type: 'rewind'; turn: number }
    /** A button of a status line or a note (Retry, Open Settings, …), by the item and its index. */
    | { type: 'action'; key: number; index: number }
    /** A button of the offline notice, by its index. */
    | { type: 'offlineAction'; index: number }
    | { type: 'unqueue'; id: number }
    | { type: 'sendQueued'; id: number }
    | { type: 'copy'; text: string }
    | { type: 'insert'; text: string }
    /** Apply a code block to the file the user was in, as a reviewed edit. */
    | { type: 'apply'; text: string; language: string }
    | { type: 'open'; target: string }
    /** Whether the input has the keyboard (a review then opens without taking it). */
    | { type: 'inputFocus'; focused: boolean };
