/**
 * `--target ORG/NAME[@REV]` in Node (src/platform/hf-hub-node.ts through RunPlatform.resolveModel):
 *   - `speclab train` trains from a Hugging Face cache laid out as transformers writes it (blobs,
 *     relative symlinks in snapshots/<commit>, refs/main), with HF_HUB_OFFLINE=1 and the Hub's address
 *     unreachable; `@<commit>` finds the same snapshot; an id missing offline is one line;
 *   - the download against a local server answering the Hub's routes (test/platform/fake-hub.ts): a
 *     file cut mid-way leaves `blobs/<etag>.incomplete`, and the next run asks for the rest with a
 *     Range header and completes the same layout; a token reaches the Hub; a gated repo without one,
 *     and a missing one, are refused in one line; a `speclab train` process killed (SIGKILL) while its
 *     target downloads leaves the same, and the next run resumes it;
 *   - a snapshot holding config.json alone (what `speclab plan` downloads) is taken as is for the
 *     config, and completed with the weights by the next full resolve, config.json not fetched again.
 * Node only: the Hugging Face cache is a Node (and Python) folder.
 */
import type { Platform } from '../../src/cli/platform.ts';
import { trainCommand } from '../../src/cli/train.ts';
import { resolveTargetConfigDir, resolveTargetDir } from '../../src/training/run/run-plan.ts';
import { lineProgress } from '../../src/training/run/progress-lines.ts';
import { assert, assertDeepEqual, assertEqual, assertRejects } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';
import { tempStore } from '../data/temp-store.ts';

const COMMIT = '0123456789abcdef0123456789abcdef01234567';
const NODE_ONLY = { only: ['node'] as const, timeoutMs: 300_000 };

/** `platform` with these environment variables over its own. */
const withEnv = (platform: Platform, vars: Record<string, string>): Platform => ({
  ...platform,
  env: (name) => (name in vars ? vars[name] : platform.env(name)),
});

async function llamaTiny(fixture: (path: string) => Promise<Uint8Array>): Promise<Record<string, Uint8Array>> {
  return {
    'config.json': await fixture('hf/llama-tiny/config.json'),
    'model.safetensors': await fixture('hf/llama-tiny/model.safetensors'),
  };
}

