/** The sim executables' entry point: where it refuses to run, and how it reports a misconfiguration. */
import { describe, expect, it, vi } from 'vitest';
import type * as StateLock from '../../../../src/sim/host/state-lock.js';

const lock = vi.hoisted(() => ({ crossProcess: true }));
vi.mock('../../../../src/sim/host/state-lock.js', async (importOriginal) => {
  const actual = await importOriginal<typeof StateLock>();
  return {
    ...actual,
    get CROSS_PROCESS_LOCK() {
      return lock.crossProcess;
    },
  };
});

const { runSimTool, SIM_USAGE_EXIT } = await import('../../../../src/sim/bin/main.js');

function io(env: NodeJS.ProcessEnv) {
  const out = { stdout: '', stderr: '' };
  return {
    out,
    io: { env, stdout: (t: string) => (out.stdout += t), stderr: (t: string) => (out.stderr += t) },
  };
}

describe('runSimTool', () => {
  it('refuses to run without the cross-process state lock, saying why, before touching the root', async () => {
    lock.crossProcess = false;
    try {
      const { out, io: tio } = io({ AGENTD_SIM_ROOT: '/nonexistent/agentd-sim-root' });
      expect(await runSimTool('systemctl', ['daemon-reload'], tio)).toBe(SIM_USAGE_EXIT);
      expect(out.stderr).toBe(
        'systemctl (agentd sim): the sim executables need Linux (their state lock is an abstract unix socket)\n',
      );
    } finally {
      lock.crossProcess = true;
    }
  });

  it('names AGENTD_SIM_ROOT when it is not set', async () => {
    const { out, io: tio } = io({});
    expect(await runSimTool('machinectl', ['show', 'kube1'], tio)).toBe(SIM_USAGE_EXIT);
    expect(out.stderr).toContain('AGENTD_SIM_ROOT is not set');
  });
});
