/**
 * Failures recorded in the API (docs/fleet.md, "Pause and halt"): the ConfigMap
 * `agentd-fleet-state`, key `failures.json`, a JSON list every agent appends to when a gated
 * update fails or rolls back. Writes are read-modify-write with the resourceVersion read, retried
 * from a fresh read on conflict, so concurrent failures are all kept. `agentctl fleet resume`
 * empties the list.
 */
import * as z from 'zod';
import { AgentError, describeError } from '../errors.js';
import type { Clock } from '../host/types.js';
import { isAlreadyExists, isWriteConflict, type FleetObjects } from '../kube/index.js';
import { CONFLICT_BACKOFF, backoffDelay } from '../retry/backoff.js';
import { STATE_CONFIGMAP } from './policy.js';

export const FAILURES_KEY = 'failures.json';
/** The list keeps the newest entries only; a halt needs far fewer. */
const MAX_KEPT = 500;
const MAX_ATTEMPTS = 10;

export const failureSchema = z.object({
  node: z.string(),
  operation: z.string(),
  state: z.string(),
  message: z.string(),
  at: z.string(),
});
export type FleetFailure = z.infer<typeof failureSchema>;

export interface FleetState {
  /** The recorded failures; throws when the ConfigMap holds something else (never guessed). */
  failures(): Promise<FleetFailure[]>;
  record(failure: FleetFailure): Promise<void>;
  /** Forget every failure; returns how many there were. */
  clear(): Promise<number>;
}

function parseFailures(text: string | undefined, namespace: string): FleetFailure[] {
  if (text === undefined || text.trim() === '') return [];
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    throw new AgentError(
      'INVALID_CONFIG',
      `ConfigMap ${namespace}/${STATE_CONFIGMAP} ${FAILURES_KEY}: not JSON: ${describeError(err)}`,
    );
  }
  const r = z.array(failureSchema).safeParse(raw);
  if (!r.success) {
    const i = r.error.issues[0];
    throw new AgentError(
      'INVALID_CONFIG',
      `ConfigMap ${namespace}/${STATE_CONFIGMAP} ${FAILURES_KEY}: ${i?.path.join('.') ?? ''}: ${i?.message ?? 'invalid'}`,
    );
  }
  return r.data;
}

/**
 * How many failures the ConfigMap data records, for a waiter deciding whether a halt may have
 * ended; content that does not parse counts as none, so the waiter looks again and reports it.
 */
export function countFailures(data: Readonly<Record<string, string>>): number {
  try {
    const list: unknown = JSON.parse(data[FAILURES_KEY] ?? '[]');
    return Array.isArray(list) ? list.length : 0;
  } catch {
    return 0;
  }
}

export function createFleetState(o: {
  objects: Pick<FleetObjects, 'getConfigMap' | 'createConfigMap' | 'replaceConfigMap' | 'namespace'>;
  clock: Clock;
}): FleetState {
  const { objects, clock } = o;
  const ns = objects.namespace;

  /** Read-modify-write of the list; `change` returns null to write nothing. */
  async function modify(change: (list: FleetFailure[]) => FleetFailure[] | null): Promise<FleetFailure[]> {
    for (let attempt = 1; ; attempt += 1) {
      const cm = await objects.getConfigMap(STATE_CONFIGMAP);
      const list = parseFailures(cm?.data[FAILURES_KEY], ns);
      const next = change(list);
      if (next === null) return list;
      const data = { ...(cm?.data ?? {}), [FAILURES_KEY]: JSON.stringify(next) };
      try {
        if (cm === null) await objects.createConfigMap(STATE_CONFIGMAP, data);
        else await objects.replaceConfigMap(STATE_CONFIGMAP, cm.resourceVersion, data);
        return list;
      } catch (err) {
        if (!(isWriteConflict(err) || isAlreadyExists(err)) || attempt >= MAX_ATTEMPTS) throw err;
        await clock.sleep(backoffDelay(attempt, CONFLICT_BACKOFF));
      }
    }
  }

  return {
    async failures() {
      const cm = await objects.getConfigMap(STATE_CONFIGMAP);
      return parseFailures(cm?.data[FAILURES_KEY], ns);
    },
    async record(failure) {
      await modify((list) => [...list, failure].slice(-MAX_KEPT));
    },
    async clear() {
      const before = await modify((list) => (list.length === 0 ? null : []));
      return before.length;
    },
  };
}
