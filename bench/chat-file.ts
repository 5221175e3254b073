/**
 * A chat file of real length for runs at a real size without a download: multi-turn conversations
 * (system prompt, then `--turns` user/assistant exchanges) made from the lab's Brown-corpus chats
 * (assets/lab-target/lab-chats.jsonl), in the messages form a Hugging Face dataset uses, plus the
 * rows a real dump has: two with no reply (skipped, by line) and one far longer than any
 * --max-length (truncated). Deterministic: the same flags give the same bytes.
 *
 *   npx tsx bench/chat-file.ts --rows 34 --turns 4 --out /tmp/chats.jsonl
 */
import { readFileSync, writeFileSync } from 'node:fs';
import process from 'node:process';

const args = process.argv.slice(2);
const opt = (name: string, fallback?: string): string | undefined => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : fallback;
};
const rows = Number(opt('--rows', '34'));
const turns = Number(opt('--turns', '4'));
const out = opt('--out');
if (!out || !Number.isInteger(rows) || rows < 4 || !Number.isInteger(turns) || turns < 1)
  throw new Error('bench/chat-file: --out FILE is required; --rows (at least 4) and --turns (at least 1) are whole numbers');

interface Message {
  role: string;
  content: string;
}
const source = readFileSync('assets/lab-target/lab-chats.jsonl', 'utf8')
  .trim()
  .split('\n')
  .map((l) => (JSON.parse(l) as { conversations: Message[] }).conversations);
const SYSTEM = {
  role: 'system',
  content: 'You continue passages of American English prose in the same voice, one or two sentences at a time.',
};

const lines: string[] = [];
let next = 0;
const exchange = (): Message[] => source[next++ % source.length];
// Rows 1 and 2 of every 16: no reply to train on (a real dump's empty or prompt-only rows).
for (let r = 0; r < rows - 3; r++) {
  const messages: Message[] = [SYSTEM];
  for (let k = 0; k < turns; k++) messages.push(...exchange());
  lines.push(JSON.stringify({ messages }));
}
lines.splice(5, 0, JSON.stringify({ messages: [] }));
lines.splice(17, 0, JSON.stringify({ messages: [SYSTEM, { role: 'user', content: 'Is anyone there?' }] }));
// One conversation far longer than the others: truncated to --max-length.
const long: Message[] = [SYSTEM];
for (let k = 0; k < 6 * turns; k++) long.push(...exchange());
lines.push(JSON.stringify({ messages: long }));
writeFileSync(out, `${lines.join('\n')}\n`);
console.log(`${out}: ${lines.length} rows (${rows - 3} of ${turns} exchanges, 2 with no reply, 1 of ${6 * turns} exchanges)`);
