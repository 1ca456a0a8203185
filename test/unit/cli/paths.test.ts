import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { DEFAULT_PID_FILE, DEFAULT_SOCKET, defaultPidFile, defaultSocket } from '../../../src/cli/paths.js';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'agentctl-paths-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

// The fallback only applies when the system paths do not exist, as on any test machine.
const systemPathsExist = existsSync(DEFAULT_SOCKET) || existsSync(DEFAULT_PID_FILE);

describe('agentctl default paths', () => {
  it('AGENTD_SOCKET and AGENTD_PID_FILE win, resolved against the working directory', () => {
    const env = { AGENTD_SOCKET: 'x/a.sock', AGENTD_PID_FILE: '/abs/a.pid' };
    expect(defaultSocket(env, dir)).toBe(path.join(dir, 'x/a.sock'));
    expect(defaultPidFile(env, dir)).toBe('/abs/a.pid');
  });

  it.skipIf(systemPathsExist)('the system paths when ./.agentd has nothing', () => {
    expect(defaultSocket({}, dir)).toBe(DEFAULT_SOCKET);
    expect(defaultPidFile({}, dir)).toBe(DEFAULT_PID_FILE);
  });

  it.skipIf(systemPathsExist)('the ./.agentd paths of a --sim daemon when only those exist', async () => {
    await mkdir(path.join(dir, '.agentd'));
    await writeFile(path.join(dir, '.agentd', 'agentd.sock'), '');
    await writeFile(path.join(dir, '.agentd', 'agentd.pid'), '1\n');
    expect(defaultSocket({}, dir)).toBe(path.join(dir, '.agentd', 'agentd.sock'));
    expect(defaultPidFile({}, dir)).toBe(path.join(dir, '.agentd', 'agentd.pid'));
  });
});
