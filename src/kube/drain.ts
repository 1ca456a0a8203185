/**
 * Node drain through the Eviction API, like `kubectl drain`: cordon, list the node's pods, refuse
 * the whole drain when a pod may not be evicted, evict the rest with bounded concurrency
 * (retrying while a PodDisruptionBudget says 429), and wait until the evicted pods are gone.
 * Time is the injected clock's, so tests run timeouts without waiting.
 */
import type { CoreV1Api } from '@kubernetes/client-node';
import { AgentError, CancelledError, DrainFailedError } from '../errors.js';
import { systemClock } from '../host/clock.js';
import type { Clock } from '../host/types.js';
import { Backoff, sleepOrCancel } from '../retry/backoff.js';
import { isRetryableStatus } from '../retry/retryable.js';
import { kubeStatusOf, toKubeError } from './api-errors.js';
import { cordonNode, uncordonNode } from './cordon.js';
import type { CordonResult, UncordonResult } from './cordon.js';
import { formatPods, planPodEvictions } from './pod-filter.js';
import type { PodRef, PodWithReason } from './pod-filter.js';
import { nodeSchema, parseKubeObject, podSchema } from './schemas.js';

export type { PodRef, PodWithReason } from './pod-filter.js';

export interface DrainOptions {
  /** Give up (DRAIN_FAILED, node stays cordoned) after this long (default 5 min). */
  timeoutMs?: number;
  /** Delete pods not managed by a controller. */
  force?: boolean;
  /** Skip DaemonSet pods instead of refusing the drain. */
  ignoreDaemonSets?: boolean;
  /** Evict pods with emptyDir volumes (their data is lost). */
  deleteEmptyDirData?: boolean;
  /** Report what would happen; change nothing. */
  dryRun?: boolean;
  /** Evictions in flight at once (default 5). */
  concurrency?: number;
  /** Cordon the node first (default true). */
  cordon?: boolean;
  /**
   * First wait between eviction attempts refused with 429 or a server error (default 5 s, as
   * kubectl); it grows, jittered, up to six times that while the refusals go on.
   */
  evictionRetryMs?: number;
  /** Interval of the checks that an evicted pod is gone (default 1 s). */
  pollIntervalMs?: number;
  clock?: Clock;
  signal?: AbortSignal;
}

/** What a drain did (or, with `dryRun`, would do). */
export interface DrainResult {
  node: string;
  dryRun: boolean;
  /** Whether the node was cordoned before; null when the drain did not cordon. */
  cordon: CordonResult | null;
  /** Evicted and gone (with dryRun: would be evicted). */
  evicted: PodRef[];
  skipped: PodWithReason[];
  /** Pods that could not be evicted (empty on success; with dryRun: pods that would refuse the drain). */
  remaining: PodWithReason[];
  /** Pods evicted with a warning (e.g. unmanaged pods deleted because of `force`). */
  warnings: PodWithReason[];
}

type EvictOutcome = { gone: true } | { gone: false; reason: string };

async function listNodePods(core: CoreV1Api, node: string) {
  try {
    const list = await core.listPodForAllNamespaces({ fieldSelector: `spec.nodeName=${node}` });
    return list.items.map((item) => parseKubeObject(podSchema, 'Pod', item));
  } catch (err) {
    throw toKubeError(err, `list the pods of Node ${node}`);
  }
}

