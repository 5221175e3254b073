/**
 * The browser's read-only model stores (src/platform/browser-model-files.ts, browser-model-url.ts)
 * through the ordinary loaders, in Chromium against the runner's static server (HEAD and Range under /fixtures/, no
 * Range under /fixtures-no-range/, the lab target under /repo-assets/):
 *   - llama-tiny over HTTP Range requests and from picked File objects loads, and its GPU forward
 *     reproduces the fixture's hidden states and logits;
 *   - loader and download progress are monotonic and reach their totals, and a Range load fetches
 *     exactly the bytes it reads;
 *   - a server that ignores Range is downloaded once and sliced to the same weights;
 *   - picked paths: names, explicit nested paths, webkitRelativePath, a FileList, a DataTransfer;
 *   - refused input names the file: truncated safetensors, unknown architecture, missing tensor,
 *     HTTP 404 / 416, listing over HTTP, writes.
 */
import { loadHfCheckpoint, type TargetCheckpoint, type TargetWeights } from '../../src/formats/hf-checkpoint.ts';
import { SafetensorsFile } from '../../src/formats/safetensors.ts';
import { ChatTokenizer } from '../../src/formats/tokenizer.ts';
import {
  droppedDirectory,
  droppedFilesStore,
  pickedDirectory,
  pickedFilesStore,
  type PickedFile,
} from '../../src/platform/browser-model-files.ts';
import { urlStore, type UrlFetchProgress } from '../../src/platform/browser-model-url.ts';
import { assert, assertDeepEqual, assertEqual, assertRejects, assertThrows } from '../harness/assert.ts';
import { defineSuite, type TestContext } from '../harness/suite.ts';
import { assertForwardMatchesFixture } from '../model/target.test.ts';

const BROWSER = { only: ['browser'] as const };
const FILES = ['config.json', 'model.safetensors'] as const;

/** Loader progress: starts at 0, never goes back, keeps one total and ends on it. Returns the total. */
function checkLoadProgress(events: readonly [number, number][], what: string): number {
  assert(events.length >= 2, `${what}: expected progress events, got ${events.length}`);
  const total = events[0][1];
  assertEqual(events[0][0], 0, `${what}: first progress`);
  for (let i = 1; i < events.length; i++) {
    assertEqual(events[i][1], total, `${what}: total of event ${i}`);
    assert(events[i][0] >= events[i - 1][0], `${what}: progress went back from ${events[i - 1][0]} to ${events[i][0]}`);
  }
  assertEqual(events[events.length - 1][0], total, `${what}: last progress`);
  return total;
}

/**
 * Download progress: the store-wide count never goes back; each request (opened by a loaded-0
 * event) grows to its total. Returns the requests as { path, total }.
 */
function checkUrlProgress(events: readonly UrlFetchProgress[]): { path: string; total: number | undefined }[] {
  const requests: { path: string; total: number | undefined; last: number }[] = [];
  let fetched = 0;
  for (const e of events) {
    assert(e.fetchedBytes >= fetched, `fetchedBytes went back from ${fetched} to ${e.fetchedBytes} (${e.url})`);
    fetched = e.fetchedBytes;
    if (e.total !== undefined) assert(e.loaded <= e.total, `${e.url}: loaded ${e.loaded} > total ${e.total}`);
    if (e.loaded === 0) requests.push({ path: e.path, total: e.total, last: 0 });
    const r = requests[requests.length - 1];
    assert(r.path === e.path && e.loaded >= r.last, `${e.url}: progress of one request went back`);
    r.last = e.loaded;
  }
  for (const r of requests) if (r.total !== undefined) assertEqual(r.last, r.total, `${r.path}: bytes received by the end of a request`);
  return requests.map(({ path, total }) => ({ path, total }));
}

/** A File of these bytes (copied: a Blob takes only ArrayBuffer-backed views). */
function fileOf(bytes: Uint8Array, name: string): File {
  return new File([new Uint8Array(bytes)], name);
}

function headerBytes(safetensors: Uint8Array): number {
  return 8 + Number(new DataView(safetensors.buffer, safetensors.byteOffset, 8).getBigUint64(0, true));
}

