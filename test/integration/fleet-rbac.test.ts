// Why the fake API server (test/support/fake-kube): no fault: deploy/rbac.yaml’s roles as the fake enforces them; test/cluster/rbac.test.ts does it with kube-apiserver’s RBAC.
/**
 * deploy/rbac.yaml is enough for the fleet gate and no more: the fake API server enforces the
 * manifests' roles bound to the nodes' tokens, agentd's fleet paths (policy watch, slots,
 * failures, status) run with them without a 403, pause and resume are refused to them (an
 * operator's right, which an operator's roles have), and verbs the gate does not need are
 * refused with 403.
 */
import { CoordinationV1Api, CoreV1Api } from '@kubernetes/client-node';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import pino from 'pino';
import { createFleetRuntime, type FleetRuntime } from '../../src/fleet/index.js';
import { systemClock } from '../../src/host/clock.js';
import { createMetrics } from '../../src/metrics/metrics.js';
import { startFakeKube, type FakeKube } from '../support/fake-kube.js';
import { MAX_SLOTS } from '../../src/fleet/policy.js';
import { rolesOfDeployRbac } from '../support/rbac-rules.js';

const NS = 'agentd-system';
const TOKEN = 'abcdef.0123456789abcdef';
const OPERATOR = 'operator-token';

async function statusOf(p: Promise<unknown>): Promise<number> {
  try {
    await p;
    return 200;
  } catch (err) {
    return (err as { code?: number }).code ?? -1;
  }
}

