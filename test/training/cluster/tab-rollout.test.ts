/**
 * The rollout of a tab (src/training/cluster/tab-rollout.ts). Its target description must be the one
 * `speclab train --cluster` publishes (src/training/run/cluster-run.ts), field for field; a damaged manifest
 * is refused naming the field, a differing target naming the difference. And, in Node against a
 * real redis-server and the gateway of `speclab gateway` (startRunGateway), a tab's rollout stores
 * features byte-identical to what the Node rollout's capture (`TargetFeatureSource`, the same
 * capture config) computes for the same prompts on this adapter: the WebSocket data plane, Redis
 * and the control RPC carry the bytes unchanged.
 */
import { defineSuite } from '../../harness/suite.ts';
import { assert, assertDeepEqual, assertEqual, assertThrows } from '../../harness/assert.ts';
import { DataFlowController } from '../../../src/control/controller.ts';
import { InMemoryMetadataStore } from '../../../src/control/metadata-store.ts';
import { openRedisControlStores } from '../../../src/control/redis/redis-control-stores.ts';
import { RedisRunRecord } from '../../../src/control/redis/redis-run-record.ts';
import { FEATURE_KEY_PREFIX, featureClient, runManifest, targetDescription } from '../../../src/training/run/cluster-run.ts';
import { DataPlaneFeatureStore } from '../../../src/data/dataplane-feature-store.ts';
import { createDataPlaneClient } from '../../../src/dataplane/factory.ts';
import { toHostRow } from '../../../src/dataplane/column-store.ts';
import { loadHfCheckpoint } from '../../../src/formats/hf-checkpoint.ts';
import { Gpu } from '../../../src/gpu/gpu.ts';
import { TargetFeatureSource } from '../../../src/inference/target-feature-source.ts';
import { TargetModel } from '../../../src/model/target/model.ts';
import { sessionCapture, sessionFeatureFields } from '../../../src/training/session/eagle3-session.ts';
import { manifestSettings, requireManifestField, runTabRollout, tabTargetDescription } from '../../../src/training/cluster/tab-rollout.ts';
import { nodeOnlyImport } from '../../dataplane/backends.test.ts';

type RedisFixture = typeof import('../../dataplane/redis-fixture.ts');
type RedisPlatform = typeof import('../../../src/platform/redis-node.ts');
type GatewayPlatform = typeof import('../../../src/platform/dataplane-gateway-node.ts');
type ControlPlatform = typeof import('../../../src/platform/control-gateway-node.ts');

const LAB_TARGET = 'assets/lab-target';

