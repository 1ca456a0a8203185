import pino from 'pino';
import { describe, expect, it, vi } from 'vitest';
import { agentConfigSchema } from '../../../src/config/agent-config.js';
import type { AgentConfig } from '../../../src/config/agent-config.js';
import { createKubeClients } from '../../../src/kube/index.js';
import { createKubeSession } from '../../../src/kube/session.js';
import type { KubeSessionOptions } from '../../../src/kube/session.js';
import { makeAgentConfig } from '../../support/agent-config.js';
import { createTestClock } from '../../support/fake-kube.js';

function make(config: Partial<KubeSessionOptions['config']>, applied: () => AgentConfig | null) {
  const createClients = vi.fn(createKubeClients);
  const session = createKubeSession({
    config: {
      kubeconfig: null,
      machineName: null,
      watch: null,
      crdGroup: 'unbounded-cloud.io',
      host: 'systemd',
      ...config,
    },
    appliedConfig: applied,
    logger: pino({ level: 'silent' }),
    clock: createTestClock(),
    env: {},
    createClients,
  });
  return { session, createClients };
}

describe('createKubeSession', () => {
  it('without credentials: connect is PRECONDITION_FAILED saying why, and no client code is asked for', async () => {
    const { session, createClients } = make({}, () => null);
    expect(session.mightHaveCredentials()).toBe(false);
    await expect(session.connect()).rejects.toMatchObject({
      code: 'PRECONDITION_FAILED',
      message: expect.stringContaining('no Kubernetes credentials') as string,
    });
    await expect(session.nodeOps.cordon()).rejects.toMatchObject({ code: 'PRECONDITION_FAILED' });
    expect(session.nodeOps.cordoned()).toBeNull();
    expect(createClients).not.toHaveBeenCalled();
  });

  it('with the applied config: loads the client, builds clients once, names the Machine', async () => {
    const applied = agentConfigSchema.parse(makeAgentConfig());
    const { session, createClients } = make({}, () => applied);
    expect(session.mightHaveCredentials()).toBe(true);
    const first = await session.connect();
    expect(first.machineName).toBe(applied.MachineName);
    expect(first.clients.source).toBe('bootstrap-token');
    expect(typeof first.runtime.createMachineApi).toBe('function');
    const second = await session.connect();
    expect(second.clients).toBe(first.clients);
    expect(createClients).toHaveBeenCalledTimes(1);
  });

  it('--machine-name wins over the applied config', async () => {
    const applied = agentConfigSchema.parse(makeAgentConfig());
    const { session } = make({ machineName: 'other' }, () => applied);
    expect(session.machineName()).toBe('other');
    expect((await session.connect()).machineName).toBe('other');
  });
});
