/** One HTTP request over a unix socket (node:http), for readiness polls and one-off fetches. */
import http from 'node:http';

export interface UnixResponse {
  status: number;
  body: string;
}

export function requestUnix(
  socketPath: string,
  method: 'GET' | 'POST',
  path: string,
  body?: string,
): Promise<UnixResponse> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        socketPath,
        method,
        path,
        headers: body === undefined ? {} : { 'content-type': 'application/json' },
        timeout: 5000,
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`${method} ${path} on ${socketPath}: no answer in 5 s`)));
    req.on('error', reject);
    req.end(body);
  });
}

/** Poll `path` until it answers 200; throws after `timeoutMs` with the last failure. */
export async function waitFor200(socketPath: string, path: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = 'no attempt';
  while (Date.now() < deadline) {
    try {
      const res = await requestUnix(socketPath, 'GET', path);
      if (res.status === 200) return;
      last = `HTTP ${res.status}: ${res.body.slice(0, 200)}`;
    } catch (err) {
      last = err instanceof Error ? err.message : String(err);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`GET ${path} on ${socketPath} did not answer 200 within ${timeoutMs} ms: ${last}`);
}
