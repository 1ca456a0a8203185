/**
 * The event recorder's sink for the session's credentials of the moment: the API server
 * (src/kube/event-sink.ts), with each regarding reference completed before its first Event — the
 * Machine's uid, and the Node the Machine's `spec.kubernetes.nodeRef` names (else the Node named
 * like the Machine) with its uid — so that `kubectl describe machine|node` lists them (it selects
 * Events by the object's uid). What is looked up is kept for a minute.
 */
import type { Clock } from '../host/types.js';
import type { EventObjectRef, EventSink } from '../kube/event-recorder.js';
import type { KubeSession } from '../kube/session.js';

/** How long a looked-up uid (or nodeRef) is used before it is read again. */
export const EVENT_REF_TTL_MS = 60_000;

export interface ResolvingEventSinks {
  /** The sink for the credentials of the moment, or null when Kubernetes is not available. */
  current(): EventSink | null;
  /** The reference of the Machine named `name` (its uid is added by the sink). */
  machineRef(name: string): EventObjectRef;
}

export function createResolvingEventSink(o: {
  session: Pick<KubeSession, 'current'>;
  clock: Clock;
}): ResolvingEventSinks {
  let memo: { clients: object; sink: EventSink } | null = null;

  function make(): EventSink | null {
    const conn = o.session.current();
    if (conn === null) return null;
    if (memo?.clients === conn.clients) return memo.sink;
    const { runtime, clients } = conn;
    // Their own rate limit: Events never take the tokens of the watcher's and drain's requests.
    const own = runtime.createEventClients(clients, o.clock);
    const base = runtime.createEventSink(own.custom);
    const machines = runtime.createMachineApi({
      custom: own.custom,
      group: clients.crdGroup,
      clock: o.clock,
    });
    const known = new Map<string, { at: number; ref: EventObjectRef }>();
    const lookUp = async (key: string, read: () => Promise<EventObjectRef>): Promise<EventObjectRef> => {
      const hit = known.get(key);
      if (hit !== undefined && o.clock.now() - hit.at < EVENT_REF_TTL_MS) return hit.ref;
      const ref = await read();
      known.set(key, { at: o.clock.now(), ref });
      return ref;
    };
    const sink: EventSink = {
      create: (event) => base.create(event),
      patchSeries: (namespace, name, series) => base.patchSeries(namespace, name, series),
      resolve(ref) {
        const key = `${ref.kind}/${ref.name}`;
        if (ref.kind === 'Machine') {
          return lookUp(key, async () => {
            const m = await machines.getMachine(ref.name);
            return m === null ? ref : { ...ref, uid: m.metadata.uid };
          });
        }
        if (ref.kind !== 'Node') return Promise.resolve(ref);
        return lookUp(key, async () => {
          // The Node as drain finds it: the Machine's nodeRef, else named like the Machine.
          let name = ref.name;
          try {
            name = (await machines.getMachine(ref.name))?.spec.kubernetes?.nodeRef?.name ?? ref.name;
          } catch {
            // No Machine to read (no CRD, no right): the Node named like it.
          }
          try {
            const node = (await own.core.readNode({ name })) as { metadata?: { uid?: string } };
            return { ...ref, name, ...(node.metadata?.uid ? { uid: node.metadata.uid } : {}) };
          } catch {
            return { ...ref, name };
          }
        });
      },
    };
    memo = { clients: conn.clients, sink };
    return sink;
  }

  return {
    current: make,
    machineRef: (name) => {
      const conn = o.session.current();
      const apiVersion = `${conn?.clients.crdGroup ?? 'unbounded-cloud.io'}/${conn?.runtime.MACHINE_VERSION ?? 'v1alpha3'}`;
      return { apiVersion, kind: 'Machine', name };
    },
  };
}
