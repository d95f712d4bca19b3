/**
 * How long the chat takes to draw a streaming answer: the whole Markdown rendered again at each
 * redraw, against the settled part rendered once and only the rest again (what the webview does).
 * Prints the figures; `npm run bench`.
 */
import { createMarkdown, settledLength } from '../src/chat/markdown';

const md = createMarkdown();
const PARAGRAPH = 'The function below adds **two** numbers and returns `a + b`; see [docs](https://example.com).\n\n';
const CODE = '```python\n' + Array.from({ length: 12 }, (_, i) => `def f${i}(a, b):\n    return a + b  # ${i}\n`).join('') + '```\n\n';

function whole(): (text: string) => void {
    return (text) => void md.render(text);
}

function settled(): (text: string) => void {
    let cached = { length: 0, html: '' };
    return (text) => {
        const cut = settledLength(text);
        if (cut > cached.length) {
            cached = { length: cut, html: cached.html + md.render(text.slice(cached.length, cut)) };
        }
        void (cached.html + md.render(text.slice(cached.length)));
    };
}

for (const size of [5_000, 20_000, 100_000]) {
    let text = '';
    while (text.length < size) {
        text += PARAGRAPH + CODE + PARAGRAPH;
    }
    text = text.slice(0, size);
    const redraws = Math.ceil(size / 33); // a redraw per ~33 characters streamed
    // The whole answer at every redraw would take minutes at 100k: every `step`-th redraw is
    // timed and the mean scaled up. The settled cache needs every redraw, in order.
    for (const [name, draw, step] of [
        ['whole', whole(), Math.ceil(redraws / 300)],
        ['settled', settled(), 1],
    ] as const) {
        let timed = 0;
        const start = process.hrtime.bigint();
        for (let frame = step; frame <= redraws; frame += step) {
            draw(text.slice(0, Math.round((size * frame) / redraws)));
            timed++;
        }
        const each = Number(process.hrtime.bigint() - start) / 1e6 / timed;
        console.log(
            `${String(size).padStart(6)} chars, ${redraws} redraws, ${name.padEnd(7)}: ` +
                `${(each * redraws).toFixed(0).padStart(6)} ms in all, ${each.toFixed(2)} ms a redraw`,
        );
    }
}
