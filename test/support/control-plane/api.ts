/**
 * The tests' own client of the real API server: HTTPS with the control plane's CA, as the admin
 * (client certificate, O=system:masters) or with a bearer token. Plain JSON requests; no
 * Kubernetes client library, so that what agentd's client does is never what judges it.
 */
import https from 'node:https';

export interface ApiAnswer<T = KubeJson> {
  status: number;
  body: T;
  text: string;
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type KubeJson = Record<string, any>;

export interface ApiClientOptions {
  server: string;
  caPem: string;
  cert?: string;
  key?: string;
  token?: string;
}

export interface ApiClient {
  request<T = KubeJson>(
    method: string,
    path: string,
    body?: unknown,
    contentType?: string,
  ): Promise<ApiAnswer<T>>;
  /** GET, failing unless 200. */
  get<T = KubeJson>(path: string): Promise<T>;
  /** POST a new object, failing unless 201 (or 200). */
  create<T = KubeJson>(path: string, obj: unknown): Promise<T>;
  /** A JSON merge patch, failing unless 200. */
  mergePatch<T = KubeJson>(path: string, patch: unknown): Promise<T>;
  /** PUT, failing unless 200. */
  put<T = KubeJson>(path: string, obj: unknown): Promise<T>;
  /** A watch: calls `onEvent` per line until `stop()`; resolves `ended` when the server ends it. */
  watch(
    path: string,
    onEvent: (e: { type: string; object: KubeJson }) => void,
  ): { stop(): void; ended: Promise<number> };
}

/**
 * A request as kube-apiserver's `apiserver_request_total` names it: `VERB resource[/subresource]`
 * (`LIST pods`, `PATCH nodes/status`), or null for a path that names no resource (`/metrics`).
 */
export function requestKind(method: string, p: string): string | null {
  const parts = new URL(p, 'https://x').pathname.split('/').filter(Boolean);
  let rest: string[];
  if (parts[0] === 'api' && parts.length >= 3) rest = parts.slice(2);
  else if (parts[0] === 'apis' && parts.length >= 4) rest = parts.slice(3);
  else return null;
  if (rest[0] === 'namespaces' && rest.length >= 3) rest = rest.slice(2);
  const [resource, name, subresource] = rest;
  if (resource === undefined) return null;
  const m = method.toUpperCase();
  const verb =
    m === 'GET'
      ? name === undefined
        ? new URL(p, 'https://x').searchParams.get('watch') === 'true'
          ? 'WATCH'
          : 'LIST'
        : 'GET'
      : m === 'DELETE' && name === undefined
        ? 'DELETECOLLECTION'
        : m;
  return `${verb} ${resource}${subresource ? `/${subresource}` : ''}`;
}

export function apiClient(o: ApiClientOptions): ApiClient {
  const base = new URL(o.server);
  const agent = new https.Agent({ ca: o.caPem, cert: o.cert, key: o.key, keepAlive: true, maxSockets: 8 });
  const headers = (): Record<string, string> => (o.token ? { authorization: `Bearer ${o.token}` } : {});
  const request = <T>(
    method: string,
    p: string,
    body?: unknown,
    contentType = 'application/json',
  ): Promise<ApiAnswer<T>> =>
    new Promise((resolve, reject) => {
      const text = body === undefined ? undefined : JSON.stringify(body);
      const req = https.request(
        {
          host: base.hostname,
          port: base.port,
          method,
          path: p,
          agent,
          headers: {
            accept: 'application/json',
            ...headers(),
            ...(text !== undefined ? { 'content-type': contentType } : {}),
            // Always a length: after a bodiless DELETE without one, the next request on the kept
            // connection was answered with a bare "400 Bad Request" by kube-apiserver.
            'content-length': String(Buffer.byteLength(text ?? '')),
          },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => {
            const t = Buffer.concat(chunks).toString('utf8');
            let parsed: unknown = {};
            try {
              parsed = t ? JSON.parse(t) : {};
            } catch {
              parsed = { raw: t };
            }
            resolve({ status: res.statusCode ?? 0, body: parsed as T, text: t });
          });
          res.on('error', reject);
        },
      );
      req.on('error', reject);
      req.end(text);
    });
  const expect = async <T>(
    ok: number[],
    method: string,
    p: string,
    body?: unknown,
    ct?: string,
  ): Promise<T> => {
    const res = await request<T>(method, p, body, ct);
    if (!ok.includes(res.status))
      throw new Error(`${method} ${p}: HTTP ${res.status}: ${res.text.slice(0, 2000)}`);
    return res.body;
  };
  return {
    request,
    get: (p) => expect([200], 'GET', p),
    create: (p, obj) => expect([200, 201], 'POST', p, obj),
    mergePatch: (p, patch) => expect([200], 'PATCH', p, patch, 'application/merge-patch+json'),
    put: (p, obj) => expect([200], 'PUT', p, obj),
    watch(p, onEvent) {
      let stopped = false;
      let req: ReturnType<typeof https.request> | null = null;
      const ended = new Promise<number>((resolve) => {
        req = https.request(
          {
            host: base.hostname,
            port: base.port,
            method: 'GET',
            path: p,
            agent: false,
            ca: o.caPem,
            cert: o.cert,
            key: o.key,
            headers: headers(),
          },
          (res) => {
            let buf = '';
            res.on('data', (c: Buffer) => {
              buf += c.toString('utf8');
              let nl: number;
              while ((nl = buf.indexOf('\n')) >= 0) {
                const line = buf.slice(0, nl);
                buf = buf.slice(nl + 1);
                if (line.trim()) onEvent(JSON.parse(line) as { type: string; object: KubeJson });
              }
            });
            res.on('end', () => resolve(res.statusCode ?? 0));
            res.on('error', () => resolve(-1));
          },
        );
        req.on('error', () => resolve(stopped ? 0 : -1));
        req.end();
      });
      return {
        stop() {
          stopped = true;
          (req as ReturnType<typeof https.request> | null)?.destroy();
        },
        ended,
      };
    },
  };
}
