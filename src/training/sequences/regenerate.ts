/**
 * `--regenerate`: the target rewrites every reply of a chat dataset's rows, turn by turn, as
 * SpecForge's regenerated datasets are made, so the draft learns the target's own outputs.
 *
 * A row is its rendered tokens with loss-masked runs, one per assistant reply (src/corpus/). Reply k
 * is generated from everything before it as rebuilt so far: the original context (system, user
 * turns, template headers) and the target's own earlier replies. A reply that is not the last must
 * close its turn the way the template does, so the target's reply is cut at the end-of-turn id (or
 * given one) and followed by what the template renders after that id (e.g. ChatML's "\n"); the row's
 * next user turn follows. The last reply is the target's, as generated (up to `responseLength`
 * tokens, stopping at the end-of-turn id). Rows with one reply come out exactly as
 * `continueWithTarget` makes them from their prompt: the same batches, seeds and stop ids.
 */
import { generate } from '../../model/target/generate.ts';
import type { TargetModel } from '../../model/target/model.ts';
import type { Continuation, TrainSequence } from '../../contracts/train-sequence.ts';

interface Turns {
  /** Original tokens before each reply: contexts[k] precedes reply k. */
  contexts: number[][];
  /** Original tokens of each reply after its end-of-turn id (the template's own closing text). */
  closings: number[][];
}

/** Loss-masked runs [start, end) of a mask. */
function replyRuns(mask: readonly number[]): [number, number][] {
  const runs: [number, number][] = [];
  mask.forEach((v, i) => {
    if (v && (i === 0 || !mask[i - 1])) runs.push([i, i + 1]);
    else if (v) runs[runs.length - 1][1] = i + 1;
  });
  return runs;
}

function turnsOf(row: TrainSequence, endOfTurn: readonly number[], where: string): Turns {
  const runs = replyRuns(row.lossMask);
  if (runs.length === 0 || runs[0][0] === 0) throw new Error(`${where}: no prompt before its first reply`);
  const contexts: number[][] = [];
  const closings: number[][] = [];
  runs.forEach(([start, end], k) => {
    contexts.push(row.inputIds.slice(k === 0 ? 0 : runs[k - 1][1], start));
    const reply = row.inputIds.slice(start, end);
    const eot = reply.findLastIndex((id) => endOfTurn.includes(id));
    closings.push(eot < 0 ? [] : reply.slice(eot + 1));
  });
  return { contexts, closings };
}

/** The rows with every reply written by the target (`chunk` rows per batched generation). */
export async function regenerateReplies(
  target: TargetModel,
  rows: readonly TrainSequence[],
  responseLength: number,
  how: Continuation = {},
  chunk = 16,
  /** After each batched generation: conversations whose every reply is written, of all, and tokens generated. */
  onProgress?: (done: number, total: number, tokens: number) => void,
): Promise<TrainSequence[]> {
  const endOfTurn = how.eosTokenIds ?? [];
  const turns = rows.map((r, i) => turnsOf(r, endOfTurn, `conversation ${i + 1}`));
  const built = turns.map((t) => ({ inputIds: [...t.contexts[0]], lossMask: t.contexts[0].map(() => 0) }));
  const most = Math.max(...turns.map((t) => t.contexts.length));
  let tokens = 0;
  let done = 0;
  for (let k = 0; k < most; k++) {
    const active = turns.flatMap((t, i) => (k < t.contexts.length ? [i] : []));
    for (let c = 0; c < active.length; c += chunk) {
      const part = active.slice(c, c + chunk);
      // Turn 0 uses continueWithTarget's seeds; later turns move the seed on by the row count.
      const seed = (how.seed ?? 0) + c + k * rows.length;
      const replies = await generate(
        target,
        part.map((i) => built[i].inputIds),
        { maxNewTokens: responseLength, temperature: how.temperature, seed, eosTokenIds: how.eosTokenIds },
      );
      part.forEach((i, j) => {
        const last = k === turns[i].contexts.length - 1;
        if (last) done++;
        const reply = [...replies[j]];
        if (!last) {
          if (endOfTurn.length > 0 && !endOfTurn.includes(reply[reply.length - 1])) reply.push(endOfTurn[0]);
          reply.push(...turns[i].closings[k]);
        }
        const next = last ? [] : turns[i].contexts[k + 1];
        built[i].inputIds.push(...reply, ...next);
        built[i].lossMask.push(...reply.map(() => 1), ...next.map(() => 0));
      });
      tokens += replies.reduce((a, r) => a + r.length, 0);
      onProgress?.(done, rows.length, tokens);
    }
  }
  target.gpu.trimPool(); // the generation's buffers, sized by its prompt lengths (Gpu.trimPool)
  return built;
}
