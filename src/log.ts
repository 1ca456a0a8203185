/**
 * The daemon's logger: pino JSON on stdout (journald), pretty on a terminal. Secrets are
 * redacted by path wherever they may appear in a logged object.
 */
import { pino, type Logger } from 'pino';

/** Paths that must never reach a log line. */
export const REDACT_PATHS = [
  'req.headers.authorization',
  'headers.authorization',
  'authorization',
  'token',
  'bootstrapToken',
  '*.BootstrapToken',
  '*.*.BootstrapToken',
  '*.*.*.BootstrapToken',
  'Kubelet.Auth.BootstrapToken',
  'config.Kubelet.Auth.BootstrapToken',
  'params.config.Kubelet.Auth.BootstrapToken',
  '*.caKey',
  'caKey',
];

export interface LoggerOptions {
  level: string;
  format: 'json' | 'pretty';
  /** Destination stream (tests pass a buffer); stdout by default. */
  destination?: NodeJS.WritableStream;
}

/**
 * Build the logger. `pretty` formats in this thread with pino-pretty as a stream, never through a
 * pino transport: transports load their target in a worker thread by file name, which a bundle
 * (and the release executable, which has no node_modules) cannot offer. pino-pretty is a runtime
 * dependency and part of the bundle, so `pretty` works everywhere or the start fails loudly.
 */
export async function createLogger(options: LoggerOptions): Promise<Logger> {
  const base = {
    level: options.level,
    base: { pid: process.pid },
    redact: { paths: REDACT_PATHS, censor: '[REDACTED]' },
    timestamp: pino.stdTimeFunctions.isoTime,
    // `"level":"info"`, not `30`: a journal read with jq says what it means (docs/operations.md,
    // "Logs"). pino-pretty maps the numbers itself, so `pretty` keeps them.
    ...(options.format === 'json' ? { formatters: { level: (label: string) => ({ level: label }) } } : {}),
  };
  if (options.format === 'pretty') {
    // Loaded only for pretty logs: the JSON path (production) never evaluates it.
    const { PinoPretty } = await import('pino-pretty');
    const stream = PinoPretty({
      colorize: !options.destination && prettyColors(process.env, Boolean(process.stdout.isTTY)),
      destination: options.destination ?? 1,
      sync: true,
    });
    return pino(base, stream);
  }
  return options.destination ? pino(base, options.destination) : pino(base);
}

/** Pretty logs are colored only on a terminal, never with NO_COLOR set to a non-empty value (no-color.org). */
export function prettyColors(env: NodeJS.ProcessEnv, isTTY: boolean): boolean {
  return isTTY && !env.NO_COLOR;
}

export type { Logger };

/**
 * A child of `logger` with the `bindings` it does not bind yet. pino appends bindings, so a key
 * bound twice (a parent's `component` and a child's) would appear twice in every line, which
 * JSON tools read as one value or reject; a key already bound keeps its first value.
 */
export function childLogger(logger: Logger, bindings: Record<string, unknown>): Logger {
  const bound = logger.bindings();
  const fresh = Object.fromEntries(Object.entries(bindings).filter(([key]) => !(key in bound)));
  return Object.keys(fresh).length > 0 ? logger.child(fresh) : logger;
}
