// Why the fake API server (test/support/fake-kube): no fault: the Machine watch’s request against any server; test/cluster/watcher.test.ts and reflector.test.ts watch kube-apiserver.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { AgentError } from '../../../src/errors.js';
import { createReflector, type Reflector } from '../../../src/kube/reflector.js';
import { machineSchema, parseKubeObject, type Machine } from '../../../src/kube/schemas.js';
import { createMachineWatch } from '../../../src/kube/watch.js';
import { createTestClock, startFakeKube, type FakeKube } from '../../support/fake-kube.js';

describe('createMachineWatch', () => {
  let kube: FakeKube;
  let reflector: Reflector | null = null;

  beforeEach(async () => {
    kube = await startFakeKube();
  });
  afterEach(async () => {
    await reflector?.stop();
    await kube.close();
  });

  /** A reflector on the Machine `name`'s watch target, from `resourceVersion` (no list request). */
  function follow(name: string, resourceVersion: string | undefined, token?: string, group?: string) {
    const target = createMachineWatch({ kc: kube.kubeConfig(token), group }).target(name);
    const events: string[] = [];
    const failures: AgentError[] = [];
    reflector = createReflector<Machine>({
      what: `Machine ${name}`,
      list: () => Promise.resolve({ items: [], resourceVersion, target }),
      decode: (o) => parseKubeObject(machineSchema, 'Machine', o),
      onList: () => undefined,
      onEvent: (type, m) => events.push(`${type} ${m.metadata.name} ${m.metadata.resourceVersion}`),
      onFailure: (err) => failures.push(err),
      clock: createTestClock(),
    });
    void reflector.start();
    return { events, failures };
  }

  it('watches only the named Machine, from the resourceVersion given, with parsed objects', async () => {
    kube.putMachine({ metadata: { name: 'w' } });
    const from = kube.resourceVersion;
    kube.putMachine({ metadata: { name: 'other' } });
    const changed = kube.putMachine({ metadata: { name: 'w', labels: { a: 'b' } } });
    const { events } = follow('w', from);
    await expect.poll(() => events).toEqual([`MODIFIED w ${changed.metadata.resourceVersion}`]);
    const watch = kube.requests.find((r) => r.verb === 'watch');
    expect(new URLSearchParams(watch?.query).get('fieldSelector')).toBe('metadata.name=w');
  });

  it('names a missing CRD and rejected credentials in its failures', async () => {
    kube.setCrdInstalled('unbounded-cloud.io', false);
    const missing = follow('w', undefined);
    await expect.poll(() => missing.failures[0]?.data.reason).toBe('CrdMissing');
    await reflector?.stop();
    const rejected = follow('w', undefined, 'bad-token', 'unbounded-kube.io');
    await expect.poll(() => rejected.failures[0]?.data.reason).toBe('Unauthorized');
  });
});
