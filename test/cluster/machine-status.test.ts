/**
 * What runs, in Machine status (docs/watcher.md, "What runs"), on the real API server with
 * deploy/'s CRD and with upstream's: after an update and after a rollback the Machine says which
 * machine is active, the Kubernetes version and image it runs, the last operation and its result,
 * and the acknowledged counter — read back unpruned — and `kubectl get machines -o wide` prints
 * them in deploy/'s columns.
 */
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { waitUntil } from '../support/daemon.js';
import { machinePath, startClusterAgent } from '../support/control-plane/agent.js';
import {
  controlPlaneAvailable,
  DEPLOY_DIR,
  UPSTREAM_CRD,
  type KubeJson,
} from '../support/control-plane/index.js';
import { useControlPlane } from '../support/control-plane/use.js';

const condition = (m: KubeJson | null, type: string): KubeJson | undefined =>
  ((m?.status?.conditions ?? []) as KubeJson[]).find((c) => c.type === type);

const SCHEMAS = [
  ['deploy/machine-crd.yaml', path.join(DEPLOY_DIR, 'machine-crd.yaml')],
  ["upstream's schema", UPSTREAM_CRD],
] as const;

describe.skipIf(!controlPlaneAvailable())('what runs, in Machine status, against kube-apiserver', () => {
  const cp = useControlPlane();
  let n = 0;

  it.each(SCHEMAS)('with %s: after an update and after a rollback, unpruned', async (label, file) => {
    await cp().installCrd(file);
    const tag = label.startsWith('deploy') ? 'deploy' : 'upstream';
    const good = await startClusterAgent(cp(), { name: `status-${tag}-ok-${++n}` });
    const bad = await startClusterAgent(cp(), {
      name: `status-${tag}-rb-${++n}`,
      // kube2's kubelet never becomes active: verify fails, the node rolls back to kube1.
      env: { AGENTD_SIM_FAULTS: 'kubelet-inactive:kube2' },
    });
    for (const a of [good, bad]) {
      await waitUntil('the Machine to be registered', async () => (await a.machine()) !== null, a.d);
      await cp().api.mergePatch(machinePath(a.name), { spec: { operations: { repaveCounter: 1 } } });
    }
    await waitUntil(
      'the update’s outcome',
      // What runs may be written a moment before the acknowledgement (with a wait's write).
      async () => {
        const m = await good.machine();
        return (
          condition(m, 'LastOperation')?.reason === 'Succeeded' && m?.status.operations?.repaveCounter === 1
        );
      },
      good.d,
    );
    await waitUntil(
      'the rollback’s outcome',
      async () => {
        const m = await bad.machine();
        return (
          condition(m, 'LastOperation')?.reason === 'RolledBack' &&
          condition(m, 'NodeUpdated')?.reason === 'RolledBack'
        );
      },
      bad.d,
    );

    const ok = await good.machine();
    expect(ok?.status.operations.repaveCounter).toBe(1);
    expect(ok?.status.agent.image).toEqual(expect.any(String));
    expect(condition(ok, 'NodeRunning')).toMatchObject({
      status: 'True',
      reason: 'Running',
      message: 'kube2 runs Kubernetes v1.34.0',
      observedGeneration: ok?.metadata.generation,
    });
    expect(condition(ok, 'LastOperation')).toMatchObject({ status: 'True', reason: 'Succeeded' });
    expect(condition(ok, 'LastOperation')?.message).toMatch(
      /^update op-\S+ succeeded at \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/,
    );
    expect(condition(ok, 'NodeUpdated')).toMatchObject({ status: 'True', reason: 'Succeeded' });

    const rb = await bad.machine();
    // Rolled back: kube1 runs still, the counter is not acknowledged.
    expect(rb?.status.operations?.repaveCounter ?? 0).toBe(0);
    expect(condition(rb, 'NodeRunning')).toMatchObject({
      status: 'True',
      message: 'kube1 runs Kubernetes v1.34.0',
    });
    expect(condition(rb, 'LastOperation')).toMatchObject({ status: 'False', reason: 'RolledBack' });
    expect(condition(rb, 'LastOperation')?.message).toMatch(/ rolled_back at .*: VERIFY_FAILED: /);
    expect(condition(rb, 'NodeUpdated')).toMatchObject({ status: 'False', reason: 'RolledBack' });
    // Every condition carries what both schemas require of it.
    for (const c of [...(ok?.status.conditions ?? []), ...(rb?.status.conditions ?? [])] as KubeJson[])
      expect(Object.keys(c).sort()).toEqual([
        'lastTransitionTime',
        'message',
        'observedGeneration',
        'reason',
        'status',
        'type',
      ]);

    if (tag !== 'deploy') return;
    const wide = await cp().kubectl(['get', 'machines', good.name, bad.name, '-o', 'wide']);
    expect(wide.code, wide.stderr).toBe(0);
    const [header, ...rows] = wide.stdout.trim().split('\n');
    expect(header?.split(/\s{2,}/)).toEqual([
      'NAME',
      'PHASE',
      'VERSION',
      'RUNNING',
      'UPDATED',
      'REPAVE',
      'ACKED',
      'IMAGE',
      'LAST-OPERATION',
      'AGE',
    ]);
    const row = (name: string): string => rows.find((r) => r.startsWith(`${name} `)) ?? '';
    expect(row(good.name)).toMatch(
      /\sJoining\s+v1\.34\.0\s+kube2 runs Kubernetes v1\.34\.0\s+Succeeded\s+1\s+1\s/,
    );
    expect(row(good.name)).toContain(ok?.status.agent.image as string);
    // No counter acknowledged (an empty ACKED column), then the image kube1 still runs.
    expect(row(bad.name)).toMatch(
      /\sFailed\s+v1\.34\.0\s+kube1 runs Kubernetes v1\.34\.0\s+RolledBack\s+1\s+\S/,
    );
    expect(row(bad.name)).toContain(rb?.status.agent.image as string);
    expect(row(bad.name)).toMatch(/update op-\S+ rolled_back at /);
  });
});
