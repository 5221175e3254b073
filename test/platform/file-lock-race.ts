/**
 * The lock race (src/platform/file-lock.ts): separate processes race to take over one stale lock,
 * trial after trial, and exactly one may win each time. Before the takeover guard, "read, remove,
 * link" let two processes both hold a stale-lock takeover (3 of 20 trials).
 *
 *   npx tsx test/platform/file-lock-race.ts [--trials 200] [--racers 3]
 *   deno run -A test/platform/file-lock-race.ts [--trials 200] [--racers 3]
 *
 * The racers are long-lived worker processes (./file-lock-race-worker.ts) driven line by line over
 * stdin, so a trial costs milliseconds, not a process start: each trial writes a fresh stale lock
 * (pid 2147483646, which no process has, on this host) into its own folder, tells every worker `go`
 * at once, and counts who says `acquired`. Run by scripts/test-all.sh under both runtimes.
 */
import { raceRuntime } from './file-lock-race-runtime.ts';

const rt = await raceRuntime();
const flag = (name: string, fallback: number) => {
  const i = rt.args.indexOf(`--${name}`);
  return i >= 0 ? Number(rt.args[i + 1]) : fallback;
};
const trials = flag('trials', 200);
const racers = flag('racers', 3);
const dir = await rt.makeTempDir();
const workers = await Promise.all(Array.from({ length: racers }, () => rt.spawnWorker(dir)));
const tally = { single: 0, double: 0, none: 0, errors: [] as string[] };
try {
  for (let trial = 0; trial < trials; trial++) {
    const stale = { pid: 2147483646, host: rt.hostname, since: new Date(Date.UTC(2026, 0, 1, 0, 0, 0, trial)).toISOString() };
    await rt.writeFile(`${dir}/t${trial}/LOCK`, JSON.stringify(stale));
    for (const w of workers) w.send(`go ${trial}`);
    const replies = await Promise.all(workers.map((w) => w.nextLine()));
    const winners = workers.filter((_, i) => replies[i].startsWith('acquired'));
    for (const r of replies) if (r.startsWith('error')) tally.errors.push(`trial ${trial}: ${r}`);
    if (winners.length === 1) tally.single++;
    else if (winners.length === 0) tally.none++;
    else tally.double++;
    for (const w of winners) w.send(`release ${trial}`);
    await Promise.all(winners.map((w) => w.nextLine()));
  }
} finally {
  for (const w of workers) w.close();
  await rt.removeDir(dir);
}
const ok = tally.double === 0 && tally.none === 0 && tally.errors.length === 0;
const tag = `[${rt.name}]`;
console.log(
  `${tag} ${ok ? 'ok  ' : 'FAIL'} platform/file-lock › ${racers} processes race for one stale lock, ${trials} trials: ` +
    `${tally.single} with one owner, ${tally.double} with two or more, ${tally.none} with none` +
    (tally.errors.length ? `; errors: ${tally.errors.slice(0, 3).join('; ')}` : ''),
);
console.log(`${tag} ${ok ? 1 : 0} passed, ${ok ? 0 : 1} failed`);
rt.exit(ok ? 0 : 1);
