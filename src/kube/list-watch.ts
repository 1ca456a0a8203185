/**
 * List, then watch from the list's resourceVersion: the one way agentd follows a Kubernetes
 * object other than its Machine (the fleet's Leases and policy ConfigMap, this node's Node).
 * Restarting it when it ends is the caller's loop (`watchOnce`, src/kube/watch-once.ts).
 */
import { Watch } from '@kubernetes/client-node';
import type { KubeConfig } from '@kubernetes/client-node';
import type { AgentError } from '../errors.js';
import { toKubeError } from './api-errors.js';

export interface ListThenWatch {
  /** What is watched, for errors: "ConfigMap ns/name". */
  what: string;
  list: () => Promise<{ items: unknown[]; metadata?: { resourceVersion?: string } }>;
  /** The collection's API path, and the query of the list (selectors) the watch repeats. */
  path: string;
  query: Record<string, string>;
  onList: (items: unknown[]) => void;
  onChange: (type: 'ADDED' | 'MODIFIED' | 'DELETED', object: unknown) => void;
  onDone: (err: AgentError | null) => void;
}

/**
 * List, hand the items to `onList`, then watch from the list's resourceVersion. Events other
 * than ERROR go to `onChange` (a decode error ends the watch with that error); `onDone` is
 * called once when the watch ends by itself, never after the returned stop function ran.
 */
export async function listThenWatch(kc: KubeConfig, w: ListThenWatch): Promise<() => void> {
  const what = `watch ${w.what}`;
  let list: Awaited<ReturnType<ListThenWatch['list']>>;
  try {
    list = await w.list();
  } catch (err) {
    throw toKubeError(err, `list ${w.what}`);
  }
  w.onList(list.items);
  let done = false;
  let aborted = false;
  const finish = (err: AgentError | null): void => {
    if (done) return;
    done = true;
    if (!aborted) w.onDone(err);
  };
  let controller: AbortController;
  try {
    controller = await new Watch(kc).watch(
      w.path,
      { ...w.query, resourceVersion: list.metadata?.resourceVersion },
      (type, object: unknown) => {
        if (done) return;
        try {
          if (type === 'ADDED' || type === 'MODIFIED' || type === 'DELETED') w.onChange(type, object);
          else if (type === 'ERROR') {
            const st = object as { message?: string; code?: number };
            finish(
              toKubeError(
                Object.assign(new Error(st.message ?? 'watch error'), { statusCode: st.code }),
                what,
              ),
            );
          }
        } catch (err) {
          finish(toKubeError(err, what));
        }
      },
      (err: unknown) => finish(err === null || err === undefined ? null : toKubeError(err, what)),
    );
  } catch (err) {
    throw toKubeError(err, what);
  }
  return () => {
    aborted = true;
    done = true;
    controller.abort();
  };
}
