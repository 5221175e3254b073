/**
 * Node-only launcher: a private redis-server, the data-plane WebSocket gateway in front of it (on
 * 127.0.0.1, fresh random token), then the Chromium runner (or, with --deno, the Deno runner) with
 * SPECLAB_GATEWAY_URL/_TOKEN, so the page (or Deno, with its native WebSocket) runs the conformance
 * suite through the gateway. Exits with the runner's status.
 *
 *   npx tsx test/dataplane/browser-gateway.ts [--deno] [filter]
 *   (default filter: dataplane/conformance/gateway-browser, or gateway-deno with --deno)
 */
import { spawn } from 'node:child_process';
import { resolve } from 'node:path';
import process from 'node:process';
import { createDataPlaneClient } from '../../src/dataplane/factory.ts';
import { newGatewayToken, startDataPlaneGateway } from '../../src/platform/dataplane-gateway-node.ts';
import { connectRedis } from '../../src/platform/redis-node.ts';
import { startRedisServer } from './redis-fixture.ts';

const root = resolve(import.meta.dirname, '../..');
const deno = process.argv.includes('--deno');
const filter = process.argv.slice(2).find((a) => a !== '--deno') ?? `dataplane/conformance/gateway-${deno ? 'deno' : 'browser'}`;

const redis = await startRedisServer();
let status: number;
try {
  const token = newGatewayToken();
  const gateway = await startDataPlaneGateway({
    token,
    // Each page connection names its namespace; it becomes the Redis key prefix.
    openClient: (info) =>
      createDataPlaneClient(
        {
          impl: 'transferQueue',
          backend: { kind: 'redis', url: redis.url, keyPrefix: `gw:${info.namespace ?? 'default'}:` },
          claimPollMs: 5,
        },
        { connectRedis: (url) => connectRedis(url) },
      ),
    onLog: (line) => console.log(`[gateway] ${line}`),
  });
  try {
    console.log(`[gateway] listening on ${gateway.url} in front of ${redis.url}`);
    const [command, args] = deno
      ? [
          resolve(root, 'node_modules/.bin/deno'),
          [
            'run',
            '--allow-read',
            '--allow-write',
            '--allow-env',
            '--allow-run',
            '--allow-net=127.0.0.1',
            resolve(root, 'test/runners/deno.ts'),
            filter,
          ],
        ]
      : [process.execPath, ['--import', 'tsx', resolve(root, 'test/runners/browser.ts'), filter]];
    const runner = spawn(command, args, {
      cwd: root,
      stdio: 'inherit',
      env: { ...process.env, SPECLAB_GATEWAY_URL: gateway.url, SPECLAB_GATEWAY_TOKEN: token },
    });
    status = await new Promise<number>((done) => runner.once('exit', (code, signal) => done(code ?? (signal ? 1 : 0))));
  } finally {
    await gateway.close();
  }
} finally {
  await redis.stop();
}
process.exit(status);
