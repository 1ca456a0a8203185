/**
 * The applied-config store: `/etc/unbounded/agent/<m>-applied-config.json` + `.sha256`, in the
 * upstream agent's format. Sidecar matches → verified; missing → read with a warning;
 * mismatch → CHECKSUM_MISMATCH; writes are exact bytes, mode 0600, config then sidecar.
 */
import { mkdir, mkdtemp, readFile, readdir, rm, stat, utimes, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Logger } from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  agentConfigSchema,
  appliedConfigFileSchema,
  serializeAgentConfig,
} from '../../../src/config/agent-config.js';
import { createAppliedConfigStore, sha256Hex } from '../../../src/engine/applied-config-store.js';
import { createHostPaths, type HostPaths } from '../../../src/host/paths.js';
import { makeAgentConfig } from '../../support/agent-config.js';
import { writeAppliedConfig } from '../../support/provision-fixtures.js';

/** A logger that records warnings (the store's only log call). */
function recordingLogger(): { logger: Logger; warnings: Array<{ obj: object; msg?: string }> } {
  const warnings: Array<{ obj: object; msg?: string }> = [];
  const logger = { warn: (obj: object, msg?: string) => warnings.push({ obj, msg }) } as unknown as Logger;
  return { logger, warnings };
}

async function rejection(p: Promise<unknown>): Promise<{ code?: string; message: string; data?: unknown }> {
  return p.then(
    () => {
      throw new Error('expected a rejection');
    },
    (e: { code?: string; message: string; data?: unknown }) => e,
  );
}

