/**
 * Protocol names of the lsp-agent server, mirrored once from `lsp_agent/lsp/names.py`, and the shapes
 * of what the server sends. Every other module takes these names from here.
 */

/** `workspace/executeCommand` commands. */
export const ASK = 'lspAgent.ask';
export const START = 'lspAgent.start';
export const CANCEL = 'lspAgent.cancel';
export const NEW_SESSION = 'lspAgent.newSession';
export const SESSIONS = 'lspAgent.sessions';
export const STATUS = 'lspAgent.status';
export const HISTORY = 'lspAgent.history';
export const UNDO_TURN = 'lspAgent.undoTurn';
export const MODELS = 'lspAgent.models';

/** Server → client notification for every step of a turn. */
export const EVENT = 'lspAgent/event';

/** The settings section, in `initializationOptions` and `workspace/configuration`. */
export const SETTINGS_SECTION = 'lspAgent';

/** Where the client says, in `initializationOptions`, what it does itself. */
export const CLIENT_SECTION = 'lspAgentClient';

/** What this client declares under `CLIENT_SECTION`. */
export interface ClientInfo {
    /** Send `lspAgent/event` notifications. */
    events: boolean;
    /** The client shows answers and progress itself: no `window/showMessage` or `showDocument` for them. */
    showsAnswers: boolean;
    /** How to name a setting in messages to this user; `%s` is the key. */
    settingName: string;
    /** How this user gives the API key (not a setting here: the secret storage). */
    apiKeyName?: string;
}

/** Every setting the server reads from the editor (`lsp_agent/config.py`), except `apiKey`. */
export const SERVER_SETTINGS = [
    'baseUrl',
    'model',
    'provider',
    'contextWindow',
    'compactAt',
    'compactTo',
    'stripAt',
    'toolOutputCap',
    'stubChars',
    'commandTimeout',
    'commandMemoryMB',
    'commandFileMB',
    'commandDiskMB',
    'questionTimeout',
    'maxTurns',
    'mode',
    'permissions',
    'readOnlyPaths',
    'prices',
    'codeActions',
    'mcpServers',
] as const;

export type ServerSetting = (typeof SERVER_SETTINGS)[number];

/**
 * Settings a workspace's `.vscode/settings.json` must never set: where the key goes, what the
 * model may do unasked, what runs as the server. A cloned repository could otherwise send the
 * API key elsewhere or loosen the walls. `package.json` declares them `application` (the server
 * command `machine`), so VS Code ignores a workspace's values; the extension reads them from the
 * user's settings only, whatever a workspace file holds.
 */
export const USER_ONLY_SETTINGS = [
    'baseUrl',
    'apiKey',
    'provider',
    'permissions',
    'mode',
    'server.command',
    'mcpServers',
    'commandMemoryMB',
    'commandFileMB',
    'commandDiskMB',
] as const;

export interface Position {
    line: number;
    character: number;
}

export interface Range {
    start: Position;
    end: Position;
}

export interface AskArguments {
    prompt: string;
    session?: string;
    uri?: string;
    range?: Range;
    /** `ask`: an answer without changes (the model is offered no edit or command). */
    mode?: 'review' | 'auto' | 'ask';
    /** `#codebase`: the server searches the workspace for the prompt's terms first. */
    codebase?: boolean;
}

/** What `lspAgent.models` answers: the endpoint's models and the one in effect. */
export interface ModelsResult {
    models: string[];
    current: string | null;
    baseUrl: string;
    provider: string;
}

/** What became of one hunk of an applied edit (`toolResult.hunks`, the history's tool items). */
export interface HunkFact {
    path: string;
    /** `hunk 2`, `hunks 2-3`; empty for lines the user changed beside the edit. */
    hunk: string;
    status: 'accepted' | 'rejected' | 'modified' | 'user' | string;
    /** What it does, in the file's lines now: `replaced line 4`; `line 6` for the user's. */
    what: string;
    label?: string;
}

export type TurnStatus = 'completed' | 'cancelled' | 'failed' | 'max_turns';

export interface AskResult {
    session: string;
    status: TurnStatus;
    answer: string;
    edits: { proposed: number; applied: number; rejected: number };
    error?: string;
}

export interface SessionInfo {
    session: string;
    started?: string;
    turns?: number;
    title?: string;
    /** Absolute path of the session's JSONL transcript. */
    transcript?: string;
    /** The workspace folder's URI. */
    folder?: string;
}

