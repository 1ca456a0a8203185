/**
 * Which pods a drain evicts, skips or refuses, with kubectl drain's rules: mirror pods are
 * skipped; DaemonSet pods are skipped with `ignoreDaemonSets`, refused otherwise; pods without a
 * controller need `force`, pods with emptyDir volumes need `deleteEmptyDirData`; finished pods
 * are always evicted.
 */
import type { KubePod } from './schemas.js';

export const MIRROR_POD_ANNOTATION = 'kubernetes.io/config.mirror';

/** A pod named by namespace and name. */
export interface PodRef {
  namespace: string;
  name: string;
}

/** A pod and why it was skipped or could not be evicted. */
export interface PodWithReason extends PodRef {
  reason: string;
}

export interface PodFilterOptions {
  force?: boolean;
  ignoreDaemonSets?: boolean;
  deleteEmptyDirData?: boolean;
}

export interface PodPlan {
  evict: Array<PodRef & { uid: string | undefined; warning?: string }>;
  skip: PodWithReason[];
  refuse: PodWithReason[];
}

function controllerOf(pod: KubePod): { kind: string; name: string } | undefined {
  return pod.metadata.ownerReferences?.find((o) => o.controller === true);
}

export function planPodEvictions(pods: readonly KubePod[], options: PodFilterOptions): PodPlan {
  const plan: PodPlan = { evict: [], skip: [], refuse: [] };
  for (const pod of pods) {
    const ref = { namespace: pod.metadata.namespace, name: pod.metadata.name };
    if (pod.metadata.annotations?.[MIRROR_POD_ANNOTATION] !== undefined) {
      plan.skip.push({ ...ref, reason: 'mirror pod of a static pod (managed by the kubelet)' });
      continue;
    }
    const phase = pod.status?.phase;
    const finished = phase === 'Succeeded' || phase === 'Failed';
    const controller = controllerOf(pod);
    if (!finished && controller?.kind === 'DaemonSet') {
      if (options.ignoreDaemonSets)
        plan.skip.push({ ...ref, reason: `managed by DaemonSet ${controller.name}` });
      else
        plan.refuse.push({
          ...ref,
          reason: `managed by DaemonSet ${controller.name} (set ignoreDaemonSets to skip it)`,
        });
      continue;
    }
    const problems: string[] = [];
    let warning: string | undefined;
    if (!finished && controller === undefined) {
      if (options.force) warning = 'not managed by a controller: it will not be recreated';
      else problems.push('not managed by a controller (set force to delete it; it will not be recreated)');
    }
    const emptyDirs = (pod.spec?.volumes ?? []).filter(
      (v) => v.emptyDir !== undefined && v.emptyDir !== null,
    );
    if (!finished && emptyDirs.length > 0 && !options.deleteEmptyDirData) {
      problems.push(
        `uses emptyDir volume ${emptyDirs.map((v) => v.name).join(', ')} (set deleteEmptyDirData; its data will be lost)`,
      );
    }
    if (problems.length > 0) plan.refuse.push({ ...ref, reason: problems.join('; ') });
    else plan.evict.push({ ...ref, uid: pod.metadata.uid ?? undefined, ...(warning ? { warning } : {}) });
  }
  return plan;
}

export function formatPods(pods: readonly PodWithReason[]): string {
  return pods.map((p) => `${p.namespace}/${p.name} (${p.reason})`).join(', ');
}
