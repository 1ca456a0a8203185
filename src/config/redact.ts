/**
 * The one redactor: every credential-bearing value agentd shows — in logs, `status`, operation
 * records, errors and `config.get` — passes through here. It knows three kinds of secret:
 *
 * - URL userinfo (`http://user:pass@host/…`): shown as `http://***@host/…`, wherever a URL
 *   appears in a text (a download URL, a proxy, an image reference given as a URL);
 * - credentials in headers that servers echo (`Authorization: Bearer …`, `Basic …`): the
 *   credential is replaced by `[REDACTED]`;
 * - fields that are secret by their name (`BootstrapToken`, `authorization`, `token`, `caKey`,
 *   `password`, an exec credential's `args` and `env` values): their value is `[REDACTED]`.
 */

/** What a secret value is replaced with. */
export const REDACTED = '[REDACTED]';
/** What URL userinfo is replaced with (a URL stays readable as one). */
export const REDACTED_USERINFO = '***';

/** Keys whose values are secrets wherever they appear (compared case-insensitively). */
const SECRET_KEYS = new Set([
  'authorization',
  'proxy-authorization',
  'token',
  'bootstraptoken',
  'cakey',
  'password',
]);

/** `scheme://userinfo@` inside a text: the userinfo is what goes. */
const URL_USERINFO = /\b([a-z][a-z0-9+.-]*:\/\/)[^\s/?#@"'<>]+@/gi;
/**
 * A credential after an auth scheme, as in an echoed header: `Bearer eyJ…`, `Basic dXNlcjpw…`.
 * Eight characters or more, or with a digit or symbol: the words of agentd's own messages
 * ("the Bearer token flow and Basic auth") are not credentials.
 */
const AUTH_CREDENTIAL =
  /\b(Bearer|Basic)(\s+)(?=[A-Za-z0-9._~+/=-]{8}|[A-Za-z]*[0-9._~+/=-])[A-Za-z0-9._~+/=-]+/gi;
/** `authorization: <anything>` up to the end of the line or quote: an echoed header of another scheme. */
const AUTH_HEADER =
  /\b((?:proxy-)?authorization)(["']?\s*[:=]\s*["']?)(?!Bearer\b|Basic\b|Token\b)[^\s"',}]+/gi;

/** A text (a message, a URL, a server's error body) with every credential in it replaced. */
export function redactText(text: string): string {
  // Cheap tests first: most texts hold neither a URL with userinfo nor an auth header.
  if (!text.includes('@') && !/bearer|basic|authorization/i.test(text)) return text;
  return text
    .replace(URL_USERINFO, `$1${REDACTED_USERINFO}@`)
    .replace(AUTH_CREDENTIAL, `$1$2${REDACTED}`)
    .replace(AUTH_HEADER, `$1$2${REDACTED}`);
}

/** A URL without its credentials: `http://***@host/path`. */
export function redactUrl(url: string | URL): string {
  if (typeof url !== 'string') {
    if (!url.username && !url.password) return url.href;
    const copy = new URL(url.href);
    copy.username = REDACTED_USERINFO;
    copy.password = '';
    return copy.href;
  }
  return redactText(url);
}

/**
 * An image reference for a message: userinfo before the registry (`user:pass@registry/…`, which
 * no reference may have, but an operator may type) goes; a digest (`name@sha256:…`) stays.
 */
export function redactImageReference(ref: string): string {
  const at = ref.indexOf('@');
  const slash = ref.indexOf('/');
  if (at === -1 || (slash !== -1 && slash < at) || ref.startsWith('sha256:', at + 1)) return redactText(ref);
  return `${REDACTED_USERINFO}${ref.slice(at)}`;
}

/** Whether a field of this name holds a secret. */
export function isSecretKey(key: string): boolean {
  return SECRET_KEYS.has(key.toLowerCase());
}

/**
 * A deep copy of `value` with secret fields replaced and every string redacted (`redactText`).
 * An exec credential (`{command, args, env}`) keeps its command; its args and env values go.
 * An Error becomes `{type, message, stack}` (as pino shows one), redacted. Cycles and depth
 * beyond 32 are cut rather than followed.
 */
export function redactDeep<T>(value: T): T {
  return walk(value, 0, new WeakSet()) as T;
}

function walk(value: unknown, depth: number, seen: WeakSet<object>): unknown {
  if (typeof value === 'string') return redactText(value);
  if (value === null || typeof value !== 'object' || depth > 32) return value;
  if (seen.has(value)) return '[Circular]';
  seen.add(value);
  if (Array.isArray(value)) return value.map((v) => walk(v, depth + 1, seen));
  // Only plain data is copied: an Error, a Buffer or a URL is shown as its text.
  if (value instanceof Error) {
    return { type: value.name, message: redactText(value.message), stack: redactText(value.stack ?? '') };
  }
  if (value instanceof URL) return redactUrl(value);
  const proto = Object.getPrototypeOf(value) as unknown;
  if (proto !== Object.prototype && proto !== null) return value;
  const exec = isExecCredential(value);
  const out: Record<string, unknown> = {};
  for (const [key, v] of Object.entries(value)) {
    if (isSecretKey(key) && v !== undefined && v !== null) out[key] = REDACTED;
    else if (exec && key === 'args' && Array.isArray(v)) out[key] = v.map(() => REDACTED);
    else if (exec && key === 'env' && Array.isArray(v)) out[key] = v.map(redactEnvVar);
    else out[key] = walk(v, depth + 1, seen);
  }
  return out;
}

/** `{command, …}` with args or env: the shape of a kubeconfig exec credential. */
function isExecCredential(value: object): boolean {
  return 'command' in value && ('args' in value || 'env' in value);
}

function redactEnvVar(e: unknown): unknown {
  if (e === null || typeof e !== 'object' || !('name' in e)) return REDACTED;
  return { name: (e as { name: unknown }).name, value: REDACTED };
}

/**
 * A proxy variable's value for a message about it, its credentials replaced by `***` as
 * `redactProxyUrl` does: the value did not parse, so everything up to its last `@` goes.
 */
export function redactProxyValue(value: string): string {
  const at = value.lastIndexOf('@');
  if (at === -1) return JSON.stringify(value);
  const scheme = /^[a-z][a-z0-9+.-]*:\/\//i.exec(value)?.[0] ?? '';
  return JSON.stringify(`${scheme}${REDACTED_USERINFO}${value.slice(at)}`);
}

/** A proxy URL for logs and messages: its credentials replaced by `***`. */
export function redactProxyUrl(url: URL): string {
  if (!url.username && !url.password) return url.origin;
  return `${url.protocol}//${REDACTED_USERINFO}@${url.host}`;
}