function assertSameWeights(a: TargetWeights, b: TargetWeights, what: string): void {
  const same = (x: Float32Array | undefined, y: Float32Array | undefined, name: string): void => {
    assertEqual(x?.length, y?.length, `${what}: ${name} length`);
    if (x && y)
      for (let i = 0; i < x.length; i++) if (!Object.is(x[i], y[i])) throw new Error(`${what}: ${name}[${i}] differs (${x[i]} vs ${y[i]})`);
  };
  same(a.embedTokens, b.embedTokens, 'embedTokens');
  same(a.finalNorm, b.finalNorm, 'finalNorm');
  same(a.lmHead, b.lmHead, 'lmHead');
  assertEqual(a.layers.length, b.layers.length, `${what}: layers`);
  a.layers.forEach((layer, l) => {
    for (const key of Object.keys(layer) as (keyof typeof layer)[]) same(layer[key], b.layers[l][key], `layers.${l}.${key}`);
  });
}

async function fixtureFiles(ctx: TestContext): Promise<Record<(typeof FILES)[number], Uint8Array>> {
  const [config, model] = await Promise.all(FILES.map((f) => ctx.fixture(`hf/llama-tiny/${f}`)));
  return { 'config.json': config, 'model.safetensors': model };
}

async function reference(ctx: TestContext): Promise<SafetensorsFile> {
  return new SafetensorsFile(await ctx.fixture('hf/llama-tiny/reference.safetensors'), 'llama-tiny/reference.safetensors');
}

async function loadWithProgress(
  store: Parameters<typeof loadHfCheckpoint>[0],
  dir: string,
): Promise<{ checkpoint: TargetCheckpoint; total: number }> {
  const events: [number, number][] = [];
  const checkpoint = await loadHfCheckpoint(store, dir, { onProgress: (done, total) => void events.push([done, total]) });
  return { checkpoint, total: checkLoadProgress(events, `${store.root}/${dir} load`) };
}

