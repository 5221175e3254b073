/**
 * `speclab gateway`'s flags (src/cli/gateway-options.ts) and its token file (src/cli/gateway.ts):
 * usage errors are one line naming the flag; a token file that is missing or holds no valid token
 * is refused naming its flag; a gateway started with scoped token files lets each token do only its
 * own operations (src/dataplane/gateway-scopes.ts). The gateway itself is tested in
 * test/dataplane/gateway-control.test.ts and, with a tab, in test/e2e/rollout-tab.spec.ts.
 */
import { GATEWAY_DEF, gatewayArgs } from '../../src/cli/gateway-options.ts';
import { readGatewayToken } from '../../src/cli/gateway.ts';
import { parseCommand } from '../../src/cli/options.ts';
import { assert, assertDeepEqual, assertEqual, assertRejects, assertThrows } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';
import { tempStore } from '../data/temp-store.ts';
import { RedisRunRecord } from '../../src/control/redis/redis-run-record.ts';
import { connectDataPlaneGateway } from '../../src/dataplane/ws-client.ts';

type RedisFixture = typeof import('../dataplane/redis-fixture.ts');
type CliProcesses = typeof import('./cli-process.ts');
type RedisPlatform = typeof import('../../src/platform/redis-node.ts');
type GatewayPlatform = typeof import('../../src/platform/dataplane-gateway-node.ts');

/** Resolved relative to this file, at run time, so bundlers never follow it into node:child_process. */
function nodeOnlyImport<T>(specifier: string): Promise<T> {
  return import(/* @vite-ignore */ specifier) as Promise<T>;
}

const URL_ = 'redis://127.0.0.1:6399/0';
const gateway = (...argv: string[]) => gatewayArgs(parseCommand(GATEWAY_DEF, argv));