export default defineSuite('training/cluster/tab-rollout', (t) => {
  t.test(
    "target description equals the trainer's; damaged manifests and other targets are refused naming the field",
    async (ctx) => {
      const { config } = await loadHfCheckpoint(ctx.platform.files(LAB_TARGET), '');
      for (const precision of ['f32', 'f16'] as const)
        assertDeepEqual(tabTargetDescription(config, precision), targetDescription(config, precision), `description (${precision})`);
      const capture = sessionCapture(config, [0, 1, 1], { tttLength: 3, featurePrecision: 'f16' });
      const manifest = runManifest('r', capture, targetDescription(config, 'f32'), 5000);
      assertDeepEqual(
        manifestSettings(manifest, 'r'),
        { auxLayerIds: [0, 1, 1], tttLength: 3, featurePrecision: 'f16', targetPrecision: 'f32', targetRepr: 'logits' },
        'settings from the manifest',
      );
      const compact = sessionCapture(config, [0, 1, 1], { tttLength: 3, featurePrecision: 'f16', targetRepr: 'hidden_state' });
      assertEqual(
        manifestSettings(runManifest('r', compact, targetDescription(config, 'f32'), 5000), 'r').targetRepr,
        'hidden_state',
        'compact features: the tab captures the representation the manifest names',
      );
      assertThrows(
        () => manifestSettings({ ...manifest, capture: { ...capture, targetRepr: 'pruned_logits' } }, 'r'),
        /no valid capture\.targetRepr/,
        'a representation no rollout produces',
      );
      assertThrows(
        () => requireManifestField(manifest, 'capture', compact, 'r'),
        /capture\.targetRepr: "logits" → "hidden_state"/,
        'another representation',
      );
      assertThrows(
        () => manifestSettings({ ...manifest, capture: { ...capture, auxLayerIds: [-1] } }, 'r'),
        /^run r: its manifest has no valid capture\.auxLayerIds/,
        'bad aux layers',
      );
      assertThrows(
        () => manifestSettings({ ...manifest, capture: { ...capture, extra: {} } }, 'r'),
        /no valid capture\.extra\.ttt_length/,
        'no TTT length',
      );
      assertThrows(() => manifestSettings({ ...manifest, target: {} }, 'r'), /no valid target\.precision/, 'no target precision');
      requireManifestField(manifest, 'target', tabTargetDescription(config, 'f32'), 'r');
      assertThrows(
        () => requireManifestField(manifest, 'target', tabTargetDescription(config, 'f16'), 'r'),
        /^run r: this tab's target differs from the run manifest's \(target\.precision: "f32" → "f16"; .*refusing to capture$/,
        'another precision',
      );
      assertThrows(
        () => requireManifestField(manifest, 'capture', sessionCapture(config, [0, 1], { tttLength: 3, featurePrecision: 'f16' }), 'r'),
        /capture\.auxLayerIds: \[0,1,1\] → \[0,1\]/,
        'other aux layers',
      );
    },
    { only: ['node', 'deno'] },
  );

  t.test(
    'features a tab stores through the gateway are byte-identical to the Node capture of the same prompts',
    async (ctx) => {
      const { startRedisServer } = await nodeOnlyImport<RedisFixture>('../dataplane/redis-fixture.ts');
      const { connectRedis } = await nodeOnlyImport<RedisPlatform>('../../src/platform/redis-node.ts');
      const gw = await nodeOnlyImport<GatewayPlatform>('../../src/platform/dataplane-gateway-node.ts');
      const { startRunGateway } = await nodeOnlyImport<ControlPlatform>('../../src/platform/control-gateway-node.ts');
      const gpu = new Gpu(ctx.gpu);
      const run = 'tab-bytes';
      const redis = await startRedisServer();
      const link = await connectRedis(redis.url);
      const closers: (() => Promise<unknown> | void)[] = [];
      try {
        const files = ctx.platform.files(LAB_TARGET);
        const checkpoint = await loadHfCheckpoint(files, '');
        const capture = sessionCapture(checkpoint.config, [0, 1, 1], { tttLength: 3, featurePrecision: 'f32' });
        await new RedisRunRecord(link, run).publish(runManifest(run, capture, targetDescription(checkpoint.config, 'f32'), 60_000));
        const stores = await openRedisControlStores(link, run, { requireDurable: false, prompts: { leaseTimeoutMs: 60_000 } });
        const trainer = DataFlowController.over(run, stores, { enqueueCommits: false });
        // The trainer's side registers the partition, as speclab train --cluster does.
        const trainerClient = await featureClient(connectRedis, redis.url, gpu);
        closers.push(() => trainerClient.close());
        const trainerStore = await DataPlaneFeatureStore.open(gpu, trainerClient, run, sessionFeatureFields(capture));
        const prompts = [
          { taskId: 'p0', payload: { input_ids: [5, 17, 300, 42, 9, 1200, 7] } },
          { taskId: 'p1', payload: { input_ids: [88, 3, 2001, 64, 15], loss_mask: [0, 0, 1, 1, 1] } },
        ];
        await trainer.ingestPrompts(prompts);
        const token = gw.newGatewayToken();
        const gateway = await startRunGateway({
          token,
          host: '127.0.0.1',
          port: 0,
          openClient: () =>
            createDataPlaneClient(
              { impl: 'transferQueue', backend: { kind: 'redis', url: redis.url, keyPrefix: FEATURE_KEY_PREFIX }, claimPollMs: 5 },
              { connectRedis },
            ),
          controller: DataFlowController.over(run, stores, { enqueueCommits: false }),
          record: new RedisRunRecord(link, run),
          promptLeaseMs: 60_000,
        });
        closers.push(() => gateway.close());
        let committed: string[] = [];
        const result = await runTabRollout({
          gatewayUrl: gateway.url,
          token,
          run,
          WebSocket: gw.nodeWebSocket,
          targetFiles: files,
          gpu,
          batch: 2,
          workerId: 'tab-bytes-1',
          onEvent: (e) => {
            if (e.kind === 'committed') committed = [...committed, ...e.sampleIds];
          },
          stopped: () => committed.length >= 2,
        });
        assertDeepEqual([result.workerId, result.committed], ['tab-bytes-1', 2], 'the tab committed both prompts');
        assertEqual((await trainer.status()).samplesCommitted, 2, 'the ledger holds both commits');

        const target = TargetModel.create(gpu, checkpoint);
        closers.push(() => target.destroy());
        // The same prompts as a Node worker leases them (the ledger's task defaults), captured in this process.
        const node = new DataFlowController({ runId: run, store: new InMemoryMetadataStore() });
        const nodeWorker = await node.registerRolloutWorker({ workerId: 'node-1' });
        await node.ingestPrompts(prompts);
        const tasks = await node.leasePromptTasks(nodeWorker, 2);
        const local = await new TargetFeatureSource(target).generateFeatures(tasks, capture);
        for (const [i, task] of tasks.entries()) {
          const ref = await stores.metadata.getCommitted(`${run}:${task.taskId}`);
          assert(ref !== undefined, `committed ref of ${task.taskId}`);
          const { tensors, handle } = await trainerStore.get(ref);
          for (const name of capture.featureNames) {
            const stored = await toHostRow(tensors[name], gpu, name);
            const mine = await toHostRow(local[i].tensors[name], gpu, name);
            assertDeepEqual(stored.shape, mine.shape, `${task.taskId} ${name} shape`);
            const a = new Uint8Array(stored.data.buffer, stored.data.byteOffset, stored.data.byteLength);
            const b = new Uint8Array(mine.data.buffer, mine.data.byteOffset, mine.data.byteLength);
            assert(
              a.length === b.length && a.every((x, k) => x === b[k]),
              `${task.taskId} ${name}: the stored bytes equal the Node capture's`,
            );
          }
          trainerStore.release(handle);
          gpu.release(...Object.values(local[i].tensors));
        }
        ctx.note('features', capture.featureNames.join(', '));
      } finally {
        for (const close of closers.reverse()) await Promise.resolve(close()).catch(() => undefined);
        await link.close();
        await redis.stop();
        gpu.destroy();
      }
    },
    { only: ['node'], timeoutMs: 120_000 },
  );
});
