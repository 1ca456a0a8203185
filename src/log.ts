/**
 * The daemon's logger: pino JSON on stdout (journald), pretty on a terminal. Every line passes
 * the one redactor (src/config/redact.ts): secret fields at any depth (bootstrap tokens, CA keys,
 * Authorization headers, exec credential args and env), URL userinfo and echoed credentials in
 * any string, the message included.
 */
import { pino, type Logger, type LoggerOptions as PinoOptions } from 'pino';
import { redactDeep, redactText } from './config/redact.js';

/** The redacting half of the logger's options (tests build loggers of their own with it). */
export const REDACTING: Pick<PinoOptions, 'formatters' | 'hooks'> = {
  formatters: { log: (obj) => redactDeep(obj) },
  hooks: {
    logMethod(args, method) {
      const redacted = args.map((a: unknown) => (typeof a === 'string' ? redactText(a) : a));
      method.apply(this, redacted as Parameters<typeof method>);
    },
  },
};

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
    ...REDACTING,
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: {
      ...REDACTING.formatters,
      // `"level":"info"`, not `30`: a journal read with jq says what it means (docs/operations.md,
      // "Logs"). pino-pretty maps the numbers itself, so `pretty` keeps them.
      ...(options.format === 'json' ? { level: (label: string) => ({ level: label }) } : {}),
    },
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
