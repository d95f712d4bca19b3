/** The chat's page: the bundled script (by nonce) and stylesheet, nothing else allowed. */
import { randomBytes } from 'node:crypto';
import * as vscode from 'vscode';

export function page(webview: vscode.Webview, root: vscode.Uri, host: 'view' | 'panel'): string {
    const nonce = randomBytes(18).toString('base64');
    const script = webview.asWebviewUri(vscode.Uri.joinPath(root, 'chat.js'));
    const style = webview.asWebviewUri(vscode.Uri.joinPath(root, 'chat.css'));
    const csp = [
        "default-src 'none'",
        `img-src ${webview.cspSource} data:`,
        `style-src ${webview.cspSource}`,
        `font-src ${webview.cspSource}`,
        `script-src 'nonce-${nonce}'`,
    ].join('; ');
    return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="UTF-8">
<meta http-equiv="Content-Security-Policy" content="${csp}">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<link rel="stylesheet" href="${style}">
<title>LSP Agent Chat</title>
</head>
<body class="in-${host}">
<header class="chat-header">
  <button id="session" class="session-button" title="Pick a session (new, or an earlier one)" aria-label="Pick a session">
    <i class="codicon codicon-comment-discussion" aria-hidden="true"></i><span id="session-title">New conversation</span><i class="codicon codicon-chevron-down" aria-hidden="true"></i>
  </button>
  <span class="header-tools">
    <button id="model" class="header-button" title="Choose the model (lspAgent.model)" aria-label="Choose the model">
      <i class="codicon codicon-hubot" aria-hidden="true"></i><span id="model-name">no model</span><i class="codicon codicon-chevron-down" aria-hidden="true"></i>
    </button>
    <button id="mode" class="header-button" aria-pressed="false" title="Agent: the agent may edit files and run commands (each reviewed or asked). Click for Ask: answers only, no changes">
      <i class="codicon codicon-tools" aria-hidden="true"></i><span id="mode-name">Agent</span>
    </button>
    <span id="usage" class="usage"></span>
    <button id="new" class="icon-button in-panel-only" title="New Session" aria-label="New session"><i class="codicon codicon-add" aria-hidden="true"></i></button>
  </span>
</header>
<div class="log-wrap">
  <main id="log" aria-label="Conversation"></main>
  <button id="new-messages" class="new-messages" hidden aria-label="New messages below: scroll to them"><i class="codicon codicon-arrow-down" aria-hidden="true"></i><span>New messages</span></button>
</div>
<div id="welcome" hidden>
  <i class="codicon codicon-hubot" aria-hidden="true"></i>
  <h2>Ask the agent about your code</h2>
  <p>The file and selection you are in go along with your prompt; <kbd>#</kbd> adds the selection, problems or files. Every change the agent wants is shown for your review before it lands.</p>
</div>
<footer class="composer">
  <div id="notice" role="alert" hidden><span id="notice-text"></span><span id="notice-actions" class="buttons"></span></div>
  <ul id="queue" class="queue" aria-label="Prompts waiting to be sent" hidden></ul>
  <div id="chips" class="chips" aria-label="Context sent with the prompt" hidden></div>
  <textarea id="input" rows="3" aria-label="Ask the agent" aria-describedby="hint" placeholder="Ask the agent… (# adds context)"></textarea>
  <div class="actions">
    <button id="attach" class="icon-button" title="Add Context (#): the selection, problems, a file" aria-label="Add context"><i class="codicon codicon-attach" aria-hidden="true"></i></button>
    <span id="hint" class="hint">Enter sends · Shift+Enter new line · ↑ ↓ earlier prompts</span>
    <button id="send" class="primary" aria-label="Send"><i class="codicon codicon-send" aria-hidden="true"></i><span id="send-label">Send</span></button>
    <button id="stop" class="secondary" aria-label="Stop the turn" hidden><i class="codicon codicon-debug-stop" aria-hidden="true"></i><span>Stop</span></button>
  </div>
</footer>
<div id="live" class="sr-only" aria-live="polite"></div>
<script nonce="${nonce}" src="${script}"></script>
</body>
</html>`;
}
