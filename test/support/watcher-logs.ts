/**
 * What the Machine watcher of a test daemon did, read from its log (`--log-level debug`): each
 * reconcile logs "reconciled the Machine" with its outcome and the resourceVersion of the Machine
 * it read (src/watcher/watcher.ts). A reconcile of the Machine as the server has it now that found
 * nothing to do is the counted event that proves the watcher is done: no event is pending, so
 * nothing further can happen until the Machine changes. Tests wait for it instead of sleeping.
 */
import type { TestDaemon } from './daemon.js';
import { waitUntil } from './daemon.js';
import type { FakeKube } from './fake-kube.js';

/** The flag the daemon needs for these lines. */
export const WATCHER_DEBUG_ARGS = ['--log-level', 'debug'] as const;

interface Reconciled {
  outcome: string;
  resourceVersion: string | null;
}

/** Every reconcile the daemon logged, in order. */
export function reconciles(d: TestDaemon): Reconciled[] {
  const out: Reconciled[] = [];
  for (const line of d.logs().split('\n')) {
    if (!line.includes('reconciled the Machine')) continue;
    try {
      const l = JSON.parse(line) as { msg?: string; outcome?: string; resourceVersion?: string | null };
      if (l.msg === 'reconciled the Machine' && typeof l.outcome === 'string') {
        out.push({ outcome: l.outcome, resourceVersion: l.resourceVersion ?? null });
      }
    } catch {
      // Not a log line of ours (output of a child process).
    }
  }
  return out;
}

/**
 * Resolve once the watcher reconciled the Machine `name` as the fake server has it now, with one
 * of `outcomes` (default: in sync, or a target it does not apply again).
 */
export async function watcherCaughtUp(
  d: TestDaemon,
  kube: FakeKube,
  name: string,
  outcomes: readonly string[] = ['in-sync', 'blocked', 'already-failed'],
): Promise<void> {
  await waitUntil(
    `the watcher to reconcile Machine ${name} as it is now (${outcomes.join(' or ')})`,
    () => {
      const rv = kube.getMachine(name)?.metadata.resourceVersion;
      return reconciles(d).some((r) => r.resourceVersion === rv && outcomes.includes(r.outcome));
    },
    d,
  );
}
