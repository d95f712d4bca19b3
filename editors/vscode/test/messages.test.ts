import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { commandLine, describeStartFailure, lastLine, reopenedMessage, settingsNamed } from '../src/messages';
import { USER_ONLY_SETTINGS } from '../src/protocol';

const known = ['lspAgent.model', 'lspAgent.baseUrl', 'lspAgent.server.command', 'lspAgent.trace.server'];

describe('settingsNamed', () => {
    it('finds the settings a message names, once each, without the sentence\'s dot', () => {
        assert.deepEqual(
            settingsNamed('no model configured: set lspAgent.model in the editor, or lspAgent.baseUrl. Then lspAgent.model.', known),
            ['lspAgent.model', 'lspAgent.baseUrl'],
        );
        assert.deepEqual(settingsNamed('check lspAgent.server.command.', known), ['lspAgent.server.command']);
    });

    it('ignores names the extension does not contribute, and other prefixes', () => {
        assert.deepEqual(settingsNamed('set lspAgent.nothing or settings.model or xlspAgent.model', known), []);
        assert.deepEqual(settingsNamed('lspAgent.trace.server.extra', known), ['lspAgent.trace.server']);
    });
});

describe('describeStartFailure', () => {
    const python = { command: 'python3', args: ['-m', 'lsp_agent', 'serve'], source: 'python' as const };

    it('says what was tried and what it said when the module is missing', () => {
        const { message, detail } = describeStartFailure({
            command: python,
            exitCode: 1,
            stderr: '/usr/bin/python3: No module named lsp_agent\n',
            pathVariable: '/usr/bin:/bin',
        });
        assert.equal(
            message,
            'LSP Agent could not start its server. Tried python3 -m lsp_agent serve (lsp-agent is not on the PATH VS Code sees, ' +
                'so the Python fallback): it exited with code 1: /usr/bin/python3: No module named lsp_agent. ' +
                'Install lsp-agent from a clone of its repository (pip install /path/to/lsp-agent) for python3, or set lspAgent.server.command to the lsp-agent you installed.',
        );
        assert.match(detail, /PATH: \/usr\/bin:\/bin/);
        assert.match(detail, /stderr:\n\/usr\/bin\/python3: No module named lsp_agent/);
    });

    it('names the setting when the program it gives does not exist', () => {
        const { message } = describeStartFailure({
            command: { command: '/nowhere/lsp-agent', args: ['serve'], source: 'setting' },
            spawnError: 'ENOENT',
        });
        assert.equal(
            message,
            'LSP Agent could not start its server. Tried /nowhere/lsp-agent serve (from lspAgent.server.command): ' +
                '/nowhere/lsp-agent was not found. Fix lspAgent.server.command, or clear it to use lsp-agent from PATH.',
        );
    });

    it('takes a traceback\'s last line and quotes words with spaces', () => {
        assert.equal(lastLine('Traceback (most recent call last):\n  File "x"\nImportError: boom\n\n'), 'ImportError: boom');
        assert.equal(lastLine('   \n'), undefined);
        assert.equal(commandLine({ command: '/opt/my tools/py', args: ['-m', 'x'], source: 'setting' }), '"/opt/my tools/py" -m x');
    });
});

describe('reopenedMessage', () => {
    it('says why the review is back', () => {
        assert.match(reopenedMessage(['hello.py']), /hello\.py is back for review: it changed while you reviewed/);
    });
});

describe('package.json', () => {
    it('keeps the settings a workspace must not set out of its reach', () => {
        // The bundled test runs from out/test/.
        const packageJson: unknown = JSON.parse(readFileSync(path.join(__dirname, '..', '..', 'package.json'), 'utf8'));
        const properties = (packageJson as { contributes: { configuration: { properties: Record<string, { scope?: string }> } } })
            .contributes.configuration.properties;
        for (const key of USER_ONLY_SETTINGS) {
            const declared = properties[`lspAgent.${key}`];
            if (declared === undefined) {
                continue; // the API key is not a setting (secret storage)
            }
            // Machine settings (a program, this machine's limits) are the user's too: a
            // workspace's settings file cannot hold them.
            const perMachine = ['server.command', 'commandMemoryMB', 'commandFileMB', 'commandDiskMB'];
            const expected = perMachine.includes(key) ? 'machine' : 'application';
            assert.equal(declared.scope, expected, `lspAgent.${key}`);
        }
        assert.equal(properties['lspAgent.apiKey'], undefined);
    });
});