export interface SessionStatus {
    session: string;
    running: boolean;
    contextTokens?: number;
    contextWindow?: number;
    turns?: number;
    /** What the session's model calls used since it was loaded. */
    usage?: { inputTokens?: number; cachedInputTokens?: number; outputTokens?: number; cost?: number };
}

/** One displayable item of `lspAgent.history`; `type` says which fields it has. */
export interface HistoryItem {
    type: 'prompt' | 'answer' | 'tool' | 'question' | 'edit' | 'compaction' | 'undo' | 'usage' | 'status' | string;
    turn: number;
    text?: string;
    selection?: { path: string; startLine: number; endLine: number } | null;
    id?: string | number;
    name?: string;
    args?: unknown;
    ok?: boolean | null;
    summary?: string | null;
    result?: string;
    permission?: { decision?: string; reason?: string; scope?: string } | null;
    state?: string;
    answer?: string | null;
    hunks?: HunkFact[];
    mode?: string;
    path?: string;
    applied?: boolean;
    undoable?: boolean;
    strategy?: string;
    before?: number;
    after?: number;
    undid?: number;
    /** A rewind: every turn it undid (of the files), or went back over (of the conversation). */
    turns?: number[];
    files?: string[];
    /** An item of a turn the conversation was rewound over: the model no longer sees it. */
    rewound?: boolean;
    /** A rewind of the conversation: the turn whose prompt it went back to. */
    to?: number;
    /** A rewind of the conversation: that turn's prompt. */
    prompt?: string;
    inputTokens?: number;
    cachedTokens?: number;
    outputTokens?: number;
    calls?: number;
    cost?: number;
    status?: string;
    error?: string | null;
}

/** What `lspAgent.undoTurn` answers. */
export interface UndoResult {
    turn: number;
    /** A rewind: every turn it undid. */
    turns?: number[];
    files: string[];
    proposed: boolean;
    applied: boolean;
    refused?: Array<{ path: string; why: string }>;
    /** Asked with `conversation`: whether the conversation went back (not when the files' review was rejected). */
    conversation?: boolean;
    /** The turns the conversation went back over. */
    rewound?: number[];
    /** The prompt of the turn it went back to, for the input. */
    prompt?: string;
    /** Why the conversation did not go back (`conversation: false`). */
    reason?: string;
}

export interface Status {
    model: string | null;
    baseUrl: string;
    provider: string;
    sandbox: string;
    sandboxReason?: string | null;
    contextWindow: number;
    sessions: SessionStatus[];
    version?: string;
}

interface EventBase {
    session: string;
    turn: number;
}

export type QuestionState = 'open' | 'answered' | 'timedOut' | 'withdrawn';

/** A question to the user (a permission), as the event stream tells its life. */
export interface QuestionEvent extends EventBase {
    kind: 'question';
    id: string | number;
    state: QuestionState;
    name: string;
    text: string;
    actions?: string[];
    timeoutSeconds?: number;
    /** What `Allow for this session` allows. */
    sessionCovers?: string;
    answer?: string | null;
}

/** What one model call used (after each call). */
export interface UsageEvent extends EventBase {
    kind: 'usage';
    inputTokens?: number;
    cachedTokens?: number;
    outputTokens?: number;
    contextTokens?: number;
    contextWindow?: number;
    cost?: number | null;
}

/** The first event of every turn. */
export interface StartEvent extends EventBase {
    kind: 'start';
    prompt?: string;
    continuing?: boolean;
    turns?: number;
    message?: string;
    /** `ask` for a turn in ask mode. */
    mode?: string;
}

/** The steps of a turn that carry nothing beyond their kind's fields. */
export type StepEvent = EventBase &
    (
        | { kind: 'text'; text: string }
        | { kind: 'tool'; name: string; args?: unknown }
        | { kind: 'toolResult'; name: string; ok: boolean; summary?: string; result?: string; hunks?: HunkFact[] }
        /** `outcome`: an edit that landed otherwise than proposed, in a few words. */
        | { kind: 'edit'; uri: string; applied: boolean; outcome?: string }
        | { kind: 'permission'; name: string; decision: string; asked?: boolean; reason?: string; scope?: string }
        | { kind: 'compaction'; strategy: string; before?: number; after?: number; phase?: string }
        | { kind: 'status'; status: TurnStatus | string; error?: string }
    );

/** One `lspAgent/event`; kinds this client does not know are ignored. */
export type AgentEvent = StartEvent | QuestionEvent | UsageEvent | StepEvent;
