/** Parsing `WWW-Authenticate` challenges (RFC 7235) for the registry's anonymous token flow. */

/** A parsed challenge: the scheme (lowercased) and its parameters (keys lowercased). */
export interface AuthChallenge {
  scheme: string;
  params: Record<string, string>;
}

/**
 * Parse the first challenge of a `WWW-Authenticate` value, e.g.
 * `Bearer realm="https://auth.example/token",service="registry",scope="repository:x:pull"`.
 * Returns undefined for an empty or unparsable header.
 */
export function parseAuthChallenge(header: string | undefined): AuthChallenge | undefined {
  if (!header) return undefined;
  const match = /^\s*([A-Za-z][A-Za-z0-9!#$%&'*+.^_`|~-]*)\s*(.*)$/s.exec(header);
  if (!match?.[1]) return undefined;
  const params: Record<string, string> = {};
  const rest = match[2] ?? '';
  // key=token or key="quoted \" string", separated by commas
  const paramRe = /\s*([A-Za-z0-9_-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,"]*))\s*(?:,|$)/gy;
  let m: RegExpExecArray | null;
  while (paramRe.lastIndex < rest.length && (m = paramRe.exec(rest)) !== null) {
    const key = (m[1] ?? '').toLowerCase();
    if (key in params) break; // a second challenge starts; only the first one is used
    params[key] = m[2] !== undefined ? m[2].replace(/\\(.)/g, '$1') : (m[3] ?? '');
  }
  return { scheme: match[1].toLowerCase(), params };
}