describe('the fleet gate under deploy/rbac.yaml', () => {
  let kube: FakeKube;
  let fleet: FleetRuntime;
  let core: CoreV1Api;
  let coordination: CoordinationV1Api;

  const runtime = (node: string, random?: () => number, token = TOKEN): FleetRuntime => {
    const kc = kube.kubeConfig(token);
    const rt = createFleetRuntime({
      clients: { kc, core: kc.makeApiClient(CoreV1Api), coordination: kc.makeApiClient(CoordinationV1Api) },
      namespace: NS,
      node,
      clock: systemClock,
      logger: pino({ level: 'silent' }),
      metrics: createMetrics({ version: 't', collectDefaults: false }),
      timing: {
        leaseDurationSeconds: 1,
        renewIntervalMs: 100,
        recheckIntervalMs: 100,
        wakeJitterMs: 10,
        ...(random ? { random } : {}),
      },
    });
    runtimes.push(rt);
    return rt;
  };
  const runtimes: FleetRuntime[] = [];

  /** `rt` asks for a slot; `reasons` collects why it waits, in order. */
  const acquireRecordingWaits = (rt: FleetRuntime, operationId: string, signal: AbortSignal) => {
    const reasons: string[] = [];
    const held = rt.gate.acquire({ signal, operationId, onWait: (w) => w && reasons.push(w.reason) });
    return { held, reasons };
  };

  beforeEach(async () => {
    kube = await startFakeKube({
      tokens: {
        [TOKEN]: await rolesOfDeployRbac(),
        [OPERATOR]: await rolesOfDeployRbac({ group: 'agentd:fleet-operators', user: 'alice' }),
      },
    });
    const kc = kube.kubeConfig(TOKEN);
    core = kc.makeApiClient(CoreV1Api);
    coordination = kc.makeApiClient(CoordinationV1Api);
    fleet = runtime('worker-01');
  });
  afterEach(async () => {
    await Promise.all(runtimes.splice(0).map((rt) => rt.stop()));
    await kube.close();
  });

  it('runs every fleet path with the rights of the manifests; pause and resume only as an operator', async () => {
    fleet.start();
    await expect.poll(() => fleet.policy.state().synced).toBe(true);
    expect(fleet.policy.state().error).toBeNull();
    await kube.whenWatching();
    kube.putConfigMap(NS, 'agentd-fleet', { 'policy.yaml': 'maxConcurrent: 2\nmaxFailures: 5' });
    await expect.poll(() => fleet.policy.current()?.maxConcurrent).toBe(2);

    const signal = AbortSignal.timeout(10_000);
    const first = await fleet.gate.acquire({ signal, operationId: 'o1', onWait: () => {} });
    const other = runtime('worker-02');
    const third = runtime('worker-03');
    for (const rt of [other, third]) rt.start();
    await expect.poll(() => [other, third].map((rt) => rt.policy.current()?.maxConcurrent)).toEqual([2, 2]);
    const taken = await other.gate.acquire({ signal, operationId: 'o0', onWait: () => {} });
    // A third node waits for a slot (it watches the slot Leases) until the first is released.
    const waiting = acquireRecordingWaits(third, 'o3', signal);
    await expect.poll(() => waiting.reasons).toEqual(['WaitingForSlot']);
    await new Promise((r) => setTimeout(r, 250)); // a renewal or two
    await first?.release({ state: 'rolled_back', operationId: 'o1', message: 'VERIFY_FAILED' });
    await (await waiting.held)?.release({ state: 'succeeded', operationId: 'o3', message: null });
    await taken?.release({ state: 'succeeded', operationId: 'o0', message: null });
    const second = await fleet.gate.acquire({ signal, operationId: 'o2', onWait: () => {} });
    await second?.release({ state: 'failed', operationId: 'o2', message: 'x' });

    // Two failures reach maxFailures 2: a waiter is halted and watches the recorded failures.
    kube.putConfigMap(NS, 'agentd-fleet', { 'policy.yaml': 'maxConcurrent: 2\nmaxFailures: 2' });
    await expect.poll(() => third.policy.current()?.maxFailures).toBe(2);
    const halted = acquireRecordingWaits(third, 'o4', signal);
    await expect.poll(() => halted.reasons).toEqual(['Halted']);

    const status = await fleet.control.status();
    expect(status.errors).toEqual([]);
    expect(status.failures).toHaveLength(2);
    // Pausing and resuming are an operator's right: a node's token is refused, and told so.
    await expect(fleet.control.pause()).rejects.toMatchObject({
      code: 'PRECONDITION_FAILED',
      data: { reason: 'OperatorRight', configMap: `${NS}/agentd-fleet` },
      message: expect.stringMatching(
        /^pausing and resuming the fleet is an operator right: this node's credentials may not update ConfigMap agentd-system\/agentd-fleet \(.*forbidden.*\); as an operator, run agentctl fleet pause or resume with your own kubeconfig .*, or edit it with kubectl/,
      ),
    });
    const operator = runtime('operator', undefined, OPERATOR);
    expect((await operator.control.pause()).paused).toBe(true);
    expect((await operator.control.resume()).clearedFailures).toBe(2);
    // The resume lets the halted waiter go on.
    await (await halted.held)?.release({ state: 'succeeded', operationId: 'o4', message: null });

    const denied = kube.requests.filter((r) => r.status === 403);
    expect(denied.map((r) => `${r.verb} ${r.resource} ${r.name ?? ''}`)).toEqual([
      'update configmaps agentd-fleet',
    ]);
    // Each kind of request was made under the restricted token.
    for (const [resource, verb] of [
      ['configmaps', 'list'],
      ['configmaps', 'watch'],
      ['configmaps', 'get'],
      ['configmaps', 'create'],
      ['configmaps', 'update'],
      ['leases', 'list'],
      ['leases', 'watch'],
      ['leases', 'update'],
    ] as const) {
      expect(kube.countRequests({ resource, verb }), `${verb} ${resource}`).toBeGreaterThan(0);
    }
  });

  it('grants every slot a valid maxConcurrent names: the highest, agentd-slot-99, is taken without a 403', async () => {
    // The Role names exactly the slots the policy schema allows.
    const role = (await rolesOfDeployRbac()) as {
      rules: Array<{ resources: string[]; resourceNames?: string[] }>;
    };
    const named = role.rules.find((r) => r.resources.includes('leases') && r.resourceNames)?.resourceNames;
    expect(named).toEqual(Array.from({ length: MAX_SLOTS }, (_, i) => `agentd-slot-${i}`));

    // The first slot tried is random: this one starts at the last.
    const top = runtime('worker-99', () => 0.999);
    top.start();
    kube.putConfigMap(NS, 'agentd-fleet', { 'policy.yaml': `maxConcurrent: ${MAX_SLOTS}` });
    await expect.poll(() => top.policy.current()?.maxConcurrent).toBe(MAX_SLOTS);
    const held = await top.gate.acquire({
      signal: AbortSignal.timeout(10_000),
      operationId: 'o',
      onWait: () => {},
    });
    expect(held?.name).toBe(`agentd-slot-${MAX_SLOTS - 1}`);
    await new Promise((r) => setTimeout(r, 250)); // a renewal or two
    await held?.release({ state: 'succeeded', operationId: 'o', message: null });
    expect(kube.getLease(NS, `agentd-slot-${MAX_SLOTS - 1}`)?.spec?.holderIdentity).toBe('');
    expect(kube.requests.filter((r) => r.status === 403)).toEqual([]);
    expect(kube.countRequests({ resource: 'leases', verb: 'update' })).toBeGreaterThanOrEqual(2);
  });

  it('refuses what the gate does not need with 403', async () => {
    kube.putConfigMap(NS, 'other', { a: 'b' });
    kube.putConfigMap('default', 'agentd-fleet', { 'policy.yaml': '{}' });
    const spec = { holderIdentity: 'x', leaseDurationSeconds: 60 };
    const lease = (name: string) => ({ metadata: { name, namespace: NS }, spec });
    expect(
      await statusOf(coordination.createNamespacedLease({ namespace: NS, body: lease('agentd-slot-0') })),
    ).toBe(200);
    expect(await statusOf(coordination.deleteNamespacedLease({ name: 'agentd-slot-0', namespace: NS }))).toBe(
      403,
    );
    expect(await statusOf(coordination.readNamespacedLease({ name: 'agentd-slot-100', namespace: NS }))).toBe(
      403,
    );
    expect(await statusOf(coordination.readNamespacedLease({ name: 'kube-scheduler', namespace: NS }))).toBe(
      403,
    );
    expect(await statusOf(coordination.listNamespacedLease({ namespace: 'kube-node-lease' }))).toBe(403);
    expect(await statusOf(core.readNamespacedConfigMap({ name: 'other', namespace: NS }))).toBe(403);
    expect(await statusOf(core.listNamespacedConfigMap({ namespace: NS }))).toBe(403);
    expect(await statusOf(core.readNamespacedConfigMap({ name: 'agentd-fleet', namespace: 'default' }))).toBe(
      403,
    );
    expect(await statusOf(core.deleteNamespacedConfigMap({ name: 'agentd-fleet', namespace: NS }))).toBe(403);
    expect(
      await statusOf(
        core.patchNamespacedConfigMap({ name: 'agentd-fleet-state', namespace: NS, body: { data: {} } }),
      ),
    ).toBe(403);
  });
});
