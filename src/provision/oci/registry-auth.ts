/**
 * Credentials of private registries, from an auth file in the format Docker, Podman and skopeo
 * share (`~/.docker/config.json`, containers-auth.json(5)): `{"auths": {"<registry>": {"auth":
 * "<base64 of user:password>"}}}`; `username` and `password` fields instead of `auth` are
 * taken too. A registry key may carry a scheme and a path (`https://index.docker.io/v1/`): its
 * host decides. Credential helpers (`credHelpers`, `credsStore`) and identity tokens are not
 * supported; a file that names one for the registry asked for is an error that says so rather
 * than an anonymous pull that fails later.
 *
 * The file is read at every pull, so credentials can be rotated without a restart; a missing
 * file means anonymous pulls. A file that others than its owner can read is used, with a warning
 * at each pull. docs/operations.md, "Private registries".
 */
import { readFile, stat } from 'node:fs/promises';
import * as z from 'zod';
import { InvalidConfigError } from '../../errors.js';
import { silentLogger, type OciLogger } from './types.js';

/** What a registry is asked with. */
export interface RegistryCredentials {
  username: string;
  password: string;
}

/** The credentials for one pull, and where they came from (for messages). */
export interface RegistryAuth {
  /** null: none for this registry (anonymous). */
  credentials: RegistryCredentials | null;
  /** The auth file that was read, or would have been. */
  file: string;
}

const entrySchema = z
  .object({
    auth: z.string().optional(),
    username: z.string().optional(),
    password: z.string().optional(),
    identitytoken: z.string().optional(),
  })
  .loose();

const authFileSchema = z
  .object({
    auths: z.record(z.string(), entrySchema).optional(),
    credHelpers: z.record(z.string(), z.string()).optional(),
    credsStore: z.string().optional(),
  })
  .loose();

/** Docker Hub's names: a key for any of them serves an image of any of them. */
const DOCKER_HUB = ['docker.io', 'index.docker.io', 'registry-1.docker.io'];

/** The host[:port] of an auth file key (`https://index.docker.io/v1/` → `index.docker.io`). */
function keyHost(key: string): string {
  return key
    .replace(/^[a-z][a-z0-9+.-]*:\/\//i, '')
    .replace(/\/.*$/, '')
    .toLowerCase();
}

/** Whether the key names `registry` (an image reference's API host, `registry-1.docker.io` for Hub). */
function keyMatches(key: string, registry: string): boolean {
  const host = keyHost(key);
  const wanted = registry.toLowerCase();
  return host === wanted || (DOCKER_HUB.includes(host) && DOCKER_HUB.includes(wanted));
}

/**
 * The credentials `file` holds for `registry`. A missing file (or `file` null) is anonymous;
 * an unreadable or malformed file, or an entry agentd cannot use, throws INVALID_CONFIG naming
 * the file and the key, never the secret.
 */
export async function registryAuthFor(
  file: string | null,
  registry: string,
  logger: Pick<OciLogger, 'warn'> = silentLogger,
): Promise<RegistryAuth | null> {
  const auth = await readAuth(file, registry);
  if (auth?.credentials) {
    // Credentials others can read are credentials others have: said at every pull that uses them.
    // A file replaced or removed since it was read: its credentials were read all the same.
    const mode = ((await stat(auth.file).catch(() => null))?.mode ?? 0) & 0o777;
    if (mode & 0o077) {
      logger.warn(
        { file: auth.file, mode: mode.toString(8).padStart(4, '0') },
        'the registry auth file can be read by others than its owner: chmod 600 it',
      );
    }
  }
  return auth;
}

async function readAuth(file: string | null, registry: string): Promise<RegistryAuth | null> {
  if (file === null) return null;
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { credentials: null, file };
    throw new InvalidConfigError(`registry auth file ${file}: cannot read it: ${(err as Error).message}`, {
      cause: err,
    });
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new InvalidConfigError(`registry auth file ${file}: not valid JSON`, { cause: err });
  }
  const parsed = authFileSchema.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new InvalidConfigError(
      `registry auth file ${file}: ${issue ? `${issue.path.join('.') || 'the file'}: ${issue.message}` : 'not an auth file'} (expected {"auths": {"<registry>": {"auth": "<base64 of user:password>"}}})`,
    );
  }
  const { auths = {}, credHelpers = {}, credsStore } = parsed.data;
  const key = Object.keys(auths).find((k) => keyMatches(k, registry));
  if (key === undefined) {
    const helper = Object.keys(credHelpers).find((k) => keyMatches(k, registry));
    if (helper !== undefined || credsStore !== undefined) {
      throw new InvalidConfigError(
        `registry auth file ${file}: ${registry} is left to a credential helper (${helper !== undefined ? `credHelpers["${helper}"]` : 'credsStore'}), which agentd does not run; put its credentials under "auths"`,
      );
    }
    return { credentials: null, file };
  }
  const entry = auths[key] ?? {};
  const bad = (why: string): InvalidConfigError =>
    new InvalidConfigError(`registry auth file ${file}: auths["${key}"]: ${why}`);
  if (entry.auth !== undefined && entry.auth !== '') {
    const decoded = Buffer.from(entry.auth, 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    if (!/^[A-Za-z0-9+/]+=*$/.test(entry.auth) || colon <= 0) {
      throw bad('"auth" is not the base64 of user:password');
    }
    return { credentials: { username: decoded.slice(0, colon), password: decoded.slice(colon + 1) }, file };
  }
  if (entry.username && entry.password !== undefined) {
    return { credentials: { username: entry.username, password: entry.password }, file };
  }
  if (entry.identitytoken) throw bad('identity tokens are not supported; give "auth" (user:password)');
  throw bad('no "auth", nor "username" and "password"');
}

/** The `Authorization` value of Basic credentials. */
export function basicAuthorization(c: RegistryCredentials): string {
  return `Basic ${Buffer.from(`${c.username}:${c.password}`).toString('base64')}`;
}
