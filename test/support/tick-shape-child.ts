/**
 * A child process for test/unit/bin/keep-tick-shape.test.ts and bench/next-tick.ts: queues
 * `process.nextTick` calls, runs a memory-reducing full collection, queues them again.
 * Usage: node --expose-gc --allow-natives-syntax --import tsx tick-shape-child.ts keep|plain
 * `keep` first calls agentd's keepNextTickShape (src/bin/keep-tick-shape.ts). Prints one JSON
 * line: the ns per call of each burst before and after the collection, and whether the kept
 * entry (if any) shares its hidden class with an entry queued after the collection.
 */
import { createHook } from 'node:async_hooks';
import { keepNextTickShape } from '../../src/bin/keep-tick-shape.js';

type GcOptions = { type: 'major'; execution: 'sync'; flavor: 'last-resort' };
const gc = (globalThis as { gc?: (o: GcOptions) => void }).gc;
if (!gc) throw new Error('run with --expose-gc');
// Compiled by V8 at run time: TypeScript has no syntax for V8's natives.
const haveSameMap = new Function('a', 'b', 'return %HaveSameMap(a, b)') as (a: object, b: object) => boolean;

const mode = process.argv[2];
if (mode !== 'keep' && mode !== 'plain') throw new Error('usage: tick-shape-child.ts keep|plain');
const kept = mode === 'keep' ? keepNextTickShape() : undefined;
const BURSTS = Number(process.env.TICK_BURSTS ?? 3);
const ROUNDS = Number(process.env.TICK_ROUNDS ?? 1000);

const noop = (): void => undefined;
/** ns per `nextTick` call, over ROUNDS rounds of 1000 calls, each round in a turn of its own. */
function burst(): Promise<number> {
  return new Promise((resolve) => {
    let round = 0;
    const start = process.hrtime.bigint();
    const step = (): void => {
      for (let k = 0; k < 1000; k++) process.nextTick(noop, k);
      if (++round < ROUNDS) setImmediate(step);
      else resolve(Number(process.hrtime.bigint() - start) / (ROUNDS * 1000));
    };
    step();
  });
}

/** One entry queued now, as Node hands it to async hooks. */
function freshEntry(): object {
  let entry: object | undefined;
  const hook = createHook({
    init(_id, type, _trigger, resource) {
      if (type === 'TickObject') entry ??= resource as object;
    },
  }).enable();
  process.nextTick(noop, 0);
  hook.disable();
  if (!entry) throw new Error('this runtime reports no TickObject to async hooks');
  return entry;
}

const before: number[] = [];
for (let i = 0; i < BURSTS; i++) before.push(await burst());
// Idle: nothing queued, as when the memory reducer collects between bursts of requests.
await new Promise((resolve) => setTimeout(resolve, 50));
gc({ type: 'major', execution: 'sync', flavor: 'last-resort' });
const after: number[] = [];
for (let i = 0; i < BURSTS; i++) after.push(await burst());
const fresh = freshEntry();
process.stdout.write(
  `${JSON.stringify({ mode, before, after, kept: kept !== undefined, sameMap: kept ? haveSameMap(kept, fresh) : null })}\n`,
);