export default defineSuite('cli/gateway', (t) => {
  t.test(
    'flags: defaults, one-line usage errors naming the flag; the token file',
    async (ctx) => {
      assertDeepEqual(
        gateway('--cluster', URL_, '--run', 'r1', '--token-file', 'tok'),
        {
          cluster: URL_,
          run: 'r1',
          tokenFile: 'tok',
          scopedTokenFiles: {},
          host: '127.0.0.1',
          port: 8765,
          origins: undefined,
          waitMs: 60_000,
        },
        'defaults',
      );
      const scoped = gateway('--cluster', URL_, '--run', 'r1', '--rollout-token-file', 'r', '--observer-token-file', 'o');
      assertDeepEqual([scoped.tokenFile, scoped.scopedTokenFiles], [undefined, { rollout: 'r', observer: 'o' }], 'scoped token files');
      assertThrows(
        () => gateway('--cluster', URL_, '--run', 'r1', '--trainer-token-file', ''),
        /^--trainer-token-file: needs a file name$/,
        'an empty scoped token file',
      );
      assertThrows(
        () => gateway('--cluster', URL_, '--run', 'a:b', '--token-file', 'tok'),
        /^--run "a:b" is not a valid name/,
        'a run id no partition may have',
      );
      assertDeepEqual(
        gateway(
          '--cluster',
          URL_,
          '--run',
          'r1',
          '--token-file',
          'tok',
          '--origin',
          'http://127.0.0.1:4173,https://lab.example',
          '--port',
          '0',
        ).origins,
        ['http://127.0.0.1:4173', 'https://lab.example'],
        'origins',
      );
      assertThrows(() => gateway('--run', 'r1', '--token-file', 'tok'), /^--cluster is required$/, 'no --cluster');
      assertThrows(
        () => gateway('--cluster', URL_, '--run', 'r1'),
        /^gateway needs --token-file, or at least one of --rollout-token-file, --trainer-token-file, --observer-token-file$/,
        'no token file',
      );
      assertThrows(
        () => gateway('--cluster', 'http://h', '--run', 'r1', '--token-file', 'tok'),
        /^--cluster: "http:\/\/h" is not a redis:\/\/ URL$/,
        'bad cluster URL',
      );
      assertThrows(() => gateway('--cluster', URL_, '--run', 'a{b', '--token-file', 'tok'), /--run must not contain braces/, 'bad run id');
      assertThrows(
        () => gateway('--cluster', URL_, '--run', 'r1', '--token-file', 'tok', '--port', '70000'),
        /^--port: /,
        'port out of range',
      );
      assertThrows(
        () => gateway('--cluster', URL_, '--run', 'r1', '--token-file', 'tok', '--origin', 'http://h/lab'),
        /^--origin: "http:\/\/h\/lab" is not an origin like http:\/\/host:port \(scheme, host and port only, no path\)$/,
        'origin with a path',
      );
      assertThrows(
        () => gateway('--cluster', URL_, '--run', 'r1', '--token-file', 'tok', '--origin', 'lab'),
        /^--origin: "lab" is not an origin/,
        'not an origin',
      );
      assertThrows(
        () => gateway('--cluster', URL_, '--run', 'r1', '--token-file', 'tok', '--host', 'a b'),
        /^--host: "a b" is not a host name or address$/,
        'bad host',
      );

      const tmp = tempStore(ctx.platform, 'gateway-token');
      try {
        const root = tmp.files.root;
        await tmp.files.writeAtomic('good', new TextEncoder().encode(`${'ab12'.repeat(8)}\nignored\n`));
        assertEqual(await readGatewayToken(ctx.platform, `${root}/good`), 'ab12'.repeat(8), 'the first line is the token');
        await tmp.files.writeAtomic('short', new TextEncoder().encode('abc\n'));
        await assertRejects(
          () => readGatewayToken(ctx.platform, `${root}/short`),
          /^--token-file: the first line of .*short must be a token of 16\.\.256 characters of \[A-Za-z0-9_-\]/,
          'a short token',
        );
        await assertRejects(
          () => readGatewayToken(ctx.platform, `${root}/short`, '--rollout-token-file'),
          /^--rollout-token-file: the first line of .*short must be a token/,
          'a scoped token file names its own flag',
        );
        await assertRejects(
          () => readGatewayToken(ctx.platform, `${root}/missing`),
          /^--token-file: cannot read .*missing/,
          'a missing file',
        );
      } finally {
        await tmp.cleanup();
      }
    },
    { only: ['node', 'deno'] },
  );

  t.test(
    'real processes: no trainer within --wait-ms is refused in one line; Ctrl-C while waiting or serving exits 0',
    async (ctx) => {
      const { startRedisServer } = await nodeOnlyImport<RedisFixture>('../dataplane/redis-fixture.ts');
      const { startCli } = await nodeOnlyImport<CliProcesses>('./cli-process.ts');
      const { connectRedis } = await nodeOnlyImport<RedisPlatform>('../../src/platform/redis-node.ts');
      const redis = await startRedisServer();
      const tmp = tempStore(ctx.platform, 'gateway-processes');
      const started: { kill(): void }[] = [];
      try {
        await tmp.files.writeAtomic('token', new TextEncoder().encode(`${'cd34'.repeat(8)}\n`));
        const common = ['--cluster', redis.url, '--token-file', `${tmp.files.root}/token`, '--port', '0'];
        const nobody = await startCli(['gateway', ...common, '--run', 'no-run', '--wait-ms', '0']).exited;
        assertEqual(nobody.code, 1, `no trainer: exit 1\n${nobody.output}`);
        assert(
          /^speclab gateway: --run no-run: no trainer published this run on .* within 0 ms \(--wait-ms\)/m.test(nobody.output),
          nobody.output,
        );

        const waiting = startCli(['gateway', ...common, '--run', 'wait-run']);
        started.push(waiting);
        await waiting.waitFor(/waiting up to 60000 ms for the trainer of run wait-run/);
        waiting.signal('SIGINT');
        const stopped = await waiting.exited;
        assertEqual(stopped.code, 0, `interrupted while waiting\n${stopped.output}`);
        assert(stopped.output.includes('stopped by an interrupt before the trainer of run wait-run published it'), stopped.output);

        const link = await connectRedis(redis.url);
        try {
          await new RedisRunRecord(link, 'serve-run').publish({ run: 'serve-run', promptLeaseMs: 5000 });
        } finally {
          await link.close();
        }
        const serving = startCli(['gateway', ...common, '--run', 'serve-run', '--origin', 'http://127.0.0.1:4173']);
        started.push(serving);
        await serving.waitFor(/to add a tab as a rollout worker/);
        assert(
          /serving run serve-run of .* at ws:\/\/127\.0\.0\.1:\d+\/ \(data plane and rollout control; prompt lease 5000 ms; origins http:\/\/127\.0\.0\.1:4173\)/.test(
            serving.output(),
          ),
          serving.output(),
        );
        serving.signal('SIGINT');
        const ended = await serving.exited;
        assertEqual(ended.code, 0, `interrupted while serving\n${ended.output}`);
        assert(ended.output.includes('gateway: stopped by an interrupt'), ended.output);
      } finally {
        for (const p of started) p.kill();
        await redis.stop();
        await tmp.cleanup();
      }
    },
    { only: ['node'], timeoutMs: 60_000 },
  );

  t.test(
    'real process with scoped token files: each token does only its own operations, the gateway serves on',
    async (ctx) => {
      const { startRedisServer } = await nodeOnlyImport<RedisFixture>('../dataplane/redis-fixture.ts');
      const { startCli } = await nodeOnlyImport<CliProcesses>('./cli-process.ts');
      const { connectRedis } = await nodeOnlyImport<RedisPlatform>('../../src/platform/redis-node.ts');
      const { nodeWebSocket } = await nodeOnlyImport<GatewayPlatform>('../../src/platform/dataplane-gateway-node.ts');
      const redis = await startRedisServer();
      const tmp = tempStore(ctx.platform, 'gateway-scoped');
      const started: { kill(): void }[] = [];
      const tokens = { rollout: 'ro11'.repeat(8), observer: '0b5e'.repeat(8) };
      try {
        for (const [scope, token] of Object.entries(tokens)) await tmp.files.writeAtomic(scope, new TextEncoder().encode(`${token}\n`));
        const link = await connectRedis(redis.url);
        try {
          await new RedisRunRecord(link, 'scoped-run').publish({ run: 'scoped-run', promptLeaseMs: 5000 });
        } finally {
          await link.close();
        }
        const root = tmp.files.root;
        const serving = startCli([
          'gateway',
          ...['--cluster', redis.url, '--run', 'scoped-run', '--port', '0'],
          ...['--rollout-token-file', `${root}/rollout`, '--observer-token-file', `${root}/observer`],
        ]);
        started.push(serving);
        await serving.waitFor(/to add a tab as a rollout worker/);
        assert(serving.output().includes('token=<the rollout token>'), serving.output());
        const url = /at (ws:\/\/127\.0\.0\.1:\d+\/)/.exec(serving.output())![1];
        const rollout = await connectDataPlaneGateway({ url, token: tokens.rollout, WebSocket: nodeWebSocket });
        const observer = await connectDataPlaneGateway({ url, token: tokens.observer, WebSocket: nodeWebSocket });
        try {
          await rollout.registerPartition({ partition: 'scoped-run', fields: { x: 'f32' }, consumerTasks: ['trainer'] });
          await rollout.putSamples({
            partition: 'scoped-run',
            sampleIds: ['s1'],
            columns: { x: [{ dtype: 'f32', shape: [1], data: Float32Array.of(1) }] },
          });
          await assertRejects(
            () => rollout.clearSamples('scoped-run', { all: true }),
            /"clear" of every sample .* needs the trainer scope/,
            'clear',
          );
          await assertRejects(() => observer.clearSamples('scoped-run', ['s1']), /"clear" needs the trainer scope/, 'observer clear');
          assertEqual((await observer.partitionStats('scoped-run')).samples, 1, 'the observer reads stats; nothing was cleared');
        } finally {
          await rollout.close();
          await observer.close();
        }
        await assertRejects(
          () => connectDataPlaneGateway({ url, token: 'a'.repeat(32), WebSocket: nodeWebSocket, connectTimeoutMs: 3000 }),
          /token was rejected/,
          'a token the gateway was not given',
        );
        serving.signal('SIGINT');
        assertEqual((await serving.exited).code, 0, 'stopped by an interrupt');
      } finally {
        for (const p of started) p.kill();
        await redis.stop();
        await tmp.cleanup();
      }
    },
    { only: ['node'], timeoutMs: 60_000 },
  );
});
