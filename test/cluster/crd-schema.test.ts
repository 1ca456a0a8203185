/**
 * The Machine CRD's structural schema, the real one (docs/compatibility.md): nothing agentd
 * writes into a Machine is pruned, defaulted away or refused, with deploy/machine-crd.yaml and
 * with upstream's schema. kube-apiserver's audit log holds each of agentd's writes as sent and
 * the object the server kept after it; every field agentd sent must be in the kept object, as
 * sent.
 */
import { describe, expect, it } from 'vitest';
import { waitUntil } from '../support/daemon.js';
import { machinePath, startClusterAgent } from '../support/control-plane/agent.js';
import { auditEvents, bootstrapUser } from '../support/control-plane/audit.js';
import {
  controlPlaneAvailable,
  DEPLOY_DIR,
  UPSTREAM_CRD,
  type KubeJson,
} from '../support/control-plane/index.js';
import { useControlPlane } from '../support/control-plane/use.js';
import { rpcResult } from '../support/provision-fixtures.js';
import path from 'node:path';

/**
 * Where `sent` (a merge patch, or a created object) is not in what `kept` holds, as
 * `path: sent …, kept …`. A list is kept whole (a merge patch replaces it): same length, each
 * item kept. Fields the server added (defaults) are no loss.
 */
function notKept(sent: unknown, kept: unknown, at = ''): string[] {
  const differs = (): string[] => [`${at}: sent ${JSON.stringify(sent)}, kept ${JSON.stringify(kept)}`];
  if (sent === null) return kept === undefined || kept === null ? [] : differs();
  if (Array.isArray(sent)) {
    if (!Array.isArray(kept) || kept.length !== sent.length) return differs();
    return sent.flatMap((v, i) => notKept(v, kept[i], `${at}[${i}]`));
  }
  if (typeof sent === 'object') {
    if (typeof kept !== 'object' || kept === null) return differs();
    const k = kept as Record<string, unknown>;
    return Object.entries(sent as Record<string, unknown>).flatMap(([key, v]) =>
      notKept(v, k[key], `${at}.${key}`),
    );
  }
  return sent === kept ? [] : differs();
}

const SCHEMAS = [
  ['deploy/machine-crd.yaml', path.join(DEPLOY_DIR, 'machine-crd.yaml')],
  ["upstream's schema", UPSTREAM_CRD],
] as const;

describe.skipIf(!controlPlaneAvailable())('the Machine CRD schema keeps what agentd writes', () => {
  const cp = useControlPlane({ apiServer: { audit: true } });

  it.each(SCHEMAS)('with %s: registration, a repave, a failed update', async (_label, file) => {
    await cp().installCrd(file);
    const name = `schema-${path.basename(file, '.yaml')}`;
    const a = await startClusterAgent(cp(), { name });
    await waitUntil('the Machine to be registered', async () => (await a.machine()) !== null, a.d);
    await cp().api.mergePatch(machinePath(name), { spec: { operations: { repaveCounter: 1 } } });
    await waitUntil(
      'the repave to be acknowledged',
      async () => (await a.machine())?.status?.operations?.repaveCounter === 1,
      a.d,
    );
    // A version agentd refuses: the update fails, and the Machine is told why.
    await cp().api.mergePatch(machinePath(name), { spec: { kubernetes: { version: 'not-a-version' } } });
    await waitUntil(
      'the failure to be written',
      async () => (await a.machine())?.status?.phase === 'Failed',
      a.d,
    );

    const writes = (await auditEvents(cp(), bootstrapUser(cp()))).filter(
      (e) =>
        e.objectRef?.resource === 'machines' &&
        e.objectRef?.name === name &&
        ['create', 'update', 'patch'].includes(e.verb as string),
    );
    const refused = writes.filter((e) => ![200, 201, 409].includes(e.responseStatus?.code as number));
    expect(
      refused.map(
        (e) =>
          `${e.verb} ${e.objectRef.subresource ?? ''}: ${e.responseStatus.code} ${e.responseStatus.message}`,
      ),
    ).toEqual([]);
    const kept = writes.filter((e) => [200, 201].includes(e.responseStatus?.code as number));
    // The create, Provisioning, Joining (+ the acknowledgement), Provisioning, Failed at least.
    expect(kept.length).toBeGreaterThanOrEqual(5);
    for (const e of kept) {
      const sent = e.requestObject as KubeJson;
      const after = e.responseObject as KubeJson;
      const what = e.objectRef.subresource === 'status' ? { status: sent.status } : { spec: sent.spec };
      expect(
        notKept(what, after),
        `${e.verb} ${e.objectRef.subresource ?? ''} ${JSON.stringify(sent)}`,
      ).toEqual([]);
    }
    const m = (await a.machine()) as KubeJson;
    expect(m.status).toMatchObject({
      phase: 'Failed',
      operations: { repaveCounter: 1 },
      agent: { image: expect.any(String) },
    });
    expect(m.status.message).toMatch(/^agentd: /);
    const condition = (m.status.conditions as KubeJson[]).find((c) => c.type === 'NodeUpdated');
    expect(condition).toMatchObject({
      status: 'False',
      reason: 'Failed',
      observedGeneration: m.metadata.generation,
    });
    expect(condition?.lastTransitionTime).toEqual(expect.any(String));
    await a.d.stop();
    await cp().api.request('DELETE', machinePath(name));
  });

  it('waits for a CRD installed after it started, then registers', async () => {
    await cp().kubectl(['delete', 'crd', 'machines.unbounded-cloud.io', '--wait=true']);
    const name = 'schema-late-crd';
    const a = await startClusterAgent(cp(), { name, waitConnected: false });
    await waitUntil(
      'the watcher to say the CRD is missing',
      async () =>
        /CRD machines\.unbounded-cloud\.io is not installed/.test(
          String((await rpcResult<{ watcher: KubeJson }>(a.d, 'status')).watcher.lastError),
        ),
      a.d,
    );
    // As docs/watcher.md's table says to: apply the CRD. The watcher's backoff finds it.
    await cp().installCrd(path.join(DEPLOY_DIR, 'machine-crd.yaml'));
    await waitUntil('the Machine registered', async () => (await a.machine()) !== null, a.d);
    await waitUntil(
      'the watcher connected',
      async () => (await rpcResult<{ watcher: KubeJson }>(a.d, 'status')).watcher.connected === true,
      a.d,
    );
  });
});
