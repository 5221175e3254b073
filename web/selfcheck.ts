/** The browser lab's entry: acquire WebGPU through the browser platform and run the self-check. */
import { selfcheck } from '../src/cli/selfcheck.ts';
import { browserPlatform } from '../src/platform/browser.ts';

const adapter = document.getElementById('adapter')!;
const log = document.getElementById('log')!;
const button = document.getElementById('run') as HTMLButtonElement;

button.addEventListener('click', async () => {
  button.disabled = true;
  log.textContent = '';
  log.classList.remove('fail');
  try {
    let first = true;
    const ok = await selfcheck(browserPlatform, (line) => {
      if (first) {
        adapter.textContent = line;
        first = false;
      } else {
        log.textContent += `${line}\n`;
      }
    });
    log.textContent += ok ? 'all checks passed\n' : 'SOME CHECKS FAILED\n';
    if (!ok) log.classList.add('fail');
  } catch (err) {
    log.classList.add('fail');
    log.textContent += `${(err as Error).name}: ${(err as Error).message}\n`;
  } finally {
    button.disabled = false;
  }
});