/** Drain `node`; see `DrainOptions`. Throws DRAIN_FAILED when pods are refused or remain at the timeout. */
export async function drainNode(
  core: CoreV1Api,
  node: string,
  options: DrainOptions = {},
): Promise<DrainResult> {
  const clock = options.clock ?? systemClock;
  const { signal } = options;
  const timeoutMs = options.timeoutMs ?? 300_000;
  const retryMs = options.evictionRetryMs ?? 5000;
  const pollMs = options.pollIntervalMs ?? 1000;
  const what = `drain Node ${node}`;
  if (signal?.aborted) throw new CancelledError(what);

  if (options.dryRun) {
    let alreadyCordoned: boolean;
    try {
      alreadyCordoned =
        parseKubeObject(nodeSchema, 'Node', await core.readNode({ name: node })).spec?.unschedulable === true;
    } catch (err) {
      throw toKubeError(err, `read Node ${node}`, { object: `Node ${node}` });
    }
    const plan = planPodEvictions(await listNodePods(core, node), options);
    return {
      node,
      dryRun: true,
      cordon: { alreadyCordoned },
      evicted: plan.evict.map(({ namespace, name }) => ({ namespace, name })),
      skipped: plan.skip,
      remaining: plan.refuse,
      warnings: plan.evict.flatMap((p) =>
        p.warning ? [{ namespace: p.namespace, name: p.name, reason: p.warning }] : [],
      ),
    };
  }

  // Cordon before listing, so no new pod lands on the node between the list and the evictions.
  const cordon = options.cordon === false ? null : await cordonNode(core, node);
  const plan = planPodEvictions(await listNodePods(core, node), options);
  const warnings = plan.evict.flatMap((p) =>
    p.warning ? [{ namespace: p.namespace, name: p.name, reason: p.warning }] : [],
  );
  if (plan.refuse.length > 0) {
    // Nothing was evicted: take back our own cordon so a refused drain leaves the node as it was.
    if (cordon && !cordon.alreadyCordoned) await uncordonNode(core, node);
    throw new DrainFailedError(
      `${what}: cannot evict ${plan.refuse.length} pod(s): ${formatPods(plan.refuse)}`,
      {
        data: { node, reason: 'PodsRefused', refused: plan.refuse, skipped: plan.skip },
      },
    );
  }

  const deadline = clock.now() + timeoutMs;
  const evicted: PodRef[] = [];
  const remaining: PodWithReason[] = [];
  let fatal: AgentError | undefined;

  async function waitGone(pod: PodRef & { uid: string | undefined }): Promise<boolean> {
    for (;;) {
      try {
        // A list by name and node rather than a GET: a node's own identity may list only the pods
        // bound to it, by that field selector (the Node authorizer; docs/watcher.md, "Least
        // privilege"). A pod of that name on another node is not this drain's: it is gone from here.
        const list = await core.listNamespacedPod({
          namespace: pod.namespace,
          fieldSelector: `metadata.name=${pod.name},spec.nodeName=${node}`,
        });
        const current = list.items.map((item) => parseKubeObject(podSchema, 'Pod', item))[0];
        if (current === undefined || (pod.uid !== undefined && current.metadata.uid !== pod.uid)) return true;
      } catch {
        // A 5xx or a blip: keep polling until the deadline.
      }
      const left = deadline - clock.now();
      if (left <= 0) return false;
      await sleepOrCancel(clock, Math.min(pollMs, left), signal, what);
    }
  }

  async function evictOne(pod: PodRef & { uid: string | undefined }): Promise<EvictOutcome> {
    const body = {
      apiVersion: 'policy/v1',
      kind: 'Eviction',
      metadata: { name: pod.name, namespace: pod.namespace },
    };
    const backoff = new Backoff({ baseMs: retryMs, maxMs: retryMs * 6 });
    for (;;) {
      if (signal?.aborted) throw new CancelledError(what);
      let reason: string;
      try {
        await core.createNamespacedPodEviction({ name: pod.name, namespace: pod.namespace, body });
        return (await waitGone(pod))
          ? { gone: true }
          : { gone: false, reason: 'evicted but still terminating at the timeout' };
      } catch (err) {
        if (err instanceof CancelledError) throw err;
        const status = kubeStatusOf(err);
        if (status?.code === 404) return { gone: true };
        if (status?.code === 401 || status?.code === 403)
          throw toKubeError(err, `evict Pod ${pod.namespace}/${pod.name}`);
        const retryable = status === undefined || isRetryableStatus(status.code);
        reason =
          status?.code === 429
            ? `blocked by a PodDisruptionBudget: ${status.details?.causes?.[0]?.message ?? status.message ?? 'too many requests'}`
            : toKubeError(err, 'eviction').message;
        if (!retryable) return { gone: false, reason };
      }
      // 429 (budget exhausted) and server errors are retried until the deadline, like kubectl.
      const left = deadline - clock.now();
      if (left <= 0) return { gone: false, reason };
      await sleepOrCancel(clock, Math.min(backoff.next(), left), signal, what);
    }
  }

  const queue = [...plan.evict];
  async function worker(): Promise<void> {
    while (fatal === undefined) {
      const pod = queue.shift();
      if (pod === undefined) return;
      try {
        const outcome = await evictOne(pod);
        const ref = { namespace: pod.namespace, name: pod.name };
        if (outcome.gone) evicted.push(ref);
        else remaining.push({ ...ref, reason: outcome.reason });
      } catch (err) {
        // Stop the other workers too: cancellation or credentials that cannot work for any pod.
        fatal ??= err instanceof AgentError ? err : toKubeError(err, what);
      }
    }
  }
  const workers = Math.max(1, Math.min(options.concurrency ?? 5, queue.length));
  await Promise.all(Array.from({ length: workers }, () => worker()));
  if (fatal !== undefined) throw fatal;

  if (remaining.length > 0) {
    throw new DrainFailedError(
      `${what}: ${remaining.length} pod(s) could not be evicted within ${timeoutMs} ms: ${formatPods(remaining)}`,
      { data: { node, reason: 'Timeout', timeoutMs, evicted, skipped: plan.skip, remaining } },
    );
  }
  return { node, dryRun: false, cordon, evicted, skipped: plan.skip, remaining: [], warnings };
}

/** Cordon, uncordon and drain bound to one client and clock. */
export interface NodeDrainer {
  cordon(node: string): Promise<CordonResult>;
  uncordon(node: string, options?: { force?: boolean }): Promise<UncordonResult>;
  drainNode(node: string, options?: DrainOptions): Promise<DrainResult>;
}

export function createNodeDrainer(options: { core: CoreV1Api; clock?: Clock }): NodeDrainer {
  const { core } = options;
  return {
    cordon: (node) => cordonNode(core, node),
    uncordon: (node, opts) => uncordonNode(core, node, opts),
    drainNode: (node, opts = {}) => drainNode(core, node, { ...opts, clock: opts.clock ?? options.clock }),
  };
}

export { cordonNode, uncordonNode, CORDONED_BY_AGENTD_ANNOTATION } from './cordon.js';
export type { CordonResult, UncordonResult } from './cordon.js';