export default defineSuite('platform/hf-hub-node', (t) => {
  t.test(
    'speclab train --target ORG/NAME trains from a Hugging Face cache laid out as transformers writes it, with no network',
    async ({ platform, fixture, gpu }) => {
      const fs = await import('node:fs/promises');
      const path = await import('node:path');
      const { hubObjectId } = await import('./fake-hub.ts');
      const tmp = tempStore(platform, 'hf-cache');
      try {
        const cache = path.resolve(tmp.files.root, 'hub');
        const repo = path.join(cache, 'models--speclab-test--llama-tiny');
        await fs.mkdir(path.join(repo, 'blobs'), { recursive: true });
        await fs.mkdir(path.join(repo, 'snapshots', COMMIT), { recursive: true });
        await fs.mkdir(path.join(repo, 'refs'), { recursive: true });
        for (const [name, bytes] of Object.entries(await llamaTiny(fixture))) {
          const id = hubObjectId(name, bytes);
          const blob = id.lfs?.oid ?? id.oid;
          await fs.writeFile(path.join(repo, 'blobs', blob), bytes);
          await fs.symlink(`../../blobs/${blob}`, path.join(repo, 'snapshots', COMMIT, name));
        }
        await fs.writeFile(path.join(repo, 'refs', 'main'), COMMIT);
        const offline = withEnv(platform, { HF_HUB_CACHE: cache, HF_HUB_OFFLINE: '1', HF_ENDPOINT: 'http://127.0.0.1:1' });
        const snapshot = path.join(repo, 'snapshots', COMMIT);
        assertEqual(await resolveTargetDir(offline, `speclab-test/llama-tiny@${COMMIT}`), snapshot, 'by commit');
        await assertRejects(
          () => resolveTargetDir(offline, 'speclab-test/absent'),
          /^--target speclab-test\/absent: not complete in the Hugging Face cache \(.*models--speclab-test--absent\) and HF_HUB_OFFLINE is set/,
          'missing offline: one line',
        );
        const lines: string[] = [];
        const root = tmp.files.root;
        const code = await trainCommand(
          offline,
          ['--target', 'speclab-test/llama-tiny', '--out', `${root}/run`, '--train-prompts', '2', '--eval-prompts', '1'].concat(
            ['--response-length', '8', '--epochs', '1', '--round-prompts', '2', '--batch-size', '2', '--max-new-tokens', '4'],
            ['--eval-train-prompts', '0', '--fresh'],
          ),
          (l) => lines.push(l),
          gpu,
        );
        assertEqual(code, 0, `speclab train exit code\n${lines.slice(-20).join('\n')}`);
        assert(
          lines.some((l) => l.includes(`target speclab-test/llama-tiny: the Hugging Face cache's ${snapshot}`)),
          `the run says where the target came from:\n${lines.slice(0, 8).join('\n')}`,
        );
        assert(await tmp.files.exists('run/draft/model.safetensors'), 'trained to its export');
      } finally {
        await tmp.cleanup();
      }
    },
    NODE_ONLY,
  );

  t.test(
    'the download into the cache resumes a cut file with a Range request; tokens reach the Hub; gated and missing repos are one line',
    async ({ platform, fixture }) => {
      const fs = await import('node:fs/promises');
      const path = await import('node:path');
      const { hubObjectId, startFakeHub } = await import('./fake-hub.ts');
      const files = await llamaTiny(fixture);
      const weights = files['model.safetensors'];
      const cutAt = Math.floor(weights.byteLength / 2);
      const hub = await startFakeHub({
        'speclab-test/llama-tiny': { files, commit: COMMIT, token: 'hf_test', cut: { file: 'model.safetensors', at: cutAt } },
        'speclab-test/gated': { files, commit: COMMIT, token: 'hf_other' },
      });
      const tmp = tempStore(platform, 'hf-download');
      try {
        const cache = path.resolve(tmp.files.root, 'hub');
        const online = withEnv(platform, { HF_HUB_CACHE: cache, HF_ENDPOINT: hub.url, HF_TOKEN: 'hf_test', HF_HUB_OFFLINE: '0' });
        const blob = hubObjectId('model.safetensors', weights).lfs!.oid;
        const repo = path.join(cache, 'models--speclab-test--llama-tiny');
        // The server drops the connection after sending half the file; the client keeps what reached it.
        let message = '';
        await resolveTargetDir(online, 'speclab-test/llama-tiny').catch((err: Error) => (message = err.message));
        const cut = new RegExp(
          `^--target speclab-test/llama-tiny: .*model\\.safetensors: cut at (\\d+) of ${weights.byteLength} bytes .*rerun to resume`,
        ).exec(message);
        assert(cut !== null, `a cut download: one line, resumable: ${message}`);
        const kept = Number(cut[1]);
        assert(kept > 0 && kept <= cutAt, `some bytes kept: ${kept}`);
        assertEqual((await fs.stat(path.join(repo, 'blobs', `${blob}.incomplete`))).size, kept, 'the cut bytes are kept');
        const snapshot = await resolveTargetDir(online, 'speclab-test/llama-tiny');
        assertEqual(snapshot, path.join(repo, 'snapshots', COMMIT), 'the snapshot folder');
        assert(
          hub.log.includes(`GET /speclab-test/llama-tiny/resolve/${COMMIT}/model.safetensors bytes=${kept}-`),
          `resumed at ${kept}:\n${hub.log.join('\n')}`,
        );
        const back = new Uint8Array(await fs.readFile(path.join(snapshot, 'model.safetensors')));
        assert(back.byteLength === weights.byteLength && back.every((b, i) => b === weights[i]), 'the weights, byte for byte');
        assertEqual(await fs.readlink(path.join(snapshot, 'model.safetensors')), `../../blobs/${blob}`, 'a relative link into blobs/');
        assertEqual(await fs.readFile(path.join(repo, 'refs', 'main'), 'utf8'), COMMIT, 'refs/main');
        const requests = hub.log.length;
        assertEqual(await resolveTargetDir(online, 'speclab-test/llama-tiny'), snapshot, 'cached now');
        assertEqual(hub.log.length, requests, 'no request once cached');

        await assertRejects(
          () => resolveTargetDir(online, 'speclab-test/gated'),
          /^--target speclab-test\/gated: the Hub refused the token \(401\): the token may be expired or lack read access, or the model gated/,
          'a gated repo, wrong token',
        );
        await assertRejects(
          () => resolveTargetDir(withEnv(online, { HF_TOKEN: '', HF_HOME: `${cache}/no-home` }), 'speclab-test/gated'),
          /^--target speclab-test\/gated: the Hub answered 401: no such model, or a gated or private one that needs a token \(set HF_TOKEN/,
          'a gated repo, no token',
        );
        await assertRejects(
          () => resolveTargetDir(online, 'speclab-test/absent@v2'),
          /^--target speclab-test\/absent@v2: no model speclab-test\/absent at revision v2 on http:\/\/127\.0\.0\.1:\d+ \(404\)$/,
          'a missing repo',
        );
      } finally {
        await hub.close();
        await tmp.cleanup();
      }
    },
    NODE_ONLY,
  );
  t.test(
    'a `speclab train` killed while downloading its target resumes the cut file in the next run',
    async ({ platform, fixture }) => {
      const fs = await import('node:fs/promises');
      const path = await import('node:path');
      const { hubObjectId, startFakeHub } = await import('./fake-hub.ts');
      const { startCli } = await import('../cli/cli-process.ts');
      const files = await llamaTiny(fixture);
      const weights = files['model.safetensors'];
      const at = Math.floor(weights.byteLength / 3);
      const hub = await startFakeHub({
        'speclab-test/llama-tiny': { files, commit: COMMIT, cut: { file: 'model.safetensors', at, mode: 'stall' } },
      });
      const tmp = tempStore(platform, 'hf-kill');
      try {
        const cache = path.resolve(tmp.files.root, 'hub');
        const env = { HF_HUB_CACHE: cache, HF_ENDPOINT: hub.url, HF_TOKEN: '', HF_HOME: `${cache}/home`, HF_HUB_OFFLINE: '0' };
        const partial = path.join(
          cache,
          'models--speclab-test--llama-tiny',
          'blobs',
          `${hubObjectId('model.safetensors', weights).lfs!.oid}.incomplete`,
        );
        const run = startCli(['train', '--target', 'speclab-test/llama-tiny', '--out', `${tmp.files.root}/run`, '--fresh'], 120_000, env);
        // Killed once the weights are part-way on disk (the server holds the rest back).
        const deadline = Date.now() + 60_000;
        while (
          (await fs.stat(partial).then(
            (s) => s.size,
            () => 0,
          )) < at
        ) {
          assert(Date.now() < deadline, `the download never reached ${at} bytes:\n${run.output().slice(-2000)}`);
          await new Promise((r) => setTimeout(r, 20));
        }
        run.kill();
        const exit = await run.exited;
        assertEqual(exit.signal, 'SIGKILL', 'killed mid-download');
        const snapshot = await resolveTargetDir(withEnv(platform, env), 'speclab-test/llama-tiny');
        assert(
          hub.log.includes(`GET /speclab-test/llama-tiny/resolve/${COMMIT}/model.safetensors bytes=${at}-`),
          `resumed at ${at}:\n${hub.log.join('\n')}`,
        );
        const back = new Uint8Array(await fs.readFile(path.join(snapshot, 'model.safetensors')));
        assert(back.byteLength === weights.byteLength && back.every((b, i) => b === weights[i]), 'the weights, byte for byte');
      } finally {
        await hub.close();
        await tmp.cleanup();
      }
    },
    NODE_ONLY,
  );
  t.test(
    'a snapshot with config.json alone (speclab plan) serves the config, and the next full resolve adds the weights',
    async ({ platform, fixture }) => {
      const fs = await import('node:fs/promises');
      const path = await import('node:path');
      const { startFakeHub } = await import('./fake-hub.ts');
      const hub = await startFakeHub({ 'speclab-test/llama-tiny': { files: await llamaTiny(fixture), commit: COMMIT } });
      const tmp = tempStore(platform, 'hf-config-only');
      try {
        const cache = path.resolve(tmp.files.root, 'hub');
        const online = withEnv(platform, {
          HF_HUB_CACHE: cache,
          HF_ENDPOINT: hub.url,
          HF_TOKEN: '',
          HF_HOME: `${cache}/home`,
          HF_HUB_OFFLINE: '0',
        });
        const snapshot = path.join(cache, 'models--speclab-test--llama-tiny', 'snapshots', COMMIT);
        assertEqual(
          await resolveTargetConfigDir(
            online,
            'speclab-test/llama-tiny',
            lineProgress(() => {}),
          ),
          snapshot,
          'config only',
        );
        assertDeepEqual(await fs.readdir(snapshot), ['config.json'], 'no weights downloaded');
        assertEqual(await resolveTargetDir(online, 'speclab-test/llama-tiny'), snapshot, 'the full snapshot, same folder');
        assertDeepEqual((await fs.readdir(snapshot)).sort(), ['config.json', 'model.safetensors'], 'completed');
        const configGets = hub.log.filter((l) => l === `GET /speclab-test/llama-tiny/resolve/${COMMIT}/config.json`);
        assertEqual(configGets.length, 1, `config.json fetched once:\n${hub.log.join('\n')}`);
      } finally {
        await hub.close();
        await tmp.cleanup();
      }
    },
    NODE_ONLY,
  );
  t.test(
    "two downloads of one model into one cache: the blob lock lets one fetch each file while the other waits; a dead owner's lock is taken over",
    async ({ platform, fixture }) => {
      const fs = await import('node:fs/promises');
      const path = await import('node:path');
      const os = await import('node:os');
      const { execFileSync } = await import('node:child_process');
      const { hubObjectId, startFakeHub } = await import('./fake-hub.ts');
      const files = await llamaTiny(fixture);
      // The weights stall after a few bytes, so the second download finds the first one's lock held.
      const cut = { file: 'model.safetensors', at: 64, mode: 'stall' as const };
      const hub = await startFakeHub({ 'speclab-test/llama-tiny': { files, commit: COMMIT, cut } });
      const tmp = tempStore(platform, 'hf-lock');
      try {
        const cache = path.resolve(tmp.files.root, 'hub');
        const env = { HF_HUB_CACHE: cache, HF_ENDPOINT: hub.url, HF_TOKEN: '', HF_HOME: `${cache}/home`, HF_HUB_OFFLINE: '0' };
        const online = withEnv(platform, env);
        const lines: string[] = [];
        const first = resolveTargetDir(online, 'speclab-test/llama-tiny').catch((err: Error) => err);
        // Wait until the first holds the weights' lock and is stalled mid-file, then start the second.
        const blob = hubObjectId('model.safetensors', files['model.safetensors']).lfs!.oid;
        const partial = path.join(cache, 'models--speclab-test--llama-tiny', 'blobs', `${blob}.incomplete`);
        for (let i = 0; i < 200 && !(await fs.stat(partial).catch(() => undefined)); i++) await new Promise((r) => setTimeout(r, 25));
        const second = resolveTargetDir(online, 'speclab-test/llama-tiny', (l) => lines.push(l));
        for (let i = 0; i < 200 && !lines.some((l) => /is downloading it into the same cache; waiting/.test(l)); i++)
          await new Promise((r) => setTimeout(r, 25));
        assert(
          lines.some((l) =>
            new RegExp(
              `speclab-test/llama-tiny model\\.safetensors: process ${process.pid} on .* is downloading it into the same cache; waiting`,
            ).test(l),
          ),
          `the second says it waits:\n${lines.join('\n')}`,
        );
        // The stalled connection ends: the first fails (its partial file stays), the second takes the lock and resumes it.
        await hub.close();
        const hub2 = await startFakeHub({ 'speclab-test/llama-tiny': { files, commit: COMMIT } });
        try {
          const error = await first;
          assert(error instanceof Error, 'the stalled download fails');
          // The second resolve already has its URL (the closed server): rerun it against the new one.
          await second.catch(() => undefined);
          const snapshot = await resolveTargetDir(withEnv(platform, { ...env, HF_ENDPOINT: hub2.url }), 'speclab-test/llama-tiny');
          const back = new Uint8Array(await fs.readFile(path.join(snapshot, 'model.safetensors')));
          assert(
            back.every((b, i) => b === files['model.safetensors'][i]),
            'the weights, byte for byte',
          );
          assert(
            hub2.log.some((l) => /model\.safetensors bytes=\d+-/.test(l)),
            `the partial file was resumed, not restarted:\n${hub2.log.join('\n')}`,
          );
        } finally {
          await hub2.close();
        }

        // A lock left by a process that is gone (same host, dead pid) is taken over.
        const dead = Number(execFileSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))']).toString());
        const hub3 = await startFakeHub({ 'speclab-test/other': { files, commit: COMMIT } });
        try {
          const repo = path.join(cache, 'models--speclab-test--other');
          const lockDir = path.join(cache, '.locks', 'models--speclab-test--other');
          await fs.mkdir(lockDir, { recursive: true });
          const owner = JSON.stringify({ pid: dead, host: os.hostname(), since: new Date(0).toISOString() });
          await fs.writeFile(path.join(lockDir, `${blob}.speclab.lock`), owner);
          const snapshot = await resolveTargetDir(withEnv(platform, { ...env, HF_ENDPOINT: hub3.url }), 'speclab-test/other');
          assertEqual(snapshot, path.join(repo, 'snapshots', COMMIT), 'downloaded past the stale lock');
          assertDeepEqual(await fs.readdir(lockDir), [], 'the lock is released after the download');
        } finally {
          await hub3.close();
        }
      } finally {
        await hub.close().catch(() => undefined);
        await tmp.cleanup();
      }
    },
    NODE_ONLY,
  );
});
