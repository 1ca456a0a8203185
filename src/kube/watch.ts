/**
 * A typed seam over client-node's `Watch` for one Machine (field selector on its name, resume
 * from a resourceVersion, bookmarks). It does not restart itself: the watcher loop decides.
 * A 410 (the resourceVersion was compacted away) ends the watch with an error that
 * `isWatchExpired` recognises, so the loop knows to relist instead of merely reconnecting.
 */
import { Watch } from '@kubernetes/client-node';
import type { KubeConfig } from '@kubernetes/client-node';
import { AgentError, KubeUnavailableError } from '../errors.js';
import { kubeStatusOf, toKubeError } from './api-errors.js';
import {
  DEFAULT_CRD_GROUP,
  MACHINE_KIND,
  MACHINE_PLURAL,
  MACHINE_VERSION,
  machineSchema,
  parseKubeObject,
} from './schemas.js';
import type { Machine } from './schemas.js';

/** One event of a Machine watch. */
export type MachineWatchEvent =
  | { type: 'ADDED' | 'MODIFIED' | 'DELETED'; machine: Machine; resourceVersion: string }
  /** Progress without a change: resume from this resourceVersion next time. */
  | { type: 'BOOKMARK'; resourceVersion: string }
  /** An event whose object did not parse; counted by the watcher rather than swallowed. */
  | { type: 'DECODE_ERROR'; error: AgentError; raw: unknown };

export interface MachineWatchHandle {
  /** Stop the watch. `onDone` is not called after an abort. */
  abort(): void;
}

/**
 * Watch one Machine. `onDone` is called once when the watch ends by itself: `null` when the
 * server closed the stream (resume from the last resourceVersion), else the error (see
 * `isWatchExpired`). `onEvent` must not throw; if it does, the watch stops and `onDone` gets it.
 */
export type WatchMachine = (
  name: string,
  resourceVersion: string | undefined,
  onEvent: (event: MachineWatchEvent) => void,
  onDone: (err: AgentError | null) => void,
) => Promise<MachineWatchHandle>;

export interface MachineWatchOptions {
  kc: KubeConfig;
  /** API group of the Machine CRD (default `unbounded-cloud.io`). */
  group?: string;
  /** Ask for BOOKMARK events (default true). */
  allowBookmarks?: boolean;
  /** Ask the server to end the watch after this long (it does so anyway after 5–10 minutes). */
  timeoutSeconds?: number;
}

/** True when a watch ended because its resourceVersion is too old (HTTP 410 Gone): relist. */
export function isWatchExpired(err: unknown): boolean {
  return err instanceof KubeUnavailableError && err.data.reason === 'Expired';
}

function expired(
  name: string,
  resourceVersion: string | undefined,
  detail: string | undefined,
): KubeUnavailableError {
  return new KubeUnavailableError(
    `watch Machine ${name}: resourceVersion ${resourceVersion ?? '(none)'} is too old (410 Gone${detail ? `: ${detail}` : ''}); relist and watch again`,
    { data: { reason: 'Expired', status: 410, resourceVersion } },
  );
}

export function createMachineWatch(options: MachineWatchOptions): { watchMachine: WatchMachine } {
  const group = options.group ?? DEFAULT_CRD_GROUP;
  const path = `/apis/${group}/${MACHINE_VERSION}/${MACHINE_PLURAL}`;

  const watchMachine: WatchMachine = async (name, resourceVersion, onEvent, onDone) => {
    const what = `watch Machine ${name}`;
    let finished = false;
    let aborted = false;
    let controller: AbortController | undefined;
    const finish = (err: AgentError | null): void => {
      if (finished) return;
      finished = true;
      controller?.abort();
      if (!aborted) onDone(err);
    };
    const emit = (event: MachineWatchEvent): void => {
      try {
        onEvent(event);
      } catch (err) {
        // client-node swallows exceptions thrown from its callback: surface them instead.
        finish(
          err instanceof AgentError
            ? err
            : new AgentError('INTERNAL', `${what}: event handler failed: ${String(err)}`, { cause: err }),
        );
      }
    };
    const handleEvent = (type: string, object: unknown): void => {
      if (finished) return;
      const rv = (object as { metadata?: { resourceVersion?: unknown } } | null)?.metadata?.resourceVersion;
      if (type === 'ADDED' || type === 'MODIFIED' || type === 'DELETED') {
        try {
          const machine = parseKubeObject(machineSchema, MACHINE_KIND, object);
          emit({ type, machine, resourceVersion: machine.metadata.resourceVersion });
        } catch (err) {
          emit({ type: 'DECODE_ERROR', error: toKubeError(err, what), raw: object });
        }
      } else if (type === 'BOOKMARK' && typeof rv === 'string') {
        emit({ type: 'BOOKMARK', resourceVersion: rv });
      } else if (type === 'ERROR') {
        const status = (object ?? {}) as { code?: unknown; message?: unknown; reason?: unknown };
        const message = typeof status.message === 'string' ? status.message : undefined;
        if (status.code === 410) finish(expired(name, resourceVersion, message));
        else {
          finish(
            new KubeUnavailableError(
              `${what}: the server ended the watch with an error: ${message ?? JSON.stringify(object)}`,
              {
                data: {
                  reason: typeof status.reason === 'string' ? status.reason : 'WatchError',
                  status: status.code,
                },
              },
            ),
          );
        }
      } else {
        emit({
          type: 'DECODE_ERROR',
          error: new KubeUnavailableError(`${what}: unexpected event type ${JSON.stringify(type)}`, {
            data: { reason: 'Decode' },
          }),
          raw: object,
        });
      }
    };
    const handleDone = (err: unknown): void => {
      if (aborted || finished) return;
      if (err === null || err === undefined) finish(null);
      else if (kubeStatusOf(err)?.code === 410) finish(expired(name, resourceVersion, undefined));
      else finish(toKubeError(err, what, { crdGroup: group }));
    };

    const query: Record<string, string | number | boolean | undefined> = {
      fieldSelector: `metadata.name=${name}`,
      allowWatchBookmarks: options.allowBookmarks ?? true,
      resourceVersion,
      timeoutSeconds: options.timeoutSeconds,
    };
    try {
      controller = await new Watch(options.kc).watch(path, query, handleEvent, handleDone);
    } catch (err) {
      throw toKubeError(err, what, { crdGroup: group });
    }
    // The stream may already have ended (e.g. a 410 right away) before `watch` returned.
    if (finished) controller.abort();
    return {
      abort(): void {
        aborted = true;
        finished = true;
        controller?.abort();
      },
    };
  };

  return { watchMachine };
}
