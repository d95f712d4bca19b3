import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { CommandInputs, expandVariables, findExecutable, resolveServerCommand, splitCommandLine } from '../src/command';

const inputs = (overrides: Partial<CommandInputs>): CommandInputs => ({
    setting: undefined,
    findOnPath: () => undefined,
    python: undefined,
    variables: { workspaceFolder: '/work/project', userHome: '/home/me', env: { VENV: '/opt/venv' } },
    ...overrides,
});

describe('resolveServerCommand', () => {
    it('uses lsp-agent from PATH when nothing is set', () => {
        const found = resolveServerCommand(inputs({ findOnPath: (name) => (name === 'lsp-agent' ? '/usr/bin/lsp-agent' : undefined) }));
        assert.deepEqual(found, { command: '/usr/bin/lsp-agent', args: ['serve'], source: 'path' });
    });

    it('falls back to python3 -m lsp_agent serve', () => {
        assert.deepEqual(resolveServerCommand(inputs({})), {
            command: 'python3',
            args: ['-m', 'lsp_agent', 'serve'],
            source: 'python',
        });
    });

    it('uses the configured Python interpreter, with variables expanded', () => {
        const found = resolveServerCommand(inputs({ python: '${workspaceFolder}/.venv/bin/python' }));
        assert.equal(found.command, '/work/project/.venv/bin/python');
        assert.deepEqual(found.args, ['-m', 'lsp_agent', 'serve']);
    });

    it('takes the setting as an array, as is', () => {
        const found = resolveServerCommand(
            inputs({ setting: ['~/bin/lsp agent', 'serve', '--tcp', '${env:VENV}'], findOnPath: () => '/usr/bin/lsp-agent' }),
        );
        assert.deepEqual(found, { command: '/home/me/bin/lsp agent', args: ['serve', '--tcp', '/opt/venv'], source: 'setting' });
    });

    it('splits the setting when it is a string', () => {
        const found = resolveServerCommand(inputs({ setting: '"/opt/my tools/python" -m lsp_agent serve' }));
        assert.deepEqual(found, { command: '/opt/my tools/python', args: ['-m', 'lsp_agent', 'serve'], source: 'setting' });
    });

    it('treats an empty setting as not set', () => {
        assert.equal(resolveServerCommand(inputs({ setting: [] })).source, 'python');
        assert.equal(resolveServerCommand(inputs({ setting: '  ' })).source, 'python');
    });

    it('names the setting when its value is wrong', () => {
        assert.throws(() => resolveServerCommand(inputs({ setting: 42 })), /lspAgent\.server\.command/);
        assert.throws(() => resolveServerCommand(inputs({ setting: ['ok', 3] })), /item 2/);
        assert.throws(() => resolveServerCommand(inputs({ setting: 'python "unclosed' })), /unclosed/);
    });
});

describe('splitCommandLine', () => {
    it('honours quotes and escapes', () => {
        assert.deepEqual(splitCommandLine(`a 'b c' "d \\"e\\"" f\\ g ''`), ['a', 'b c', 'd "e"', 'f g', '']);
        assert.deepEqual(splitCommandLine('  spaced   out  '), ['spaced', 'out']);
    });
});

describe('expandVariables', () => {
    it('leaves unknown variables alone', () => {
        assert.equal(expandVariables('${unknown}/x', {}), '${unknown}/x');
        assert.equal(expandVariables('${env:MISSING}x', { env: {} }), 'x');
    });
});

describe('findExecutable', () => {
    it('finds the first executable on PATH', () => {
        const seen: string[] = [];
        const found = findExecutable('lsp-agent', '/a::/b:/c', (candidate) => {
            seen.push(candidate);
            return candidate.startsWith('/b');
        }, { delimiter: ':' });
        assert.equal(found, '/b/lsp-agent');
        assert.deepEqual(seen, ['/a/lsp-agent', '/b/lsp-agent']);
        assert.equal(findExecutable('x', undefined, () => true), undefined);
    });
});
