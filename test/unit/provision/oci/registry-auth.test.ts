import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { basicAuthorization, registryAuthFor } from '../../../../src/provision/oci/registry-auth.js';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'agentd-regauth-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const b64 = (s: string): string => Buffer.from(s).toString('base64');

async function authFile(content: unknown): Promise<string> {
  const file = path.join(dir, 'auth.json');
  await writeFile(file, typeof content === 'string' ? content : JSON.stringify(content));
  return file;
}

describe('registryAuthFor', () => {
  it('is anonymous without a file, and with a file that is missing or names no such registry', async () => {
    expect(await registryAuthFor(null, 'registry.corp')).toBeNull();
    const missing = path.join(dir, 'none.json');
    expect(await registryAuthFor(missing, 'registry.corp')).toEqual({ credentials: null, file: missing });
    const file = await authFile({ auths: { 'other.corp': { auth: b64('u:p') } } });
    expect(await registryAuthFor(file, 'registry.corp')).toEqual({ credentials: null, file });
  });

  it('reads auth (base64 of user:password, the password may hold colons) and username/password', async () => {
    const file = await authFile({
      auths: {
        'registry.corp': { auth: b64('robot$pull:pa:ss') },
        'https://mirror.corp:5000/v2/': { username: 'u2', password: 'p2' },
      },
    });
    expect((await registryAuthFor(file, 'registry.corp'))?.credentials).toEqual({
      username: 'robot$pull',
      password: 'pa:ss',
    });
    // A key's scheme and path do not count; its port does.
    expect((await registryAuthFor(file, 'mirror.corp:5000'))?.credentials).toEqual({
      username: 'u2',
      password: 'p2',
    });
    expect((await registryAuthFor(file, 'mirror.corp'))?.credentials).toBeNull();
  });

  it('takes any of Docker Hub’s names for an image on Docker Hub', async () => {
    const file = await authFile({ auths: { 'https://index.docker.io/v1/': { auth: b64('hub:secret') } } });
    expect((await registryAuthFor(file, 'registry-1.docker.io'))?.credentials?.username).toBe('hub');
  });

  it('refuses what it cannot use, naming the file and the entry but never the secret', async () => {
    const cases: Array<[unknown, RegExp]> = [
      ['{not json', /auth\.json: not valid JSON/],
      [{ auths: [] }, /auth\.json: auths: .*expected \{"auths"/],
      [
        { auths: { 'registry.corp': { auth: b64('no-colon-secret') } } },
        /auths\["registry\.corp"\]: "auth" is not the base64 of user:password/,
      ],
      [{ auths: { 'registry.corp': { auth: '!!!' } } }, /"auth" is not the base64/],
      [{ auths: { 'registry.corp': { identitytoken: 'tok-secret' } } }, /identity tokens are not supported/],
      [{ auths: { 'registry.corp': {} } }, /no "auth", nor "username" and "password"/],
      [
        { credHelpers: { 'registry.corp': 'ecr-login' } },
        /left to a credential helper \(credHelpers\["registry\.corp"\]\)/,
      ],
      [{ credsStore: 'desktop' }, /left to a credential helper \(credsStore\)/],
    ];
    for (const [content, message] of cases) {
      const file = await authFile(content);
      const err = await registryAuthFor(file, 'registry.corp').then(
        () => null,
        (e: unknown) => e as { code: string; message: string },
      );
      expect(err?.code, JSON.stringify(content)).toBe('INVALID_CONFIG');
      expect(err?.message).toMatch(message);
      expect(err?.message).not.toMatch(/secret/);
    }
  });

  it('names the file it cannot read', async () => {
    // A directory where the file should be: unreadable as a file, for root too.
    await expect(registryAuthFor(dir, 'registry.corp')).rejects.toThrow(
      expect.objectContaining({
        code: 'INVALID_CONFIG',
        message: expect.stringContaining(`${dir}: cannot read it`),
      }),
    );
  });

  it('warns at each use of credentials that others than the owner can read, and not otherwise', async () => {
    const file = await authFile({ auths: { 'registry.corp': { auth: b64('u:p') } } });
    const warnings: Array<{ obj: object; msg?: string }> = [];
    const logger = { warn: (obj: object, msg?: string) => warnings.push({ obj, msg }) };
    await chmod(file, 0o600);
    expect((await registryAuthFor(file, 'registry.corp', logger))?.credentials?.username).toBe('u');
    await registryAuthFor(file, 'other.corp', logger);
    expect(warnings).toEqual([]);
    await chmod(file, 0o644);
    expect((await registryAuthFor(file, 'registry.corp', logger))?.credentials?.username).toBe('u');
    // No credentials of it used: nothing to warn about.
    await registryAuthFor(file, 'other.corp', logger);
    expect(warnings).toEqual([
      {
        obj: { file, mode: '0644' },
        msg: 'the registry auth file can be read by others than its owner: chmod 600 it',
      },
    ]);
  });

  it('makes the Basic authorization of credentials', () => {
    expect(basicAuthorization({ username: 'u', password: 'p:w' })).toBe(`Basic ${b64('u:p:w')}`);
  });
});