describe('createAppliedConfigStore', () => {
  let dir: string;
  let paths: HostPaths;
  const config = agentConfigSchema.parse(makeAgentConfig());

  beforeEach(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'agentd-applied-'));
    paths = createHostPaths(dir);
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('write produces the exact bytes, mode 0600, and a sidecar of hex + newline', async () => {
    const store = createAppliedConfigStore(paths);
    const hash = await store.write('kube1', config);
    const file = paths.appliedConfig('kube1');
    expect(file).toBe(path.join(dir, 'etc/unbounded/agent/kube1-applied-config.json'));
    const bytes = await readFile(file, 'utf8');
    expect(bytes).toBe(serializeAgentConfig(config));
    expect(bytes).toBe(`${JSON.stringify(config, null, 2)}\n`);
    expect(hash).toBe(sha256Hex(bytes));
    expect(hash).toMatch(/^[0-9a-f]{64}$/);
    expect(await readFile(paths.appliedConfigSidecar('kube1'), 'utf8')).toBe(`${hash}\n`);
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    expect((await stat(paths.appliedConfigSidecar('kube1'))).mode & 0o777).toBe(0o600);
    expect((await stat(paths.agentConfigDir)).mode & 0o777).toBe(0o700);
    // Atomic writes leave no temp file beside them.
    expect((await readdir(paths.agentConfigDir)).sort()).toEqual([
      'kube1-applied-config.json',
      'kube1-applied-config.json.sha256',
    ]);
  });

  it('reads back what it wrote as verified', async () => {
    const store = createAppliedConfigStore(paths);
    const hash = await store.write('kube2', config);
    expect(await store.read('kube2')).toEqual({ machine: 'kube2', config, hash, verified: true });
    expect(await store.read('kube1')).toBeNull();
  });

  it('accepts a sidecar in sha256sum format (hex, two spaces, file name), upper or lower case', async () => {
    const store = createAppliedConfigStore(paths);
    const { hash } = await writeAppliedConfig(dir, 'kube1', config);
    await writeFile(
      paths.appliedConfigSidecar('kube1'),
      `${hash.toUpperCase()}  kube1-applied-config.json\n`,
    );
    expect(await store.read('kube1')).toMatchObject({ verified: true, hash });
  });

  it('a missing sidecar reads the file unverified, with a warning naming it', async () => {
    const { logger, warnings } = recordingLogger();
    const store = createAppliedConfigStore(paths, logger);
    const { hash } = await writeAppliedConfig(dir, 'kube1', config, { sidecar: null });
    expect(await store.read('kube1')).toEqual({ machine: 'kube1', config, hash, verified: false });
    expect(warnings).toEqual([
      { obj: { file: paths.appliedConfig('kube1') }, msg: expect.stringContaining('no .sha256 sidecar') },
    ]);
  });

  it('a sidecar that does not match is CHECKSUM_MISMATCH naming the file and both digests', async () => {
    const store = createAppliedConfigStore(paths);
    const wrong = '0'.repeat(64);
    const { hash } = await writeAppliedConfig(dir, 'kube1', config, { sidecar: `${wrong}\n` });
    const err = await rejection(store.read('kube1'));
    expect(err.code).toBe('CHECKSUM_MISMATCH');
    expect(err.message).toContain(paths.appliedConfig('kube1'));
    expect(err.message).toContain(wrong);
    expect(err.message).toContain(hash);
  });

  it('a garbled sidecar is CHECKSUM_MISMATCH saying so, without echoing its bytes (issue 40)', async () => {
    const store = createAppliedConfigStore(paths);
    const garbage = '<script>\u001b[31mBOOM not-a-digest';
    await writeAppliedConfig(dir, 'kube1', config, { sidecar: garbage });
    const err = await rejection(store.read('kube1'));
    expect(err.code).toBe('CHECKSUM_MISMATCH');
    expect(err.message).toContain(`${paths.appliedConfig('kube1')}.sha256 is garbled`);
    expect(err.message).not.toContain('BOOM');
    expect(err.message).not.toContain('script');
    expect(JSON.stringify(err.data)).not.toContain('BOOM');
  });

  it('an applied config that is a directory names the path and says so (issue 40: not INTERNAL)', async () => {
    const store = createAppliedConfigStore(paths);
    await mkdir(paths.appliedConfig('kube1'), { recursive: true });
    const err = await rejection(store.read('kube1'));
    expect(err.code).toBe('PRECONDITION_FAILED');
    expect(err.message).toContain(`${paths.appliedConfig('kube1')} is a directory`);
    expect(err.data).toMatchObject({ file: paths.appliedConfig('kube1') });
  });

  it('a file changed after its sidecar was written is CHECKSUM_MISMATCH (never trusted)', async () => {
    const store = createAppliedConfigStore(paths);
    await store.write('kube1', config);
    const file = paths.appliedConfig('kube1');
    await writeFile(file, (await readFile(file, 'utf8')).replace('worker-01', 'worker-02'));
    expect((await rejection(store.read('kube1'))).code).toBe('CHECKSUM_MISMATCH');
  });

  it('a file that is not JSON, or not an agent config, is INVALID_CONFIG naming what is wrong', async () => {
    const store = createAppliedConfigStore(paths);
    await writeAppliedConfig(dir, 'kube1', config);
    await writeFile(paths.appliedConfig('kube1'), '{not json');
    await writeFile(paths.appliedConfigSidecar('kube1'), `${sha256Hex('{not json')}\n`);
    const notJson = await rejection(store.read('kube1'));
    expect(notJson.code).toBe('INVALID_CONFIG');
    expect(notJson.message).toMatch(/not valid JSON/);

    const { MachineName: _dropped, ...missing } = config;
    await writeAppliedConfig(dir, 'kube2', missing);
    const invalid = await rejection(store.read('kube2'));
    expect(invalid.code).toBe('INVALID_CONFIG');
    expect(invalid.message).toContain('MachineName');
  });

  it('reads an upstream file: unknown top-level fields are kept, defaults filled', async () => {
    const store = createAppliedConfigStore(paths);
    const upstream = { ...makeAgentConfig(), Attestation: { Enabled: false } };
    await writeAppliedConfig(dir, 'kube1', upstream);
    const rec = await store.read('kube1');
    expect(rec?.config).toMatchObject({ Attestation: { Enabled: false }, CNI: { PluginVersion: '1.5.1' } });
    expect(rec?.verified).toBe(true);
  });

  it('every read answers the files as they are now, though unchanged bytes are not parsed again', async () => {
    const { logger, warnings } = recordingLogger();
    const store = createAppliedConfigStore(paths, logger);
    const hash = await store.write('kube1', config);
    const first = await store.read('kube1');
    // The same bytes: the same record, shared, so it cannot be changed by whoever holds it.
    expect(await store.read('kube1')).toBe(first);
    expect(Object.isFrozen(first?.config.Cluster)).toBe(true);
    expect(() => {
      (first?.config.Cluster as { Version: string }).Version = 'v0.0.0';
    }).toThrow(TypeError);

    // A change that keeps the file's size and times is still seen: the bytes decide.
    const file = paths.appliedConfig('kube1');
    const { atime, mtime } = await stat(file);
    const text = await readFile(file, 'utf8');
    expect(text).toContain('worker-01');
    await writeFile(file, text.replace('worker-01', 'worker-02'));
    await utimes(file, atime, mtime);
    expect((await rejection(store.read('kube1'))).code).toBe('CHECKSUM_MISMATCH');
    await writeFile(file, text);
    expect(await store.read('kube1')).toEqual({ machine: 'kube1', config, hash, verified: true });

    // The sidecar counts as much as the file.
    await rm(paths.appliedConfigSidecar('kube1'));
    expect(await store.read('kube1')).toMatchObject({ hash, verified: false });
    await writeFile(paths.appliedConfigSidecar('kube1'), `${'0'.repeat(64)}\n`);
    expect((await rejection(store.read('kube1'))).code).toBe('CHECKSUM_MISMATCH');

    // A new config, and then none.
    const next = agentConfigSchema.parse(makeAgentConfig({ MachineName: 'worker-09' }));
    const nextHash = await store.write('kube1', next);
    expect(await store.read('kube1')).toEqual({
      machine: 'kube1',
      config: next,
      hash: nextHash,
      verified: true,
    });
    await store.remove('kube1');
    expect(await store.read('kube1')).toBeNull();
    // The unverified read warned once.
    expect(warnings).toHaveLength(1);
  });

  it('freezes only its own record, never objects a later parse of the same schema hands out', async () => {
    const store = createAppliedConfigStore(paths);
    // No CRI: the schema fills it from its default, whose inner objects zod shares between parses.
    const { CRI: _dropped, ...withoutCri } = makeAgentConfig();
    await writeAppliedConfig(dir, 'kube1', withoutCri);
    const rec = await store.read('kube1');
    expect(Object.isFrozen(rec?.config.CRI.Containerd)).toBe(true);
    // Only looked at, never changed: the unit project shares modules between test files.
    const later = appliedConfigFileSchema.parse(withoutCri);
    expect(Object.isFrozen(later.CRI.Containerd)).toBe(false);
    expect(Object.isFrozen(later.CRI)).toBe(false);
  });

  it('remove deletes the config and its sidecar, and tolerates their absence', async () => {
    const store = createAppliedConfigStore(paths);
    await store.write('kube1', config);
    await store.write('kube2', config);
    await store.remove('kube1');
    expect((await readdir(paths.agentConfigDir)).sort()).toEqual([
      'kube2-applied-config.json',
      'kube2-applied-config.json.sha256',
    ]);
    await store.remove('kube1');
    expect(await store.read('kube1')).toBeNull();
  });
});
