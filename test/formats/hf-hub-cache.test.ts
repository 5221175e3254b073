/**
 * Hugging Face model ids and the cache layout (src/formats/hf-hub-cache.ts): which specs are ids, where
 * the cache is (HF_HUB_CACHE, HF_HOME, XDG_CACHE_HOME, ~/.cache), a revision found through refs/ or by
 * its commit, a snapshot's missing weight shards, and the token (HF_TOKEN, the token file). The cache
 * here holds plain files; test/cli/hub-model.test.ts lays one out with blobs and symlinks, as
 * transformers writes it, and trains from it.
 */
import {
  cachedSnapshot,
  hubCacheDir,
  hubOffline,
  hubToken,
  missingWeightFiles,
  parseHubModelId,
  repoFolderName,
} from '../../src/formats/hf-hub-cache.ts';
import { assertDeepEqual, assertEqual, assertRejects } from '../harness/assert.ts';
import { defineSuite } from '../harness/suite.ts';
import { tempStore } from '../data/temp-store.ts';

const COMMIT = 'a'.repeat(40);
const encode = (text: string) => new TextEncoder().encode(text);

export default defineSuite('formats/hf-hub-cache', (t) => {
  t.test('model ids: ORG/NAME[@REV]; paths, URLs and odd names are not ids', () => {
    assertDeepEqual(parseHubModelId('Qwen/Qwen3-8B'), { repo: 'Qwen/Qwen3-8B', revision: 'main' }, 'an id');
    assertDeepEqual(
      parseHubModelId('meta-llama/Llama-3.1-8B-Instruct@v1.0'),
      { repo: 'meta-llama/Llama-3.1-8B-Instruct', revision: 'v1.0' },
      'with a tag',
    );
    assertDeepEqual(parseHubModelId(`org/m@${COMMIT}`), { repo: 'org/m', revision: COMMIT }, 'with a commit');
    for (const spec of ['/models/x', './a/b', 'a/b/c', 'model', 'https://huggingface.co/a/b', 'a/..', '-a/b', 'a/b@', 'a/b@../x', 'a--b/c'])
      assertEqual(parseHubModelId(spec), undefined, `not an id: ${spec}`);
    assertEqual(repoFolderName('Qwen/Qwen3-8B'), 'models--Qwen--Qwen3-8B', 'cache folder');
  });

  t.test('the cache folder and offline mode from the environment, as huggingface_hub reads them', () => {
    const env = (vars: Record<string, string>) => (name: string) => vars[name];
    assertEqual(hubCacheDir(env({ HF_HUB_CACHE: '/c', HF_HOME: '/h', HOME: '/root' })), '/c', 'HF_HUB_CACHE first');
    assertEqual(hubCacheDir(env({ HF_HOME: '/h', HOME: '/root' })), '/h/hub', 'then HF_HOME/hub');
    assertEqual(hubCacheDir(env({ XDG_CACHE_HOME: '/x', HOME: '/root' })), '/x/huggingface/hub', 'then XDG_CACHE_HOME');
    assertEqual(hubCacheDir(env({ HOME: '/root' })), '/root/.cache/huggingface/hub', 'then ~/.cache');
    assertEqual(hubOffline(env({ HF_HUB_OFFLINE: '1' })), true, 'HF_HUB_OFFLINE=1');
    assertEqual(hubOffline(env({ HF_HUB_OFFLINE: 'true' })), true, 'HF_HUB_OFFLINE=true');
    assertEqual(hubOffline(env({ HF_HUB_OFFLINE: '0' })), false, 'HF_HUB_OFFLINE=0');
    assertEqual(hubOffline(env({})), false, 'unset');
  });

  t.test(
    'a cached revision: by refs/ or by commit, complete or missing shards; the token',
    async ({ platform }) => {
      const tmp = tempStore(platform, 'hf-hub-cache');
      try {
        const cache = tmp.files;
        const snap = `models--org--m/snapshots/${COMMIT}`;
        const id = { repo: 'org/m', revision: 'main' };
        assertEqual(await cachedSnapshot(cache, id), undefined, 'nothing cached');
        await cache.writeAtomic(`${snap}/config.json`, encode('{}'));
        assertEqual(await cachedSnapshot(cache, id), undefined, 'no refs/main: main is not known');
        assertEqual(await cachedSnapshot(cache, { repo: 'org/m', revision: COMMIT }), snap, 'by commit');
        await cache.writeAtomic('models--org--m/refs/main', encode(`${COMMIT}\n`));
        assertEqual(await cachedSnapshot(cache, id), snap, 'through refs/main');
        await cache.writeAtomic('models--org--m/refs/broken', encode('not-a-commit'));
        await assertRejects(
          () => cachedSnapshot(cache, { repo: 'org/m', revision: 'broken' }),
          /refs\/broken: not a commit hash/,
          'bad ref',
        );

        const files = platform.files(`${cache.root}/${snap}`);
        assertDeepEqual(await missingWeightFiles(files), ['model.safetensors (or model.safetensors.index.json)'], 'no weights');
        const index = { weight_map: { a: 'model-00001-of-00002.safetensors', b: 'model-00002-of-00002.safetensors' } };
        await files.writeAtomic('model.safetensors.index.json', encode(JSON.stringify(index)));
        await files.writeAtomic('model-00001-of-00002.safetensors', encode('x'));
        assertDeepEqual(await missingWeightFiles(files), ['model-00002-of-00002.safetensors'], 'a missing shard named');
        await files.writeAtomic('model-00002-of-00002.safetensors', encode('x'));
        assertDeepEqual(await missingWeightFiles(files), [], 'complete');
        await files.writeAtomic('model.safetensors.index.json', encode(JSON.stringify({ weight_map: {} })));
        await assertRejects(() => missingWeightFiles(files), /weight_map must map tensor names to shard files/, 'an empty weight_map');

        const read = async (path: string) => {
          const folder = platform.files(path.slice(0, path.lastIndexOf('/')));
          const name = path.slice(path.lastIndexOf('/') + 1);
          return (await folder.exists(name)) ? folder.read(name) : undefined;
        };
        await cache.writeAtomic('home/token', encode('hf_file\n'));
        const env = (vars: Record<string, string>) => (name: string) => vars[name];
        assertEqual(await hubToken(env({ HF_TOKEN: 'hf_env', HF_HOME: `${cache.root}/home` }), read), 'hf_env', 'HF_TOKEN first');
        assertEqual(await hubToken(env({ HF_HOME: `${cache.root}/home` }), read), 'hf_file', 'then HF_HOME/token');
        assertEqual(await hubToken(env({ HF_HOME: `${cache.root}/none` }), read), undefined, 'none');
      } finally {
        await tmp.cleanup();
      }
    },
    { only: ['node', 'deno'] },
  );
});
