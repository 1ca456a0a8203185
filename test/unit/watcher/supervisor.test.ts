// No API server: only the fake API server’s test clock (test/support/fake-kube/test-clock.ts).
import { describe, expect, it, vi } from 'vitest';
import type { KubeSession } from '../../../src/kube/session.js';
import { createWatcherSupervisor } from '../../../src/watcher/supervisor.js';
import { createTestClock } from '../../support/fake-kube.js';
import { silentLogger } from './rpc-stub.js';

/** A session that never has Kubernetes (its reason can change), counting what is asked of it. */
function unavailableSession(reason: { value: string }) {
  const session = {
    mightHaveCredentials: vi.fn(() => false),
    unavailableReason: vi.fn(() => reason.value),
    machineName: () => null,
    load: vi.fn(async () => undefined),
    connect: vi.fn(async () => {
      throw new Error('connect must not be called while Kubernetes is unavailable');
    }),
    nodeOps: {} as KubeSession['nodeOps'],
    refreshCordoned: vi.fn(async () => undefined),
    validate: async () => undefined,
  };
  return session;
}

function setup(watch: boolean | null, reason = { value: 'no Kubernetes credentials' }) {
  const session = unavailableSession(reason);
  const listeners: Array<() => void> = [];
  const changes = vi.fn();
  const supervisor = createWatcherSupervisor({
    config: { watch, stateDir: '/nonexistent/agentd-state' },
    session: session as unknown as KubeSession,
    registrationConfig: () => null,
    onOperationEnded: (listener) => {
      listeners.push(listener);
      return () => listeners.splice(listeners.indexOf(listener), 1);
    },
    logger: silentLogger,
    clock: createTestClock(),
    metrics: {} as never,
    onStatusChange: changes,
  });
  const dispatcher = { handle: vi.fn() } as never;
  return { session, listeners, changes, supervisor, dispatcher, reason };
}

describe('createWatcherSupervisor', () => {
  it('says the daemon is not ready before start, and why the watcher does not run after', async () => {
    const h = setup(null);
    expect(h.supervisor.status()).toMatchObject({ enabled: false, reason: 'the daemon is not ready yet' });
    h.supervisor.start(h.dispatcher);
    expect(h.supervisor.status()).toMatchObject({ enabled: false, reason: 'no Kubernetes credentials' });
    expect(h.changes).toHaveBeenCalled();
    await h.supervisor.stop();
    expect(h.session.connect).not.toHaveBeenCalled();
  });

  it('--no-watch: never looks at the session', async () => {
    const h = setup(false);
    h.supervisor.start(h.dispatcher);
    await h.supervisor.stop();
    expect(h.supervisor.status().reason).toBe('disabled by --no-watch');
    expect(h.session.unavailableReason).not.toHaveBeenCalled();
  });

  it('looks again when an operation ends, and shows the new reason', async () => {
    const h = setup(null);
    h.supervisor.start(h.dispatcher);
    await vi.waitFor(() => expect(h.session.load).toHaveBeenCalledTimes(1));
    h.reason.value = 'no node name: pass --machine-name, or join the node first';
    for (const listener of h.listeners) listener();
    await vi.waitFor(() => expect(h.session.load).toHaveBeenCalledTimes(2));
    await vi.waitFor(() => expect(h.supervisor.status().reason).toBe(h.reason.value));
    await h.supervisor.stop();
  });

  it('stops listening for ended operations at stop', async () => {
    const h = setup(null);
    h.supervisor.start(h.dispatcher);
    expect(h.listeners).toHaveLength(1);
    await h.supervisor.stop();
    expect(h.listeners).toHaveLength(0);
  });
});
