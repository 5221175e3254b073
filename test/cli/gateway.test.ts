/**
 * `speclab gateway`'s flags (src/cli/gateway-options.ts) and its token file (src/cli/gateway.ts):
 * usage errors are one line naming the flag; a token file that is missing or holds no valid token
 * is refused naming --token-file. The gateway itself is tested in test/dataplane/gateway-control.test.ts
 * and, with a tab, in test/e2e/rollout-tab.spec.ts.
 */
import { GATEWAY_DEF, gatewayArgs } from '../../src/cli/gateway-options.ts';
import { readGatewayToken } from '../../src/cli/gateway.ts';
import { parseCommand } from '../../src/cli/options.ts';
import { assertDeepEqual, assertEqual, assertRejects, assertThrows } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';
import { tempStore } from '../data/temp-store.ts';

const URL_ = 'redis://127.0.0.1:6399/0';
const gateway = (...argv: string[]) => gatewayArgs(parseCommand(GATEWAY_DEF, argv));

export default defineSuite('cli/gateway', (t) => {
  t.test('flags: defaults, one-line usage errors naming the flag; the token file', async (ctx) => {
    assertDeepEqual(
      gateway('--cluster', URL_, '--run', 'r1', '--token-file', 'tok'),
      { cluster: URL_, run: 'r1', tokenFile: 'tok', host: '127.0.0.1', port: 8765, origins: undefined, waitMs: 60_000 },
      'defaults',
    );
    assertDeepEqual(gateway('--cluster', URL_, '--run', 'r1', '--token-file', 'tok', '--origin', 'http://127.0.0.1:4173,https://lab.example', '--port', '0').origins, ['http://127.0.0.1:4173', 'https://lab.example'], 'origins');
    assertThrows(() => gateway('--run', 'r1', '--token-file', 'tok'), /^--cluster is required$/, 'no --cluster');
    assertThrows(() => gateway('--cluster', URL_, '--run', 'r1'), /^--token-file is required$/, 'no --token-file');
    assertThrows(() => gateway('--cluster', 'http://h', '--run', 'r1', '--token-file', 'tok'), /^--cluster: "http:\/\/h" is not a redis:\/\/ URL$/, 'bad cluster URL');
    assertThrows(() => gateway('--cluster', URL_, '--run', 'a{b', '--token-file', 'tok'), /--run must not contain braces/, 'bad run id');
    assertThrows(() => gateway('--cluster', URL_, '--run', 'r1', '--token-file', 'tok', '--port', '70000'), /^--port: /, 'port out of range');
    assertThrows(() => gateway('--cluster', URL_, '--run', 'r1', '--token-file', 'tok', '--origin', 'http://h/lab'), /^--origin: "http:\/\/h\/lab" is not an origin like http:\/\/host:port \(scheme, host and port only, no path\)$/, 'origin with a path');
    assertThrows(() => gateway('--cluster', URL_, '--run', 'r1', '--token-file', 'tok', '--origin', 'lab'), /^--origin: "lab" is not an origin/, 'not an origin');
    assertThrows(() => gateway('--cluster', URL_, '--run', 'r1', '--token-file', 'tok', '--host', 'a b'), /^--host: "a b" is not a host name or address$/, 'bad host');

    const tmp = tempStore(ctx.platform, 'gateway-token');
    try {
      const root = tmp.files.root;
      await tmp.files.writeAtomic('good', new TextEncoder().encode(`${'ab12'.repeat(8)}\nignored\n`));
      assertEqual(await readGatewayToken(ctx.platform, `${root}/good`), 'ab12'.repeat(8), 'the first line is the token');
      await tmp.files.writeAtomic('short', new TextEncoder().encode('abc\n'));
      await assertRejects(() => readGatewayToken(ctx.platform, `${root}/short`), /^--token-file: the first line of .*short must be a token of 16\.\.256 characters of \[A-Za-z0-9_-\]/, 'a short token');
      await assertRejects(() => readGatewayToken(ctx.platform, `${root}/missing`), /^--token-file: cannot read .*missing/, 'a missing file');
    } finally {
      await tmp.cleanup();
    }
  }, { only: ['node', 'deno'] });
});
