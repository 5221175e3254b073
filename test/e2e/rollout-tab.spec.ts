/**
 * A browser tab as a rollout worker of a disaggregated run (web/rollout.html, docs/control-plane.md
 * "Browser tabs as rollout workers"), end to end with real processes: a durable redis-server on
 * 127.0.0.1 (the flags of scripts/redis.sh), `speclab train --cluster … --run …` on the lab target
 * (4 prompts in rounds of 2, batch 2: 2 steps, a 3 s prompt lease), `speclab gateway` (token file,
 * this site's origin only) and the built page in Chromium with WebGPU on the software adapter.
 *
 * The tab joins, captures the first round on its GPU and commits it through the gateway; it leases
 * the second round and holds it (`pauseAfterLease=2`, a hook only this test uses), and is closed
 * with the lease held, as a tab that dies mid-capture. A `speclab rollout` process started then
 * takes those prompts back once the lease expired and commits them. The run finishes: every prompt
 * done, every committed sample acked exactly once, the tab's samples among them, no step trained twice.
 */
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, test } from '@playwright/test';
import { startCli, type CliProcess } from '../cli/cli-process.ts';
import { startRedisServer, type RedisServer } from '../dataplane/redis-fixture.ts';
import { connectRedis } from '../../src/platform/redis-node.ts';
import { newGatewayToken } from '../../src/platform/dataplane-gateway-node.ts';
import { DataFlowController } from '../../src/control/controller.ts';
import { openRedisControlStores } from '../../src/control/redis/redis-control-stores.ts';

const MINUTE = 60_000;
const RUN = 'tab-run';
const port = Number(process.env.SPECLAB_E2E_PORT ?? 4173);
const origin = `http://127.0.0.1:${port}`;

const processes: CliProcess[] = [];
let redis: RedisServer | undefined;
let dir: string | undefined;

test.afterAll(async () => {
  for (const p of processes) p.kill();
  await Promise.allSettled(processes.map((p) => p.exited));
  await redis?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

test('a tab is a rollout worker of a cluster run; a tab closed mid-lease is redone by speclab rollout after the lease', async ({
  browser,
}, testInfo) => {
  test.setTimeout(5 * MINUTE);
  dir = await mkdtemp(join(tmpdir(), 'speclab-rollout-tab-'));
  redis = await startRedisServer({ durable: true });
  const token = newGatewayToken();
  await writeFile(join(dir, 'token'), `${token}\n`);
  const settings = {
    target: 'assets/lab-target',
    trainPrompts: 4,
    evalPrompts: 1,
    responseLength: 8,
    epochs: 1,
    roundPrompts: 2,
    batchSize: 2,
    maxNewTokens: 4,
    evalTrainPrompts: 0,
    evalEvery: 0,
    checkpointEvery: 1,
    logEvery: 1,
    seed: 3,
    promptLeaseMs: 3000,
  };
  await writeFile(join(dir, 'train.json'), JSON.stringify(settings));
  const cluster = ['--cluster', redis.url, '--run', RUN];
  const trainer = startCli(['train', '--config', join(dir, 'train.json'), '--out', join(dir, 'out'), ...cluster], 5 * MINUTE);
  processes.push(trainer);
  const gateway = startCli(['gateway', ...cluster, '--token-file', join(dir, 'token'), '--port', '0', '--origin', origin], 5 * MINUTE);
  processes.push(gateway);
  // The last line it prints before serving: the tab URL fragment.
  await gateway.waitFor(/rollout\.html#gateway=.* to add a tab as a rollout worker/);
  const url = /at (ws:\/\/\S+)/.exec(gateway.output())![1];
  expect(gateway.output()).toContain(`rollout.html#gateway=${encodeURIComponent(url)}&run=${RUN}&token=<the token>`);

  const context = await browser.newContext();
  const page = await context.newPage();
  const hash = new URLSearchParams({ gateway: url, token, run: RUN, batch: '2', pauseAfterLease: '2' });
  await page.goto(`rollout.html#${hash}`);
  const status = page.locator('#status');
  // The first round: captured on the tab's GPU and committed through the gateway.
  await expect(status).toHaveAttribute('data-committed', '2', { timeout: 3 * MINUTE });
  // The second round: leased and held, then the tab goes away with the lease.
  await expect(status).toHaveAttribute('data-state', 'held', { timeout: MINUTE });
  const tabWorker = (await status.getAttribute('data-worker-id')) ?? '';
  expect(tabWorker).toMatch(/^rollout-[0-9a-f]{8}$/);
  const tabSamples = ((await status.getAttribute('data-committed-ids')) ?? '').split(' ');
  expect(tabSamples).toHaveLength(2);
  expect(await status.getAttribute('data-leased')).toBe('4');
  const heldTasks = ((await status.getAttribute('data-held-task-ids')) ?? '').split(' ');
  expect(heldTasks).toHaveLength(2);
  await page.screenshot({ path: testInfo.outputPath('tab-holding-lease.png'), fullPage: true });
  await page.close();
  await context.close();

  // A Node worker takes the held prompts back once their lease expired.
  const rollout = startCli(
    ['rollout', ...cluster, '--target', 'assets/lab-target', '--batch', '2', '--poll-ms', '50', '--worker-id', 'node-redo'],
    4 * MINUTE,
  );
  processes.push(rollout);
  const trained = await trainer.exited;
  expect(trained.code, trained.output.slice(-3000)).toBe(0);
  const redone = await rollout.exited;
  expect(redone.code, redone.output.slice(-3000)).toBe(0);
  expect(redone.output).toMatch(/rollout node-redo: the run is finished; committed 2 samples/);
  expect(trained.output).toContain('4 samples durably acked');

  // The ledger: every prompt done, every committed sample acked once, the tab's among them.
  const link = await connectRedis(redis.url);
  try {
    const stores = await openRedisControlStores(link, RUN, { requireDurable: false });
    const state = await DataFlowController.over(RUN, stores).status();
    expect([state.promptsPending, state.promptsLeased, state.promptsFailed, state.samplesCommitted, state.trainBacklog]).toEqual([
      0, 0, 0, 4, 0,
    ]);
    const committed = await stores.metadata.allCommittedIds();
    expect(new Set(committed).size).toBe(committed.length);
    const marker = await stores.metadata.durableMarker();
    expect([...marker.acked].sort()).toEqual([...committed].sort());
    expect(marker.optimizerDurable).toBe(true);
    // The tab's first round, and the held round redone by the Node worker: the four samples of the run.
    expect([...committed].sort()).toEqual([...tabSamples, ...heldTasks.map((task) => `${RUN}:${task}`)].sort());
  } finally {
    await link.close();
  }
  const steps = (await readFile(join(dir, 'out', 'metrics.jsonl'), 'utf8'))
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as { phase?: string; step: number })
    .filter((r) => r.phase === 'train');
  expect(steps.map((s) => s.step)).toEqual([1, 2]);
  expect(gateway.output()).toContain(`lease ${tabWorker}: 2 prompt(s)`);
});
