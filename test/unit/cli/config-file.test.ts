import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { readConfigFile } from '../../../src/cli/config-file.js';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'agentctl-config-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('readConfigFile', () => {
  it('reads JSON and YAML, relative to the working directory', async () => {
    await writeFile(path.join(dir, 'a.json'), '{"MachineName":"n1"}');
    await writeFile(path.join(dir, 'a.yaml'), 'MachineName: n1\nCluster:\n  Version: "1.34.0"\n');
    expect(await readConfigFile('a.json', dir)).toEqual({ MachineName: 'n1' });
    expect(await readConfigFile('a.yaml', dir)).toEqual({
      MachineName: 'n1',
      Cluster: { Version: '1.34.0' },
    });
  });

  it.each([
    ['missing.yaml', null, /--config: cannot read .*missing\.yaml/],
    ['list.yaml', '- a\n- b\n', /must hold an agent config object .* got a list/],
    ['empty.yaml', '', /got an empty document/],
    ['bad.yaml', 'a: [1\n', /is neither JSON nor YAML/],
    ['number.json', '42', /got number/],
  ])('%s is a usage error naming the flag and the file', async (name, content, message) => {
    if (content !== null) await writeFile(path.join(dir, name), content);
    const err = await readConfigFile(name, dir).catch((e: unknown) => e);
    expect(err).toMatchObject({
      exitCode: 2,
      details: { code: 'INVALID_CONFIG', file: path.join(dir, name) },
    });
    expect((err as Error).message).toMatch(message);
  });
});
