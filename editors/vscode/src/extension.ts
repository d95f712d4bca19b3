/**
 * LSP Agent for VS Code: wires the language client, the output, the chat view, the review, the
 * questions and the commands. The agent lives in the server; this extension holds UI only.
 */
import * as vscode from 'vscode';
import { createLog, traceInfo } from './common/log';
import { Server } from './common/server';
import { workspaceRoot } from './common/settings';
import { ChatView } from './chat/view';
import { InlineChat } from './inline';
import { Output } from './output';
import { ANSWER_COMMAND, Questions } from './questions';
import { Review } from './review';
import { Turns } from './turns';

let server: Server | undefined;

export async function activate(context: vscode.ExtensionContext): Promise<void> {
    const log = createLog();
    const output = new Output(workspaceRoot()?.uri.fsPath);
    let turns: Turns | undefined;
    let chat: ChatView | undefined;
    const questions = new Questions(
        () => turns?.sessionOfRunningTurn(),
        (session) => chat?.showsQuestionsOf(session) === true,
    );
    const review = new Review({
        toCode: async (edit) => {
            const client = await server?.ensure();
            if (!client) {
                throw new Error('the server is not running');
            }
            return client.protocol2CodeConverter.asWorkspaceEdit(edit);
        },
        sent: async (uri, version) => server?.sentVersion(uri, version),
    });
    review.chatFocus = () => chat?.inputFocus;
    server = new Server(context, log, {
        onEvent: (event) => turns?.onEvent(event),
        onApplyEdit: (params, token) => review.handle(params, token),
        onQuestion: (params, token) => questions.handle(params, token),
        onCommand: (command, args) => turns?.runCommand(command, args),
        onStateChange: (state, message) => {
            output.setServer(state, message);
            chat?.setServer(state, message);
            if (state === 'running') {
                void turns?.refreshStatus();
                turns?.serverRunning(); // prompts that waited for it go now
            } else {
                // What the server was waiting for went with its connection.
                questions.closeAll('the server stopped');
                review.dismiss('the server stopped');
            }
        },
    });
    questions.onDidChange((count) => output.setQuestions(count));
    chat = new ChatView(context, server, questions, review, workspaceRoot()?.uri.fsPath);
    turns = new Turns(
        server,
        [output, chat],
        review,
        questions,
        (status, session) => {
            output.setStatus(status, session);
            if (status) {
                chat?.setModel(status.model);
            }
        },
        (count) => output.setRunning(count),
    );
    const agent = turns;
    const running = server;
    const conversation = chat;
    conversation.attach(agent);

    const register = (id: string, handler: (...args: unknown[]) => unknown): void => {
        context.subscriptions.push(vscode.commands.registerCommand(id, handler));
    };
    register('lsp-agent.ask', (prompt) => agent.ask(typeof prompt === 'string' ? prompt : undefined));
    register('lsp-agent.askSelection', (prompt) => agent.ask(typeof prompt === 'string' ? prompt : undefined, true));
    register('lsp-agent.cancel', () => agent.cancel());
    register('lsp-agent.newSession', () => agent.newSession());
    register('lsp-agent.showSessions', () => agent.showSessions());
    register('lsp-agent.showTranscript', () => agent.showTranscript());
    register('lsp-agent.status', () => agent.showStatus());
    register('lsp-agent.showOutput', () => output.show());
    register('lsp-agent.setApiKey', () => setApiKey(running));
    register('lsp-agent.restart', async () => {
        traceInfo('restarting the server');
        await running.restart();
    });
    register('lsp-agent.acceptEdit', () => review.accept());
    register('lsp-agent.rejectEdit', () => review.reject());
    register('lsp-agent.nextFile', () => review.nextFile());
    register(ANSWER_COMMAND, () => questions.answer());
    register('lsp-agent.openChat', () => conversation.show());
    register('lsp-agent.openChatInEditor', () => conversation.openInEditor());
    register('lsp-agent.undoTurn', () => conversation.undo());
    register('lsp-agent.chooseModel', () => conversation.chooseModel());
    register('lsp-agent.showReview', () => review.reveal());
    const inline = new InlineChat(
        {
            ask: (prompt, uri, range) =>
                agent.ask(prompt, false, {
                    uri: uri.toString(),
                    range: {
                        start: { line: range.start.line, character: range.start.character },
                        end: { line: range.end.line, character: range.end.character },
                    },
                }),
        },
        review,
    );
    register('lsp-agent.editSelection', () => inline.start());
    context.subscriptions.push(output, conversation, review, questions, inline, server, log);

    if (workspaceRoot()) {
        void server.ensure();
    }
}

export async function deactivate(): Promise<void> {
    await server?.stop();
}

/** Store the API key in the secret storage (empty: remove it) and restart the server with it. */
async function setApiKey(server: Server): Promise<void> {
    const had = (await server.getApiKey()) !== undefined;
    const key = await vscode.window.showInputBox({
        title: 'LSP Agent: Set API Key',
        prompt: had
            ? 'A key is stored. Enter a new one, or leave empty and press Enter to remove it.'
            : 'The API key of the model endpoint (kept in VS Code\'s secret storage, never in settings.json)',
        password: true,
        ignoreFocusOut: true,
    });
    if (key === undefined) {
        return;
    }
    await server.setApiKey(key.trim() || undefined);
    const message = key.trim() ? 'API key stored' : 'API key removed';
    if (server.running) {
        await server.restart();
        void vscode.window.showInformationMessage(`LSP Agent: ${message}; the server restarted with it.`);
    } else {
        void vscode.window.showInformationMessage(`LSP Agent: ${message}.`);
    }
}
