// Why the fake API server (test/support/fake-kube): another status writer between the read and the patch, a 500, rejected credentials and a missing CRD, at chosen moments.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { CustomObjectsApi } from '@kubernetes/client-node';
import { agentConfigSchema } from '../../../src/config/agent-config.js';
import { buildMachineForConfig, createMachineApi } from '../../../src/kube/machine.js';
import type { MachineApi } from '../../../src/kube/machine.js';
import { makeAgentConfig } from '../../support/agent-config.js';
import { createTestClock, startFakeKube } from '../../support/fake-kube.js';
import type { FakeKube, TestClock } from '../../support/fake-kube.js';
import { expectBackoff } from '../../support/backoff.js';

const config = agentConfigSchema.parse(
  makeAgentConfig({
    Kubelet: {
      ApiServer: 'https://10.0.0.1:6443',
      Auth: { BootstrapToken: 'abc123.0123456789abcdef' },
      Labels: { 'unbounded-cloud.io/site': 'test' },
      RegisterWithTaints: ['dedicated=gpu:NoSchedule'],
    },
  }),
);

const statusPatches = { verb: 'patch', resource: 'machines/status' };

describe('Machine API', () => {
  let kube: FakeKube;
  let clock: TestClock;
  let api: MachineApi;

  function makeApi(token?: string, group?: string): MachineApi {
    return createMachineApi({
      custom: kube.kubeConfig(token).makeApiClient(CustomObjectsApi),
      clock,
      group,
      conflictRetry: { attempts: 3, baseDelayMs: 100, maxDelayMs: 150 },
    });
  }

  beforeEach(async () => {
    kube = await startFakeKube();
    clock = createTestClock();
    api = makeApi();
  });
  afterEach(async () => {
    await kube.close();
  });

  describe('getMachine', () => {
    it('returns the parsed Machine with counters defaulted, or null when it does not exist', async () => {
      kube.putMachine({
        metadata: { name: 'worker-01' },
        spec: { agent: { image: 'img:1' }, ssh: { keys: ['k'] } },
      });
      const machine = await api.getMachine('worker-01');
      expect(machine?.spec.operations).toEqual({ repaveCounter: 0, rebootCounter: 0 });
      expect(machine?.spec.agent?.image).toBe('img:1');
      expect(machine?.spec.ssh).toEqual({ keys: ['k'] });
      expect(machine?.metadata.generation).toBe(1);
      expect(await api.getMachine('nope')).toBeNull();
    });

    it('names the object and field of a Machine that does not fit the schema', async () => {
      kube.putMachine({ metadata: { name: 'w' }, spec: { agent: { image: 42 } } });
      const err = await api.getMachine('w').catch((e: unknown) => e);
      expect(err).toMatchObject({ code: 'INVALID_CONFIG', data: { kind: 'Machine', name: 'w' } });
      expect((err as Error).message).toContain('spec.agent.image');
    });

    it('reports a missing CRD as KUBE_UNAVAILABLE with reason CrdMissing', async () => {
      kube.setCrdInstalled('unbounded-cloud.io', false);
      await expect(api.getMachine('w')).rejects.toMatchObject({
        code: 'KUBE_UNAVAILABLE',
        data: { reason: 'CrdMissing', group: 'unbounded-cloud.io' },
      });
      // The older group is still served and usable through the option.
      kube.putMachine({ metadata: { name: 'w' } }, 'unbounded-kube.io');
      expect(await makeApi(undefined, 'unbounded-kube.io').getMachine('w')).not.toBeNull();
    });

    it('reports rejected credentials, missing RBAC and server errors as KUBE_UNAVAILABLE', async () => {
      await expect(makeApi('wrong-token').getMachine('w')).rejects.toMatchObject({
        code: 'KUBE_UNAVAILABLE',
        data: { reason: 'Unauthorized', status: 401 },
      });
      kube.setToken('no-rights', { rules: [] });
      const forbidden = await makeApi('no-rights')
        .getMachine('w')
        .catch((e: unknown) => e);
      expect(forbidden).toMatchObject({
        code: 'KUBE_UNAVAILABLE',
        data: { reason: 'Forbidden', status: 403 },
      });
      expect((forbidden as Error).message).toContain('cannot get resource "machines"');
      kube.failNext(1, { status: 503 });
      await expect(api.getMachine('w')).rejects.toMatchObject({
        code: 'KUBE_UNAVAILABLE',
        data: { status: 503 },
      });
    });

    it('reports an unreachable server as KUBE_UNAVAILABLE', async () => {
      const custom = kube.kubeConfig().makeApiClient(CustomObjectsApi);
      await kube.close();
      kube = await startFakeKube();
      await expect(createMachineApi({ custom }).getMachine('w')).rejects.toMatchObject({
        code: 'KUBE_UNAVAILABLE',
        data: { reason: 'Unreachable' },
      });
    });
  });

  describe('self-registration', () => {
    it('creates the Machine from the applied config', async () => {
      const machine = await api.createMachine(config);
      expect(kube.countRequests({ verb: 'create', resource: 'machines' })).toBe(1);
      expect(kube.requests.find((r) => r.verb === 'create')?.body).toEqual({
        apiVersion: 'unbounded-cloud.io/v1alpha3',
        kind: 'Machine',
        metadata: { name: 'worker-01' },
        spec: {
          kubernetes: {
            version: 'v1.34.0',
            bootstrapTokenRef: { name: 'bootstrap-token-abc123' },
            nodeLabels: { 'unbounded-cloud.io/site': 'test' },
            registerWithTaints: ['dedicated=gpu:NoSchedule'],
          },
        },
      });
      expect(machine.metadata.uid).toBe(kube.getMachine('worker-01')?.metadata.uid);
    });

    it('omits empty labels and taints, and refuses an exec-credential config', () => {
      const plain = agentConfigSchema.parse(
        makeAgentConfig({ Kubelet: { ...makeAgentConfig().Kubelet, Labels: {} } }),
      );
      expect(buildMachineForConfig(plain).spec).toEqual({
        kubernetes: { version: 'v1.34.0', bootstrapTokenRef: { name: 'bootstrap-token-abc123' } },
      });
      const exec = agentConfigSchema.parse(
        makeAgentConfig({
          Kubelet: { ...makeAgentConfig().Kubelet, Auth: { ExecCredential: { command: '/bin/cred' } } },
        }),
      );
      expect(() => buildMachineForConfig(exec)).toThrow(
        expect.objectContaining({ code: 'PRECONDITION_FAILED' }),
      );
    });

    it('ensureMachine creates only when missing, and tolerates a concurrent create', async () => {
      kube.putMachine({ metadata: { name: 'worker-01' }, spec: { agent: { image: 'x' } } });
      expect(await api.ensureMachine(config)).toMatchObject({
        created: false,
        machine: { spec: { agent: { image: 'x' } } },
      });
      expect(kube.countRequests({ verb: 'create' })).toBe(0);

      kube.deleteMachine('worker-01');
      expect((await api.ensureMachine(config)).created).toBe(true);

      kube.deleteMachine('worker-01');
      kube.beforeNext({ verb: 'create', resource: 'machines' }, () => {
        kube.putMachine({ metadata: { name: 'worker-01' }, spec: { agent: { image: 'theirs' } } });
      });
      expect(await api.ensureMachine(config)).toMatchObject({
        created: false,
        machine: { spec: { agent: { image: 'theirs' } } },
      });
    });
  });

  describe('patchMachineStatus', () => {
    beforeEach(() => {
      kube.putMachine({
        metadata: { name: 'w' },
        spec: { operations: { repaveCounter: 2 } },
        status: {
          phase: 'Pending',
          message: 'from machina',
          operations: { repaveCounter: 1, rebootCounter: 4 },
          conditions: [{ type: 'Reachable', status: 'True', reason: 'Ping' }],
        },
      });
    });

    it('merge-patches only agentd fields on the status subresource, in one request', async () => {
      const updated = await api.patchMachineStatus('w', (fresh) => ({
        phase: 'Joining',
        repaveCounter: fresh.spec.operations.repaveCounter,
        agentImage: 'img:2',
        nodeUpdated: { status: 'True', reason: 'Succeeded' },
      }));
      expect(kube.countRequests(statusPatches)).toBe(1);
      const request = kube.requests.find((r) => r.verb === 'patch');
      expect(request?.contentType).toBe('application/merge-patch+json');
      expect(request?.path).toBe('/apis/unbounded-cloud.io/v1alpha3/machines/w/status');
      expect(updated.status).toEqual({
        phase: 'Joining',
        message: 'from machina',
        agent: { image: 'img:2' },
        operations: { repaveCounter: 2, rebootCounter: 4 },
        conditions: [
          { type: 'Reachable', status: 'True', reason: 'Ping' },
          {
            type: 'NodeUpdated',
            status: 'True',
            reason: 'Succeeded',
            message: '',
            lastTransitionTime: '2026-01-01T00:00:00Z',
            observedGeneration: 1,
          },
        ],
      });
      expect(kube.getMachine('w')?.status).toEqual(updated.status);
    });

    it('retries from a fresh read when another writer changes the status in between, keeping their fields', async () => {
      kube.beforeNext(statusPatches, () => {
        kube.patchMachineStatusAsOtherWriter('w', {
          phase: 'Rebooting',
          message: 'metalman was here',
          conditions: [
            { type: 'Reachable', status: 'False', reason: 'NoPing' },
            { type: 'Powered', status: 'True', reason: 'On' },
          ],
        });
      });
      const seenPhases: Array<string | undefined> = [];
      await api.patchMachineStatus('w', (fresh) => {
        seenPhases.push(fresh.status?.phase);
        return {
          phase: 'Provisioning',
          nodeUpdated: { status: 'False', reason: 'InProgress', message: 'updating' },
        };
      });
      expect(seenPhases).toEqual(['Pending', 'Rebooting']);
      expect(kube.countRequests(statusPatches)).toBe(2);
      expect(kube.requests.filter((r) => r.verb === 'patch').map((r) => r.status)).toEqual([409, 200]);
      expectBackoff(clock.sleeps, [100]);
      const status = kube.getMachine('w')?.status;
      expect(status).toMatchObject({ phase: 'Provisioning', message: 'metalman was here' });
      expect(status?.conditions).toEqual([
        { type: 'Reachable', status: 'False', reason: 'NoPing' },
        { type: 'Powered', status: 'True', reason: 'On' },
        expect.objectContaining({
          type: 'NodeUpdated',
          status: 'False',
          reason: 'InProgress',
          message: 'updating',
        }),
      ]);
    });

    it('gives up with KUBE_CONFLICT after the configured attempts, backing off with a cap', async () => {
      let n = 0;
      kube.beforeNext(
        statusPatches,
        () => {
          n += 1;
          kube.patchMachineStatusAsOtherWriter('w', { message: `write ${n}` });
        },
        10,
      );
      await expect(api.patchMachineStatus('w', () => ({ phase: 'Failed' }))).rejects.toMatchObject({
        code: 'KUBE_CONFLICT',
        data: { machine: 'w', attempts: 3 },
      });
      expect(kube.countRequests(statusPatches)).toBe(3);
      expectBackoff(clock.sleeps, [100, 150]);
      expect(kube.getMachine('w')?.status?.phase).toBe('Pending');
    });

    it('starts from the base it is given (no read), and from a fresh read after the base proves stale', async () => {
      const base = await api.getMachine('w');
      const reads = () => kube.countRequests({ resource: 'machines', verb: 'get' });
      const before = reads();
      await api.patchMachineStatus('w', () => ({ phase: 'Joining' }), { base: base! });
      expect(reads()).toBe(before);
      expect(kube.getMachine('w')?.status?.phase).toBe('Joining');
      // The same base again is stale now: a conflict, then a fresh read keeps the new phase's writer.
      const seen: Array<string | undefined> = [];
      await api.patchMachineStatus(
        'w',
        (fresh) => {
          seen.push(fresh.status?.phase);
          return { message: 'again' };
        },
        { base: base! },
      );
      expect(seen).toEqual(['Pending', 'Joining']);
      expect(kube.requests.filter((r) => r.verb === 'patch').map((r) => r.status)).toEqual([200, 409, 200]);
      expect(reads()).toBe(before + 1);
      expect(kube.getMachine('w')?.status).toMatchObject({ phase: 'Joining', message: 'again' });
    });

    it('writes nothing when the mutation returns null', async () => {
      const machine = await api.patchMachineStatus('w', () => null);
      expect(machine.status?.phase).toBe('Pending');
      expect(kube.countRequests(statusPatches)).toBe(0);
    });

    it('clears the message with null and fails with NOT_FOUND for a missing Machine', async () => {
      const updated = await api.patchMachineStatus('w', () => ({ message: null }));
      expect(updated.status?.message).toBeUndefined();
      await expect(api.patchMachineStatus('gone', () => ({ phase: 'Ready' }))).rejects.toMatchObject({
        code: 'NOT_FOUND',
      });
    });

    it('does not retry a server error', async () => {
      kube.failNext(1, { status: 500, match: statusPatches });
      await expect(api.patchMachineStatus('w', () => ({ phase: 'Ready' }))).rejects.toMatchObject({
        code: 'KUBE_UNAVAILABLE',
        data: { status: 500 },
      });
      expect(kube.countRequests(statusPatches)).toBe(1);
    });
  });
});
