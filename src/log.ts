/**
 * The daemon's logger: pino JSON on stdout (journald), pretty on a terminal. Secrets are
 * redacted by path wherever they may appear in a logged object.
 */
import { createRequire } from 'node:module';
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

export function createLogger(options: LoggerOptions): Logger {
  const base = {
    level: options.level,
    base: { pid: process.pid },
    redact: { paths: REDACT_PATHS, censor: '[REDACTED]' },
    timestamp: pino.stdTimeFunctions.isoTime,
  };
  if (options.format === 'pretty' && !options.destination && prettyAvailable()) {
    return pino({ ...base, transport: { target: 'pino-pretty', options: { colorize: true } } });
  }
  return options.destination ? pino(base, options.destination) : pino(base);
}

export type { Logger };

/** pino-pretty is a development convenience; without it (a production install) logs stay JSON. */
function prettyAvailable(): boolean {
  try {
    createRequire(import.meta.url).resolve('pino-pretty');
    return true;
  } catch {
    return false;
  }
}

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
