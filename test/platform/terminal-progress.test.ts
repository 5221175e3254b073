/**
 * Progress bars on a terminal (src/platform/terminal-progress.ts, over cli-progress) into a fake TTY
 * stream: a bar shows its label, share and count, a line logged while a bar runs lands above it, a
 * summary replaces an ended bar, and nothing of a bar is left once every phase ended.
 */
import { nodeOnlyImport } from '../dataplane/backends.test.ts';
import { assert } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';

type TerminalProgress = typeof import('../../src/platform/terminal-progress.ts');

/** A writable that says it is a 100-column terminal and keeps what is written. */
function fakeTerminal(): { stream: NodeJS.WriteStream; text: () => string } {
  let written = '';
  const stream = {
    isTTY: true,
    columns: 100,
    rows: 40,
    write(chunk: string) {
      written += chunk;
      return true;
    },
    cursorTo: () => true,
    moveCursor: () => true,
    clearLine: () => true,
    clearScreenDown: () => true,
    on: () => stream,
    removeListener: () => stream,
    off: () => stream,
  } as unknown as NodeJS.WriteStream;
  return { stream, text: () => written };
}

export default defineSuite('platform/terminal-progress', (t) => {
  t.test(
    'a bar with label, share and count; lines above it; a summary when it ends',
    async () => {
      // Loaded at run time: the browser bundle never follows it into cli-progress's Node streams.
      const { terminalProgress } = await nodeOnlyImport<TerminalProgress>('../../src/platform/terminal-progress.ts');
      const term = fakeTerminal();
      const display = terminalProgress(term.stream);
      assert(display.interactive, 'a terminal redraws in place');
      const bar = display.start({ label: 'loading target weights', total: 4 * 2 ** 20, unit: 'bytes' });
      bar.update(2 ** 20);
      await new Promise((r) => setTimeout(r, 150)); // one redraw (10 per second)
      display.log('phase data: 18 conversations');
      bar.update(2 * 2 ** 20);
      await new Promise((r) => setTimeout(r, 150));
      bar.end('target weights: 4.00 MiB read');
      display.log('after the bars');
      const text = term.text();
      assert(/loading target weights .*25%\s+1\.00 MiB of 4\.00 MiB/.test(text), `the bar at 25%:\n${text}`);
      assert(/loading target weights .*50%\s+2\.00 MiB of 4\.00 MiB/.test(text), `the bar at 50%:\n${text}`);
      assert(text.includes('phase data: 18 conversations\n'), `the logged line:\n${text}`);
      assert(text.includes('target weights: 4.00 MiB read\n'), `the summary:\n${text}`);
      assert(text.endsWith('after the bars\n'), `a line after the bars are gone goes straight out:\n${text}`);
    },
    { only: ['node'] },
  );
});