export default defineSuite('platform/browser-model-files', (t) => {
  t.test(
    'urlStore: llama-tiny loads over HTTP Range requests, fetching exactly what it reads; forward matches the fixture',
    async (ctx) => {
      const files = await fixtureFiles(ctx);
      const downloads: UrlFetchProgress[] = [];
      const store = urlStore('/fixtures/hf/llama-tiny', { onProgress: (p) => void downloads.push(p) });
      const { checkpoint, total } = await loadWithProgress(store, '');
      const requests = checkUrlProgress(downloads);
      const modelSize = files['model.safetensors'].length;
      // config.json whole, then the safetensors prefix + header, then every tensor the model uses.
      assertEqual(
        downloads[downloads.length - 1].fetchedBytes,
        files['config.json'].length + headerBytes(files['model.safetensors']) + total,
        'bytes fetched',
      );
      const modelRequests = requests.filter((r) => r.path === 'model.safetensors');
      assert(modelRequests.length > 3, `model.safetensors read tensor by tensor, got ${modelRequests.length} requests`);
      assert(
        modelRequests.every((r) => r.total !== undefined && r.total < modelSize),
        'every model.safetensors request is a range, not the whole file',
      );
      ctx.note('requests', requests.length);
      await assertForwardMatchesFixture(ctx, 'llama-tiny', checkpoint, await reference(ctx));
    },
    BROWSER,
  );

  t.test(
    'urlStore: a server that ignores Range (HTTP 200) is downloaded once and sliced to the same weights',
    async (ctx) => {
      const files = await fixtureFiles(ctx);
      const downloads: UrlFetchProgress[] = [];
      const plain = await loadWithProgress(urlStore('/fixtures-no-range/hf/llama-tiny', { onProgress: (p) => void downloads.push(p) }), '');
      checkUrlProgress(downloads);
      assertEqual(
        downloads[downloads.length - 1].fetchedBytes,
        files['config.json'].length + files['model.safetensors'].length,
        'bytes fetched (each file once)',
      );
      const ranged = await loadWithProgress(urlStore('/fixtures/hf/llama-tiny'), '');
      assertEqual(plain.total, ranged.total, 'tensor bytes loaded');
      assertSameWeights(plain.checkpoint.weights, ranged.checkpoint.weights, 'no-range vs range');
    },
    BROWSER,
  );

  t.test(
    'urlStore: the lab target checkpoint and tokenizer load from a base URL',
    async () => {
      const store = urlStore('/repo-assets/lab-target');
      const checkpoint = await loadHfCheckpoint(store, '');
      const tokenizer = await ChatTokenizer.load(store, '');
      const text = 'The jury said it did find that the election was conducted.';
      const ids = tokenizer.encode(text, { addSpecialTokens: false });
      assert(ids.length > 0 && ids.every((id) => id >= 0 && id < checkpoint.config.vocabSize), 'token ids inside the model vocabulary');
      assertEqual(tokenizer.decode(ids), text, 'decode(encode(text))');
    },
    BROWSER,
  );

  t.test(
    'urlStore: errors name the URL and the HTTP status; listing and writes are refused',
    async () => {
      const missing = urlStore('/fixtures/hf/no-such-model');
      assertEqual(await missing.exists('config.json'), false, 'exists on a 404');
      await assertRejects(
        () => loadHfCheckpoint(missing, ''),
        /^http:\/\/127\.0\.0\.1:\d+\/fixtures\/hf\/no-such-model\/config\.json: HTTP 404/,
        'missing config.json',
      );
      await assertRejects(() => missing.size('model.safetensors'), /no-such-model\/model\.safetensors: HTTP 404/, 'size of a missing file');

      const store = urlStore('/fixtures/hf/llama-tiny/'); // a trailing slash is the same directory
      assertEqual(await store.exists('config.json'), true, 'exists on a 200');
      const size = await store.size('model.safetensors');
      await assertRejects(
        () => store.readRange('model.safetensors', size, 16),
        new RegExp(`llama-tiny/model\\.safetensors: HTTP 416.*bytes ${size}-${size + 15} of a ${size}-byte file`),
        'range past the end',
      );
      assertEqual((await store.readRange('model.safetensors', size, 0)).length, 0, 'empty range');
      await assertRejects(() => store.readRange('../llama-tiny/config.json', 0, 4), /leaves the model directory/, 'path escaping the base');
      await assertRejects(() => ChatTokenizer.load(store, ''), /llama-tiny\/tokenizer\.json: not found/, 'tokenizer absent');
      await assertRejects(() => store.list(''), /llama-tiny\/: a directory cannot be listed over HTTP/, 'list');
      await assertRejects(
        () => store.writeAtomic('config.json', new Uint8Array(1)),
        /llama-tiny\/config\.json: cannot write: .* is a read-only store/,
        'write',
      );
      await assertRejects(() => store.remove('config.json'), /read-only/, 'remove');
    },
    BROWSER,
  );

  t.test(
    'pickedFilesStore: llama-tiny from File objects (by name) loads with progress; forward matches the fixture',
    async (ctx) => {
      const files = await fixtureFiles(ctx);
      const store = pickedFilesStore(FILES.map((f) => fileOf(files[f], f)));
      assertEqual(store.root, 'picked files', 'label of loose files');
      const { checkpoint } = await loadWithProgress(store, '');
      await assertForwardMatchesFixture(ctx, 'llama-tiny', checkpoint, await reference(ctx));
    },
    BROWSER,
  );

  t.test(
    'pickedFilesStore: nested paths, webkitRelativePath, FileList and DataTransfer give the same model',
    async (ctx) => {
      const files = await fixtureFiles(ctx);
      const byName = await loadHfCheckpoint(pickedFilesStore(FILES.map((f) => fileOf(files[f], f))), '');

      // A picked parent folder holding the model one level down, with a stray file beside it.
      const nested: PickedFile[] = [
        ...FILES.map((f) => ({ file: fileOf(files[f], f), path: `models/llama-tiny/${f}` })),
        { file: new File(['notes'], 'README.md'), path: 'models/README.md' },
      ];
      const parent = pickedFilesStore(nested, { label: 'my-folder' });
      assertDeepEqual(await parent.list('models'), ['README.md', 'llama-tiny'], 'list of the parent folder');
      assertDeepEqual(await parent.list('models/llama-tiny/'), [...FILES], 'list of the model folder');
      assertSameWeights((await loadHfCheckpoint(parent, 'models/llama-tiny')).weights, byName.weights, 'nested path');

      // What <input webkitdirectory> yields: the chosen folder first in webkitRelativePath, stripped.
      const fromInput = FILES.map((f) => {
        const file = fileOf(files[f], f);
        Object.defineProperty(file, 'webkitRelativePath', { value: `llama-tiny/${f}` });
        return file;
      });
      const picked = pickedFilesStore(fromInput);
      assertEqual(picked.root, 'llama-tiny', 'label from the picked folder');
      // The plain-data form a page posts to a worker: explicit paths and the folder name.
      const posted = pickedDirectory(fromInput);
      assertDeepEqual(
        { paths: posted.files.map((f) => f.path), folder: posted.folder },
        { paths: [...FILES], folder: 'llama-tiny' },
        'pickedDirectory',
      );
      assertEqual(pickedFilesStore(posted.files, { label: posted.folder }).root, 'llama-tiny', 'label of a posted directory');
      assertDeepEqual(await picked.list(''), [...FILES], 'picked folder stripped from paths');
      assertSameWeights((await loadHfCheckpoint(picked, '')).weights, byName.weights, 'webkitRelativePath');

      // A real FileList, and a (script-made) drop, whose items carry no directory entries.
      const transfer = new DataTransfer();
      for (const f of FILES) transfer.items.add(fileOf(files[f], f));
      assertSameWeights((await loadHfCheckpoint(pickedFilesStore(transfer.files), '')).weights, byName.weights, 'FileList');
      const droppedDir = droppedDirectory(transfer);
      const dropped = await droppedFilesStore(transfer);
      assertDeepEqual(
        (await droppedDir).files.map((f) => f.path),
        [...FILES],
        'droppedDirectory paths',
      );
      assertDeepEqual(await dropped.list(''), [...FILES], 'dropped files');
      assertSameWeights((await loadHfCheckpoint(dropped, '')).weights, byName.weights, 'DataTransfer');

      assertThrows(
        () => pickedFilesStore([new File(['a'], 'config.json'), { file: new File(['b'], 'x'), path: './config.json' }]),
        /two picked files have the path "config\.json"/,
        'duplicate path',
      );
      assertThrows(() => pickedFilesStore([{ file: new File(['a'], 'x'), path: '../x' }]), /leaves the model directory/, 'path with ..');
      await assertRejects(
        () => picked.readRange('model.safetensors', files['model.safetensors'].length - 4, 8),
        /llama-tiny\/model\.safetensors: wanted 8 bytes at offset \d+, file has \d+/,
        'range past the end',
      );
      await assertRejects(
        () => picked.read('tokenizer.json'),
        /llama-tiny\/tokenizer\.json: not among the picked files \(picked: config\.json, model\.safetensors\)/,
        'missing file',
      );
      await assertRejects(
        () => picked.writeAtomic('config.json', new Uint8Array(1)),
        /llama-tiny\/config\.json: cannot write: llama-tiny is a read-only store/,
        'write',
      );
      await assertRejects(() => picked.openAppendLog('journal'), /read-only/, 'append log');
    },
    BROWSER,
  );

  t.test(
    'refused checkpoints name the file: truncated safetensors, unknown architecture, missing tensor',
    async (ctx) => {
      const files = await fixtureFiles(ctx);
      const model = (label: string, config: Uint8Array, safetensors: Uint8Array) =>
        pickedFilesStore(
          [
            { file: fileOf(config, 'config.json'), path: 'config.json' },
            { file: fileOf(safetensors, 'model.safetensors'), path: 'model.safetensors' },
          ],
          { label },
        );
      const configJson = JSON.parse(new TextDecoder().decode(files['config.json'])) as Record<string, unknown>;
      const encode = (c: Record<string, unknown>): Uint8Array => new TextEncoder().encode(JSON.stringify(c));

      const half = files['model.safetensors'].slice(0, files['model.safetensors'].length >> 1);
      await assertRejects(
        () => loadHfCheckpoint(model('truncated', files['config.json'], half), ''),
        /^truncated\/model\.safetensors: .*run past the \d+-byte data section/,
        'truncated data',
      );
      await assertRejects(
        () => loadHfCheckpoint(model('stub', files['config.json'], half.slice(0, 5)), ''),
        /stub\/model\.safetensors: file is 5 bytes, too short for a safetensors header/,
        'truncated header',
      );
      await assertRejects(
        () =>
          loadHfCheckpoint(model('mamba', encode({ ...configJson, architectures: ['MambaForCausalLM'] }), files['model.safetensors']), ''),
        /mamba\/config\.json: unsupported architecture "MambaForCausalLM"/,
        'unknown architecture',
      );
      await assertRejects(
        () => loadHfCheckpoint(model('deeper', encode({ ...configJson, num_hidden_layers: 7 }), files['model.safetensors']), ''),
        /deeper\/: checkpoint is missing tensor "model\.layers\.6\.input_layernorm\.weight"/,
        'missing tensor',
      );
    },
    BROWSER,
  );
});
