// Why the fake API server (test/support/fake-kube): no fault: deploy/’s roles as the fake enforces them; test/cluster/control-plane.test.ts and rbac.test.ts apply deploy/ to kube-apiserver.
import { readFile } from 'node:fs/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { CoreV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import { parse } from 'yaml';
import { agentConfigSchema } from '../../../src/config/agent-config.js';
import { createNodeDrainer } from '../../../src/kube/drain.js';
import { createMachineApi } from '../../../src/kube/machine.js';
import { MACHINE_PHASES } from '../../../src/kube/schemas.js';
import { createMachineWatch } from '../../../src/kube/watch.js';
import { watchStream } from '../../../src/kube/watch-stream.js';
import { makeAgentConfig } from '../../support/agent-config.js';
import { createTestClock, startFakeKube } from '../../support/fake-kube.js';
import type { FakeKube } from '../../support/fake-kube.js';
import { rolesOfDeployRbac } from '../../support/rbac-rules.js';

const root = new URL('../../../deploy/', import.meta.url);

describe('deploy manifests', () => {
  let kube: FakeKube | undefined;
  afterEach(async () => {
    await kube?.close();
    kube = undefined;
  });

  it('defines the Machine CRD as docs/compatibility.md describes it', async () => {
    const crd = parse(await readFile(new URL('machine-crd.yaml', root), 'utf8')) as {
      metadata: { name: string };
      spec: {
        group: string;
        scope: string;
        names: { kind: string; plural: string; shortNames: string[] };
        versions: Array<{
          name: string;
          subresources: unknown;
          schema: { openAPIV3Schema: { properties: Record<string, unknown> } };
        }>;
      };
    };
    expect(crd.metadata.name).toBe('machines.unbounded-cloud.io');
    expect(crd.spec).toMatchObject({
      group: 'unbounded-cloud.io',
      scope: 'Cluster',
      names: { kind: 'Machine', plural: 'machines', shortNames: ['mach'] },
    });
    const [version] = crd.spec.versions;
    expect(version?.name).toBe('v1alpha3');
    expect(version?.subresources).toEqual({ status: {} });
    const status = version?.schema.openAPIV3Schema.properties.status as {
      properties: { phase: { enum: string[] } };
    };
    expect(status.properties.phase.enum).toEqual([...MACHINE_PHASES]);
  });

  it("grants a node's own identity exactly enough for registration, status writes, the watch and a drain", async () => {
    // deploy/rbac.yaml's roles bound to system:nodes, and the Node authorizer's part for its Node and pods.
    const role = await rolesOfDeployRbac({ group: 'system:nodes' });
    if (role === 'admin') throw new Error('deploy/rbac.yaml gave no rules');
    for (const rule of role.rules) expect(rule.apiGroups?.length).toBeGreaterThan(0);
    kube = await startFakeKube({ tokens: { agent: role } });
    const kc = kube.kubeConfig('agent');
    const clock = createTestClock();
    const machines = createMachineApi({ custom: kc.makeApiClient(CustomObjectsApi), clock });
    const drainer = createNodeDrainer({ core: kc.makeApiClient(CoreV1Api), clock });
    kube.addNode('worker-01');
    kube.addPod({ name: 'web-1', nodeName: 'worker-01' });

    const { machine } = await machines.ensureMachine(agentConfigSchema.parse(makeAgentConfig()));
    await machines.patchMachineStatus('worker-01', () => ({ phase: 'Joining' }));
    // The watch the watcher's reflector sends (src/kube/watch.ts), from the Machine's version.
    const watching = new AbortController();
    const target = createMachineWatch({ kc }).target('worker-01');
    const watched = watchStream(kc, target.transport, {
      path: target.path,
      query: {
        ...target.query,
        resourceVersion: machine.metadata.resourceVersion,
        allowWatchBookmarks: true,
      },
      signal: watching.signal,
      onEvent: () => undefined,
      onUndecodable: () => undefined,
    });
    await kube.whenWatching(1);
    watching.abort();
    await watched;
    const result = await drainer.drainNode('worker-01', { timeoutMs: 10_000 });
    expect(result.evicted).toEqual([{ namespace: 'default', name: 'web-1' }]);
    expect(await drainer.uncordon('worker-01')).toMatchObject({ uncordoned: true });
    expect(kube.requests.filter((r) => r.status === 403)).toEqual([]);
  });
});
