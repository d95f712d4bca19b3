/** The ways out of an error shown in the chat, as buttons. Pure. */
import { settingsNamed } from '../messages';
import type { ChatAction } from './model';

/**
 * The buttons that lead out of an error: the model picker and the setting for a model the
 * endpoint does not have or that is not set, the API key for a refused key, the setting each
 * error names, then Retry (a turn that failed can be asked again). `known`: the settings there
 * are.
 */
export function errorActions(error: string, known: readonly string[], retry = true): ChatAction[] {
    const actions: ChatAction[] = [];
    const named = settingsNamed(error, known);
    const aboutModel = named.includes('lspAgent.model') || /\bmodel\b.*\b(not found|does not exist|unknown|not available|no such)\b|no model/i.test(error);
    if (aboutModel) {
        actions.push({ id: 'chooseModel', label: 'Choose Model' });
    }
    const aboutKey = /api key|\b401\b|unauthori[sz]ed|\b403\b|forbidden/i.test(error);
    if (aboutKey) {
        actions.push({ id: 'setApiKey', label: 'Set API Key' });
    }
    const settings = [...named];
    if (settings.length === 0 && !aboutKey && /reach|connect|refused|resolve|unreachable|timed out|no route|not an? .*endpoint|html page/i.test(error)) {
        settings.push('lspAgent.baseUrl');
    }
    if (aboutModel && !settings.includes('lspAgent.model')) {
        settings.push('lspAgent.model');
    }
    for (const key of settings.slice(0, 2)) {
        actions.push({ id: 'openSetting', label: settings.length === 1 ? 'Open Settings' : `Open ${key}`, setting: key });
    }
    // The fix first; Retry last, once it is fixed (first when there is nothing to fix).
    return retry ? [...actions, { id: 'retry', label: 'Retry' }] : actions;
}
