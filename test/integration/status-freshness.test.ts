/**
 * What `status` and /metrics say of the node is at most 1 s old (docs/architecture.md, "The status
 * path"), through the real daemon on the simulated host with repair off, so nothing but the calls
 * themselves reads the node: a machine that crashes behind agentd's back shows in the first scrape
 * and the first `status` more than 1 s later, with `observedAt` after the crash.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { createSimHost } from '../../src/sim/host/index.js';
import { makeTempDir, type TestDaemon } from '../support/daemon.js';
import { metricValue, rpcResult, startSimDaemon, updateAndWait } from '../support/provision-fixtures.js';

interface Status {
  node: {
    serving: boolean;
    observedAt: string | null;
    machines: Array<{ name: string; state: string; kubelet: string }>;
  };
}

/** A little more than the age past which agentd reads the node again (1 s). */
const PAST_THE_AGE_MS = 1200;

describe('status and /metrics read an old node again', () => {
  let d: TestDaemon | undefined;
  afterEach(async () => {
    await d?.dispose();
    d = undefined;
  });

  it('a machine that crashed behind agentd’s back shows in the next scrape and status', async () => {
    d = await startSimDaemon({ dir: await makeTempDir('agentd-fresh-'), args: ['--no-repair'] });
    expect((await updateAndWait(d)).state).toBe('succeeded');
    // Past the age, this status reads the node and answers once that read has ended: no read
    // that started before the crash is left to see it.
    await sleep(PAST_THE_AGE_MS);
    const before = await rpcResult<Status>(d, 'status');
    expect(before.node.serving).toBe(true);
    expect(await metricValue(d, 'agentd_node_serving')).toBe(1);

    const crashedAt = Date.now();
    await createSimHost({ root: d.root }).crashMachine('kube1');
    await sleep(PAST_THE_AGE_MS);
    // The scrape reads the node first (nothing else does: repair is off)...
    expect(await metricValue(d, 'agentd_node_serving')).toBe(0);
    expect(1000 * (await metricValue(d, 'agentd_node_observed_timestamp_seconds'))).toBeGreaterThanOrEqual(
      crashedAt,
    );
    // ...and so does status, past the age again: one call, no polling.
    await sleep(PAST_THE_AGE_MS);
    const after = await rpcResult<Status>(d, 'status');
    expect(after.node.serving).toBe(false);
    expect(after.node.machines.find((m) => m.name === 'kube1')).toMatchObject({ state: 'stopped' });
    expect(Date.parse(after.node.observedAt ?? '')).toBeGreaterThanOrEqual(crashedAt);
  });
});
