// Why the fake API server (test/support/fake-kube): policy watches cut at chosen moments (one that served, one ended at once).
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { CoordinationV1Api, CoreV1Api } from '@kubernetes/client-node';
import pino from 'pino';
import { createFleetObjects } from '../../../src/kube/fleet-objects.js';
import { createPolicyWatch, type PolicyWatch } from '../../../src/fleet/policy-watch.js';
import { createMetrics } from '../../../src/metrics/metrics.js';
import { startFakeKube, type FakeKube } from '../../support/fake-kube.js';
import { createManualClock, type ManualClock } from '../../support/manual-clock.js';

const NS = 'agentd-system';

describe('the fleet policy watch', () => {
  let kube: FakeKube;
  let watch: PolicyWatch;
  let clock: ManualClock;
  const metrics = createMetrics({ version: 't', collectDefaults: false });

  beforeEach(async () => {
    kube = await startFakeKube();
    const kc = kube.kubeConfig();
    const objects = createFleetObjects({
      kc,
      core: kc.makeApiClient(CoreV1Api),
      coordination: kc.makeApiClient(CoordinationV1Api),
      namespace: NS,
    });
    clock = createManualClock();
    watch = createPolicyWatch({
      objects,
      clock,
      logger: pino({ level: 'silent' }),
      metrics,
    });
  });
  afterEach(async () => {
    await watch.stop();
    await kube.close();
  });

  it('has no policy without the ConfigMap, and follows it as it comes, changes and goes', async () => {
    expect(watch.state().synced).toBe(false);
    watch.start();
    await vi.waitFor(() => expect(watch.state().synced).toBe(true));
    expect(watch.current()).toBeNull();
    await kube.whenWatching();
    kube.putConfigMap(NS, 'agentd-fleet', { 'policy.yaml': 'maxConcurrent: 3\npaused: true' });
    await vi.waitFor(() => expect(watch.current()?.maxConcurrent).toBe(3));
    expect(watch.current()?.paused).toBe(true);
    expect((await metrics.fleetPaused.get()).values[0]?.value).toBe(1);
    kube.deleteConfigMap(NS, 'agentd-fleet');
    await vi.waitFor(() => expect(watch.current()).toBeNull());
  });

  it('agentd_fleet_window_open follows the clock through the policy windows, and is 1 without a policy', async () => {
    // Read as a scrape reads it: the gauge is computed when collected.
    const windowOpen = async (): Promise<number | undefined> =>
      (await metrics.fleetWindowOpen.get()).values[0]?.value;
    expect(await windowOpen()).toBe(1);
    watch.start();
    await kube.whenWatching();
    // The clock starts on Wednesday 2026-11-25 at 12:00 UTC.
    kube.putConfigMap(NS, 'agentd-fleet', {
      'policy.yaml': 'windows: [{days: [Wed], start: "13:00", end: "14:00", timeZone: UTC}]',
    });
    await vi.waitFor(() => expect(watch.current()?.windows).toHaveLength(1));
    expect(await windowOpen()).toBe(0);
    // The window opens with time alone: no event, no update waiting in the gate.
    await clock.advance(90 * 60_000);
    expect(await windowOpen()).toBe(1);
    await clock.advance(60 * 60_000);
    expect(await windowOpen()).toBe(0);
    kube.deleteConfigMap(NS, 'agentd-fleet');
    await vi.waitFor(() => expect(watch.current()).toBeNull());
    expect(await windowOpen()).toBe(1);
  });

  it('watches again at once after a watch that served, and after the backoff when one is dropped at once', async () => {
    watch.start();
    await kube.whenWatching();
    const watches = (): number => kube.countRequests({ resource: 'configmaps', verb: 'watch' });
    // Open 30 s (the server's own timeout ends a watch after minutes): ended, watched again at once.
    await clock.advance(30_000);
    kube.cutWatches();
    await vi.waitFor(() => expect(watches()).toBe(2));
    await vi.waitFor(() => expect(kube.openWatches).toBe(1));
    // Dropped before it delivered anything (a proxy that drops watches): not at once.
    kube.cutWatches();
    await vi.waitFor(() => expect(clock.pending).toBe(1)); // the backoff's sleep
    expect(watches()).toBe(2);
    await clock.advance(1_000); // the first retry comes within 0.25–0.5 s
    await vi.waitFor(() => expect(watches()).toBe(3));
  });

  it('never half-applies a bad policy: it reports the field and keeps the last good one', async () => {
    kube.putConfigMap(NS, 'agentd-fleet', { 'policy.yaml': 'maxConcurrent: 2' });
    watch.start();
    await vi.waitFor(() => expect(watch.current()?.maxConcurrent).toBe(2));
    await kube.whenWatching();
    const errorsBefore = (await metrics.fleetPolicyErrors.get()).values[0]?.value ?? 0;
    kube.putConfigMap(NS, 'agentd-fleet', { 'policy.yaml': 'maxConcurrent: 5\nmaxFailures: 0' });
    await vi.waitFor(() => expect(watch.state().errorField).toBe('maxFailures'));
    expect(watch.current()?.maxConcurrent).toBe(2);
    expect(watch.state().error).toMatch(/maxFailures/);
    expect((await metrics.fleetPolicyErrors.get()).values[0]?.value).toBe(errorsBefore + 1);
    kube.putConfigMap(NS, 'agentd-fleet', { 'policy.yaml': 'maxConcurrent: 4' });
    await vi.waitFor(() => expect(watch.current()?.maxConcurrent).toBe(4));
    expect(watch.state().error).toBeNull();
  });

  it('holds the defaults while a present ConfigMap has never validated', async () => {
    kube.putConfigMap(NS, 'agentd-fleet', { other: 'x' });
    watch.start();
    await vi.waitFor(() => expect(watch.state().synced).toBe(true));
    expect(watch.state()).toMatchObject({ present: true, errorField: 'policy.yaml' });
    expect(watch.current()).toMatchObject({ maxConcurrent: 1, paused: false });
  });
});
