/** Bearer-token authentication (401) and a small RBAC model for restricted tokens (403). */
import type { IncomingMessage } from 'node:http';
import { forbidden, unauthorized } from './status.js';
import type { FakeRole, RequestInfo } from './types.js';

export interface Identity {
  user: string;
  role: FakeRole;
}

export class TokenAuth {
  private readonly tokens = new Map<string, Identity>();

  set(token: string, role: FakeRole): void {
    const user =
      role === 'admin' ? 'system:admin' : (role.user ?? `system:bootstrap:${token.split('.')[0] ?? 'user'}`);
    this.tokens.set(token, { user, role });
  }

  /** Who sent the request; a missing or unknown bearer token is a 401. */
  authenticate(req: IncomingMessage): Identity {
    const header = req.headers.authorization ?? '';
    const m = /^Bearer\s+(\S+)$/i.exec(header);
    const identity = m?.[1] === undefined ? undefined : this.tokens.get(m[1]);
    if (identity === undefined) throw unauthorized();
    return identity;
  }

  /** Check the request against the identity's rules; not allowed is a 403 naming verb and resource. */
  authorize(identity: Identity, info: RequestInfo): void {
    if (identity.role === 'admin') return;
    const resource = info.subresource === undefined ? info.resource : `${info.resource}/${info.subresource}`;
    const name = requestedName(info);
    const allowed = identity.role.rules.some(
      (rule) =>
        (rule.verbs.includes('*') || rule.verbs.includes(info.verb)) &&
        (rule.resources.includes('*') || rule.resources.includes(resource)) &&
        (rule.apiGroups === undefined ||
          rule.apiGroups.includes('*') ||
          rule.apiGroups.includes(info.group)) &&
        (rule.namespace === undefined || rule.namespace === info.namespace) &&
        (rule.resourceNames === undefined || (name !== undefined && rule.resourceNames.includes(name))),
    );
    if (!allowed) throw forbidden(identity.user, info.verb, info.group, resource, info.name, info.namespace);
  }
}

/** The object name RBAC authorizes on: the URL's, or a list/watch's `metadata.name=` field selector. */
function requestedName(info: RequestInfo): string | undefined {
  if (info.name !== undefined) return info.name;
  if (info.verb !== 'list' && info.verb !== 'watch') return undefined;
  const selector = info.query.get('fieldSelector') ?? '';
  const m = /^metadata\.name=([^,]+)$/.exec(selector);
  return m?.[1];
}
