/** The admin app on a temp unix socket, bound as the daemon binds it, with a scriptable dispatcher. */
import { mkdtemp, rm } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { pino, type Logger } from 'pino';
import { EventBus } from '../../../src/engine/events.js';
import { createMetrics, type Metrics } from '../../../src/metrics/metrics.js';
import type { Dispatcher } from '../../../src/rpc/dispatcher.js';
import { createAdminApp, type AppOptions } from '../../../src/server/app.js';
import { listenUnix } from '../../../src/server/socket.js';

export interface Harness {
  socket: string;
  events: EventBus;
  metrics: Metrics;
  app: ReturnType<typeof createAdminApp>;
  /** `agentd_http_connections_closed_total{listener="socket", reason}`. */
  closed(reason: string): Promise<number>;
  close(): Promise<void>;
}

export async function serveAdmin(
  handleText: Dispatcher['handleText'],
  options: Partial<AppOptions> = {},
  logger: Logger = pino({ level: 'silent' }),
  /** Hooks and routes to add before the app is ready (fastify refuses them after). */
  beforeReady?: (app: ReturnType<typeof createAdminApp>) => void,
): Promise<Harness> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'agentd-admin-'));
  const metrics = createMetrics({ version: 'test', collectDefaults: false });
  const events = new EventBus();
  const app = createAdminApp({
    dispatcher: { handle: async () => null, handleText, refused: () => undefined },
    events,
    metrics,
    logger,
    readiness: () => ({ ready: true, reasons: [] }),
    openapi: () => ({}),
    currentOperationEvents: () => [],
    ...options,
  });
  beforeReady?.(app);
  await app.ready();
  const socket = path.join(dir, 'admin.sock');
  await listenUnix(app.server, socket, 0o600, null);
  return {
    socket,
    events,
    metrics,
    app,
    async closed(reason) {
      const values = (await metrics.httpConnectionsClosed.get()).values;
      return values.find((v) => v.labels.listener === 'socket' && v.labels.reason === reason)?.value ?? 0;
    },
    async close() {
      await app.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** A raw connection to `socket`, with what it received and a promise of its close. */
export async function rawConnection(
  socket: string,
): Promise<{ sock: net.Socket; received: () => string; closed: Promise<void> }> {
  const sock = net.connect(socket);
  let text = '';
  sock.on('data', (c: Buffer) => (text += c.toString('utf8')));
  sock.on('error', () => undefined);
  const closed = new Promise<void>((resolve) => sock.once('close', () => resolve()));
  await new Promise<void>((resolve, reject) => {
    sock.once('connect', resolve);
    sock.once('error', reject);
  });
  return { sock, received: () => text, closed };
}
