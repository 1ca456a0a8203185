import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { parseSimCommand } from '../../../../src/sim/host/command-line.js';
import { EMPTY_LDCONFIG_OUTPUT, SIM_LDCONFIG_OUTPUT } from '../../../../src/sim/host/host-commands.js';
import { createSimHost } from '../../../../src/sim/host/sim-host.js';

describe("the simulated host's ldconfig -p", () => {
  let root: string;
  beforeEach(async () => {
    root = await mkdtemp(path.join(os.tmpdir(), 'agentd-sim-ldconfig-'));
  });
  afterEach(async () => {
    await rm(root, { recursive: true, force: true });
  });

  it('accepts exactly `ldconfig -p`', () => {
    expect(parseSimCommand('ldconfig', ['-p'])).toEqual({ kind: 'ldconfig-cache' });
    expect(parseSimCommand('ldconfig', [])).toBeUndefined();
    expect(parseSimCommand('ldconfig', ['-p', '-v'])).toBeUndefined();
    expect(parseSimCommand('/sbin/ldconfig', ['-p'])).toBeUndefined();
  });

  it('prints an empty cache on a host that recorded none', async () => {
    const host = createSimHost({ root });
    expect((await host.run('ldconfig', ['-p'])).stdout).toBe(EMPTY_LDCONFIG_OUTPUT);
  });

  it('prints the recorded cache of a GPU host', async () => {
    const recorded =
      '1 libs found\n\tlibcuda.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcuda.so.1\n';
    await mkdir(path.dirname(path.join(root, SIM_LDCONFIG_OUTPUT)), { recursive: true });
    await writeFile(path.join(root, SIM_LDCONFIG_OUTPUT), recorded);
    const host = createSimHost({ root });
    expect(await host.run('ldconfig', ['-p'])).toMatchObject({ exitCode: 0, stdout: recorded });
    await expect(host.run('ldconfig', [])).rejects.toMatchObject({ code: 'COMMAND_FAILED' });
  });
});
