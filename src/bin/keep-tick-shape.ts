/**
 * Keep one of `process.nextTick`'s queue entries alive for the life of the daemon: the way
 * around a performance cliff of the V8 in Node 26, measured in docs/benchmarks.md ("RPC",
 * "process.nextTick after a memory-reducing collection").
 *
 * `process.nextTick` builds every queue entry with an object literal whose first keys are
 * computed (Node's async-id symbols). V8 defines such keys through an inline cache that holds
 * the literal's hidden classes (maps) weakly. A memory-reducing full collection, which V8's
 * memory reducer runs when a process that was busy goes idle, keeps no map without a live
 * object. When no entry is queued at that moment, the maps die, and on Node 26.10 the cache
 * never gets its fast path back: from then on every `nextTick` takes the runtime's slow path,
 * ~6× slower (48 → 290 ns), and a node:http server spends ~20 % more CPU per request for the
 * rest of its life. One live entry keeps the maps, and with them the cache, valid. Node 20 is
 * not affected; there the kept entry is just one small object.
 */
import { createHook } from 'node:async_hooks';

let kept: object | undefined;

const noop = (): void => undefined;

/**
 * Queue one no-op tick and keep its entry (idempotent). Node hands the entry to async hooks'
 * `init` as the `TickObject` resource; the hook is enabled only for that one call. Returns the
 * entry, or undefined on a runtime that does not report it (nothing is kept then).
 */
export function keepNextTickShape(): object | undefined {
  if (kept) return kept;
  const hook = createHook({
    init(_asyncId, type, _triggerAsyncId, resource) {
      if (type === 'TickObject' && kept === undefined) kept = resource as object;
    },
  });
  hook.enable();
  try {
    process.nextTick(noop);
  } finally {
    hook.disable();
  }
  return kept;
}
