/** One HTTP request through the fake, in the real server's order: log, authenticate, authorize, faults, route. */
import type http from 'node:http';
import type { TokenAuth } from './auth.js';
import type { Faults } from './faults.js';
import { parseRequestInfo } from './resources.js';
import { dispatch } from './router.js';
import type { RouterContext } from './router.js';
import { badRequest, HttpError, resourceNotFound, statusObject } from './status.js';
import type { RequestInfo, RequestRecord } from './types.js';

/** A logged request; `info` is undefined for paths that name no API resource. */
export interface LoggedRequest {
  record: RequestRecord;
  info: RequestInfo | undefined;
}

export interface RequestDeps {
  baseUrl: string;
  auth: TokenAuth;
  faults: Faults;
  ctx: RouterContext;
  log: LoggedRequest[];
}

async function readBody(req: http.IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

function send(
  res: http.ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  if (res.headersSent) {
    res.end();
    return;
  }
  res.writeHead(status, { ...headers, 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

export async function handleRequest(
  deps: RequestDeps,
  req: http.IncomingMessage,
  res: http.ServerResponse,
): Promise<void> {
  const url = new URL(req.url ?? '/', deps.baseUrl);
  const method = req.method ?? 'GET';
  const info = parseRequestInfo(method, url);
  const contentType = req.headers['content-type'];
  const record: RequestRecord = {
    method,
    path: url.pathname,
    query: url.search,
    verb: info?.verb ?? '',
    resource:
      info === undefined ? '' : info.subresource ? `${info.resource}/${info.subresource}` : info.resource,
    name: info?.name,
    contentType,
    body: undefined,
    status: 0,
  };
  deps.log.push({ record, info });
  try {
    const text = await readBody(req);
    if (text !== '') {
      try {
        record.body = JSON.parse(text);
      } catch {
        throw badRequest(`the body is not valid JSON: ${text.slice(0, 80)}`);
      }
    }
    // The real server's order: authenticate, authorize (from the URL alone), then route.
    const identity = deps.auth.authenticate(req);
    record.user = identity.user;
    if (info === undefined) throw resourceNotFound();
    deps.auth.authorize(identity, info);
    const fault = await deps.faults.apply(info);
    if (fault) throw fault;
    const result = dispatch(deps.ctx, info, record.body, contentType, res);
    if (result === 'streamed') record.status = 200;
    else {
      record.status = result.status;
      send(res, result.status, result.body);
    }
  } catch (err) {
    const httpErr =
      err instanceof HttpError
        ? err
        : new HttpError(500, statusObject(500, 'InternalError', `fake-kube bug: ${String(err)}`));
    record.status = httpErr.status;
    send(res, httpErr.status, httpErr.body, httpErr.headers);
  }
}
