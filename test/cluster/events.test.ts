/**
 * Kubernetes Events (docs/watcher.md, "Events") on the real API server: a `--sim` node joined to
 * the control plane with deploy/'s RBAC (a bootstrap token) records events.k8s.io/v1 Events about
 * its Machine and its Node for an update and a rollback; a repeated rollback raises the series
 * count of the one Event instead of adding an object; and an API server that refuses, or never
 * answers, fails no update and holds none up.
 */
import net from 'node:net';
import { describe, expect, it, onTestFinished } from 'vitest';
import { waitUntil } from '../support/daemon.js';
import { machinePath, startClusterAgent, type ClusterAgent } from '../support/control-plane/agent.js';
import { controlPlaneAvailable, type KubeJson } from '../support/control-plane/index.js';
import { useControlPlane } from '../support/control-plane/use.js';
import { metricValue, rpcResult } from '../support/provision-fixtures.js';

const EVENTS = '/apis/events.k8s.io/v1/namespaces/default/events';

describe.skipIf(!controlPlaneAvailable())('Kubernetes Events against kube-apiserver', () => {
  const cp = useControlPlane();
  let n = 0;

  /** agentd's Events about `kind` `name`, oldest first. */
  async function eventsAbout(kind: string, name: string): Promise<KubeJson[]> {
    const list = await cp().api.get(EVENTS);
    return (list.items as KubeJson[])
      .filter(
        (e) => e.reportingController === 'agentd' && e.regarding?.kind === kind && e.regarding?.name === name,
      )
      .sort((a, b) => String(a.eventTime).localeCompare(String(b.eventTime)));
  }
  const reasons = (events: KubeJson[]): string[] => events.map((e) => e.reason as string);
  const repave = (name: string, counter: number): Promise<KubeJson> =>
    cp().api.mergePatch(machinePath(name), { spec: { operations: { repaveCounter: counter } } });
  async function registered(a: ClusterAgent): Promise<KubeJson> {
    await waitUntil('the Machine to be registered', async () => (await a.machine()) !== null, a.d);
    return (await a.machine()) as KubeJson;
  }

  it('records an update on the Machine and on the Node: started, switched, verified, succeeded', async () => {
    const a = await startClusterAgent(cp(), { name: `events-${++n}` });
    const machine = await registered(a);
    await repave(a.name, 1);
    await waitUntil(
      'the update’s Events',
      async () => reasons(await eventsAbout('Machine', a.name)).includes('UpdateSucceeded'),
      a.d,
    );
    const onMachine = await eventsAbout('Machine', a.name);
    expect(reasons(onMachine)).toEqual(
      expect.arrayContaining(['UpdateStarted', 'Switched', 'Verified', 'UpdateSucceeded']),
    );
    const succeeded = onMachine.find((e) => e.reason === 'UpdateSucceeded');
    expect(succeeded).toMatchObject({
      type: 'Normal',
      action: 'Update',
      reportingController: 'agentd',
      reportingInstance: a.name,
      note: 'update succeeded: kube1 → kube2',
      regarding: {
        apiVersion: 'unbounded-cloud.io/v1alpha3',
        kind: 'Machine',
        name: a.name,
        uid: machine.metadata.uid,
      },
    });
    expect(succeeded?.eventTime).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);
    await waitUntil(
      'the same Events on the Node',
      async () => reasons(await eventsAbout('Node', a.name)).includes('UpdateSucceeded'),
      a.d,
    );
    expect(reasons(await eventsAbout('Node', a.name))).toEqual(
      expect.arrayContaining(['UpdateStarted', 'Switched', 'Verified', 'UpdateSucceeded']),
    );
    expect(await metricValue(a.d, 'agentd_kube_events_total{result="failed"}')).toBe(0);
  });

  it('records a rollback with its reason, and a second one as a repeat: one Event, series count 2', async () => {
    const a = await startClusterAgent(cp(), {
      name: `events-${++n}`,
      // A kubelet that never becomes active in kube2: verify fails and the node rolls back (in
      // the standby order, the default, a target that cannot boot fails before any switch).
      env: { AGENTD_SIM_FAULTS: 'kubelet-inactive:kube2' },
    });
    await registered(a);
    await repave(a.name, 1);
    await waitUntil(
      'the rollback’s Event',
      async () => reasons(await eventsAbout('Machine', a.name)).includes('RolledBack'),
      a.d,
    );
    const [rolledBack, ...others] = (await eventsAbout('Machine', a.name)).filter(
      (e) => e.reason === 'RolledBack',
    );
    expect(others).toEqual([]);
    expect(rolledBack).toMatchObject({ type: 'Warning', action: 'Update' });
    expect(rolledBack?.note).toMatch(/^update rolled back to kube1 \(VERIFY_FAILED\): /);
    expect(rolledBack?.series).toBeUndefined();
    const objects = (await eventsAbout('Machine', a.name)).length;

    // The Machine asks anew (a new counter): the same target rolls back the same way.
    await repave(a.name, 2);
    await waitUntil(
      'the repeat to raise the series count',
      async () =>
        (await eventsAbout('Machine', a.name)).find((e) => e.reason === 'RolledBack')?.series?.count === 2,
      a.d,
    );
    const after = await eventsAbout('Machine', a.name);
    const again = after.filter((e) => e.reason === 'RolledBack');
    expect(again.map((e) => e.metadata.name)).toEqual([rolledBack?.metadata.name]);
    expect(Date.parse(again[0]?.series.lastObservedTime as string)).toBeGreaterThan(
      Date.parse(rolledBack?.eventTime as string),
    );
    // A repeat adds no object: what was added is the second update's own start (a new note).
    expect(after.length - objects).toBeLessThanOrEqual(1);
    expect(await metricValue(a.d, 'agentd_kube_events_total{result="series_updated"}')).toBeGreaterThan(0);
    await waitUntil(
      'the rollback on the Node',
      async () => reasons(await eventsAbout('Node', a.name)).includes('RolledBack'),
      a.d,
    );
  });

  it('an API server that refuses every connection fails no update: the Event writes are counted as failed', async () => {
    // A port nothing listens on: every request is refused.
    const closed = net.createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as net.AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const a = await startClusterAgent(cp(), {
      name: `events-${++n}`,
      server: `https://127.0.0.1:${port}`,
      args: ['--no-fleet'],
      waitConnected: false,
    });
    const op = await rpcResult<{ state: string }>(a.d, 'update', { force: true, wait: true });
    expect(op.state).toBe('succeeded');
    await waitUntil(
      'the Event writes to fail',
      async () => (await metricValue(a.d, 'agentd_kube_events_total{result="failed"}')) > 0,
      a.d,
    );
    expect(await metricValue(a.d, 'agentd_kube_events_total{result="created"}')).toBe(0);
  });

  it('an API server that never answers holds no update up: it ends while every Event write is still unanswered', async () => {
    // Accepts connections and never answers a byte: every request hangs.
    const held: net.Socket[] = [];
    let received = 0;
    const silent = net.createServer((s) => {
      held.push(s);
      s.on('data', (b) => (received += b.length));
      s.on('error', () => undefined);
    });
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    onTestFinished(async () => {
      for (const s of held) s.destroy();
      await new Promise<void>((resolve) => silent.close(() => resolve()));
    });
    const a = await startClusterAgent(cp(), {
      name: `events-${++n}`,
      server: `https://127.0.0.1:${(silent.address() as net.AddressInfo).port}`,
      args: ['--no-fleet'],
      waitConnected: false,
    });
    const op = await rpcResult<{ state: string }>(a.d, 'update', { force: true, wait: true });
    expect(op.state).toBe('succeeded');
    // The update's Events wait to be written (one write hangs, the rest queue behind it), and not
    // one Event write has ended: the update did not wait for them.
    expect(held.length).toBeGreaterThan(0);
    expect(received).toBeGreaterThan(0);
    expect(await metricValue(a.d, 'agentd_kube_events_pending')).toBeGreaterThan(1);
    for (const result of ['created', 'series_updated', 'failed'])
      expect(await metricValue(a.d, `agentd_kube_events_total{result="${result}"}`)).toBe(0);
  });
});
