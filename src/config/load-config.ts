/**
 * Resolve the daemon configuration from its four sources. Flags > env > file > defaults; the
 * result is frozen. Errors name the option, its source, the expectation and the value received.
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { LineCounter, isMap, isScalar, parseDocument } from 'yaml';
import type * as z from 'zod';
import { InvalidConfigError } from '../errors.js';
import { proxyFromEnv } from './proxy.js';
import {
  DAEMON_OPTIONS,
  DEFAULT_CONFIG_FILE,
  DEFAULT_PID_FILE,
  DEFAULT_SOCKET,
  DEFAULT_REGISTRY_AUTH_FILE,
  DEFAULT_STATE_DIR,
  MAX_SOCKET_PATH_BYTES,
  SIM_DIR,
  daemonConfigSchema,
  type DaemonConfig,
  type DaemonConfigInput,
} from './daemon-config.js';

type OptionKey = keyof DaemonConfigInput;
type Source = 'flag' | 'env' | 'file';

export interface LoadConfigInput {
  /** Values given as flags (only those the user actually passed). */
  flags: Partial<Record<OptionKey, unknown>> & { config?: string };
  env: NodeJS.ProcessEnv;
  /** Working directory for relative paths and the `--sim` directory. */
  cwd: string;
  /** Whether stdout is a terminal (pretty logs by default). */
  isTTY: boolean;
  /** The file read when neither --config nor AGENTD_CONFIG is given, if it exists (tests point it elsewhere). */
  defaultConfigFile?: string;
}

/** Where a value came from, to start the message about it (`<file>: <key>` for the file). */
function describeSource(key: OptionKey, source: Source | undefined, file: string | null): string {
  const meta = DAEMON_OPTIONS[key];
  if (source === 'flag') return `invalid ${meta.flag}`;
  if (source === 'env') return `invalid ${meta.flag} (from env ${meta.env})`;
  if (source === 'file') return `${file ?? 'config file'}: ${key}`;
  return `invalid ${meta.flag} (its default)`;
}

/** How an option was given, as the user wrote it: `--host systemd`, `AGENTD_SIM=1`, `host: systemd in <file>`. */
function given(
  key: OptionKey,
  sources: ReadonlyMap<string, Source>,
  merged: Record<string, unknown>,
  file: string | null,
): string {
  const meta = DAEMON_OPTIONS[key];
  const value = merged[key];
  const text = typeof value === 'string' ? value : JSON.stringify(value);
  const source = sources.get(key);
  if (source === 'env') return `${meta.env}=${text}`;
  if (source === 'file') return `${key}: ${text} in ${file ?? 'the config file'}`;
  return value === true ? meta.flag : `${meta.flag} ${text}`;
}

/** A value as a message shows it: strings quoted, lists and mappings said so, no value said so. */
function describeValue(value: unknown): string {
  if (value === null || value === undefined) return 'no value';
  const json = JSON.stringify(value);
  const shown = json.length > 80 ? `${json.slice(0, 77)}...` : json;
  if (Array.isArray(value)) return `a list ${shown}`;
  if (typeof value === 'object') return `a mapping ${shown}`;
  return shown;
}

/**
 * What is wrong with a value. The schema's own messages where they say what was expected
 * (formats, ranges); for a value of the wrong kind (a list, a mapping, no value, a word out
 * of a set) what the option takes.
 */
function issueMessage(issue: z.core.$ZodIssue, key: OptionKey): string {
  const expects = `expected ${DAEMON_OPTIONS[key].expects}`;
  if (issue.code === 'custom' || issue.code === 'invalid_format') return issue.message;
  if (issue.code === 'invalid_union') {
    // A branch that took the value's kind and then refused it says most (a string that is not
    // a duration); a value no branch takes (a list) gets what the option takes.
    const specific = issue.errors.flat().find((i) => i.code === 'custom' || i.code === 'invalid_format');
    return specific?.message ?? expects;
  }
  return expects;
}

/** The option `key` was probably meant to be: same letters ignoring case, - and _, or a typo away. */
function closestOption(key: string): string | null {
  const plain = (s: string): string => s.toLowerCase().replace(/[-_]/g, '');
  const options = Object.keys(DAEMON_OPTIONS);
  const same = options.find((o) => plain(o) === plain(key));
  if (same) return same;
  let best: { option: string; distance: number } | null = null;
  for (const option of options) {
    const distance = editDistance(plain(key), plain(option));
    // A typo or two in a long name; short names differ from everything by two letters.
    const allowed = Math.min(2, Math.floor(option.length / 4));
    if (distance <= allowed && (best === null || distance < best.distance)) best = { option, distance };
  }
  return best?.option ?? null;
}

function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      row[j] = Math.min(
        (previous[j] as number) + 1,
        (row[j - 1] as number) + 1,
        (previous[j - 1] as number) + (a[i - 1] === b[j - 1] ? 0 : 1),
      );
    }
    previous = row;
  }
  return previous[b.length] as number;
}

function unknownKey(file: string, key: string): string {
  const closest = closestOption(key);
  return `${file}: ${key}: unknown key${closest ? `; did you mean ${closest}?` : ''} (the keys are the flags' names in camelCase, such as socketGroup)`;
}

/** The YAML parser's message without the position and excerpt it appends (the line says where). */
function yamlMessage(message: string): string {
  return (message.split('\n')[0] ?? message).replace(/ at line \d+, column \d+:?$/, '');
}

function readConfigFile(file: string): Record<string, unknown> {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new InvalidConfigError(`--config ${file}: cannot read the file: ${(err as Error).message}`, {
      cause: err,
    });
  }
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, { lineCounter });
  const yamlError = doc.errors[0];
  if (yamlError) {
    const at = lineCounter.linePos(yamlError.pos[0]);
    if (yamlError.code === 'DUPLICATE_KEY') {
      const key = /^[^\s:#]+/.exec(text.slice(yamlError.pos[0]))?.[0] ?? 'a key';
      throw new InvalidConfigError(`${file}: ${key}: given twice (line ${at.line}); give each key once`, {
        cause: yamlError,
      });
    }
    // An error past the last character (a bracket or quote never closed) is at the end, not
    // on the empty line after it.
    const where =
      yamlError.pos[0] >= text.trimEnd().length
        ? 'at the end of the file'
        : `line ${at.line}, column ${at.col}`;
    throw new InvalidConfigError(`${file}: ${where}: not valid YAML: ${yamlMessage(yamlError.message)}`, {
      cause: yamlError,
    });
  }
  const contents = doc.contents;
  if (contents === null || (isScalar(contents) && contents.value === null)) return {};
  if (!isMap(contents)) {
    const got = isScalar(contents) ? `a ${typeof contents.value}` : 'a list';
    throw new InvalidConfigError(
      `${file}: expected a YAML mapping of options (key: value lines such as logLevel: info), got ${got}`,
    );
  }
  for (const pair of contents.items) {
    if (!isScalar(pair.key)) {
      const node = pair.key as { range?: [number, number, number] } | null;
      const line = node?.range ? ` (line ${lineCounter.linePos(node.range[0]).line})` : '';
      throw new InvalidConfigError(
        `${file}: expected option names as keys, got a ${isMap(pair.key) ? 'mapping' : 'list'} as a key${line}`,
      );
    }
  }
  const values = doc.toJS() as Record<string, unknown>;
  // A number in the file means what the same text means as a flag: `socketMode: 0660` is octal
  // 0660 (YAML 1.2 would read decimal 660, and `0440` would silently become mode 0670), and
  // `shutdownGrace: 30` is 30 seconds (not 30 ms).
  for (const pair of contents.items) {
    if (isScalar(pair.key) && isScalar(pair.value) && typeof pair.value.value === 'number') {
      const source = pair.value.source;
      if (typeof source === 'string' && source !== '') values[String(pair.key.value)] = source;
    }
  }
  return values;
}

/** Merge, validate and resolve the daemon configuration. Throws InvalidConfigError on any bad value. */
export function loadDaemonConfig(input: LoadConfigInput): DaemonConfig {
  const { flags, env, cwd } = input;
  const explicitFile = flags.config ?? env.AGENTD_CONFIG;
  const defaultFile = input.defaultConfigFile ?? DEFAULT_CONFIG_FILE;
  // --sim is the try-out mode: the host's own config file (its socket, state directory or root)
  // has no part in it, or a try-out on an installed host would use the production paths. A file
  // named with --config is still read.
  const simAsked =
    flags.sim === true || daemonConfigSchema.shape.sim.safeParse(env[DAEMON_OPTIONS.sim.env]).data;
  const configFile = explicitFile
    ? path.resolve(cwd, explicitFile)
    : !simAsked && existsSync(defaultFile)
      ? defaultFile
      : null;
  const fileValues = configFile ? readConfigFile(configFile) : {};

  const merged: Record<string, unknown> = {};
  const sources = new Map<string, Source>();
  for (const [key, value] of Object.entries(fileValues)) {
    merged[key] = value;
    sources.set(key, 'file');
  }
  for (const key of Object.keys(DAEMON_OPTIONS) as OptionKey[]) {
    const envValue = env[DAEMON_OPTIONS[key].env];
    if (envValue !== undefined && envValue !== '') {
      merged[key] = envValue;
      sources.set(key, 'env');
    }
    const flagValue = flags[key];
    if (flagValue !== undefined) {
      merged[key] = flagValue;
      sources.set(key, 'flag');
    }
  }

  const parsed = daemonConfigSchema.safeParse(merged);
  if (!parsed.success) {
    const lines = parsed.error.issues.flatMap((issue) => {
      if (issue.code === 'unrecognized_keys')
        return issue.keys.map((k) => unknownKey(configFile ?? 'config file', k));
      const key = issue.path[0] as OptionKey;
      const where = describeSource(key, sources.get(key), configFile);
      return [`${where}: ${issueMessage(issue, key)}, got ${describeValue(merged[key])}`];
    });
    throw new InvalidConfigError(lines.join('\n'), { data: { issues: parsed.error.issues } });
  }
  const c = parsed.data;
  const sim = c.sim;
  const simDir = path.resolve(cwd, SIM_DIR);
  const abs = (p: string | undefined, simDefault: string, realDefault: string): string =>
    p !== undefined ? path.resolve(cwd, p) : sim ? path.join(simDir, simDefault) : realDefault;

  let metricsAddress: DaemonConfig['metricsAddress'] = null;
  if (c.metricsAddress) {
    const i = c.metricsAddress.lastIndexOf(':');
    metricsAddress = {
      host: c.metricsAddress.slice(0, i).replace(/^\[|\]$/g, ''),
      port: Number(c.metricsAddress.slice(i + 1)),
    };
  }
  // --sim is the try-out mode on the simulated host: with --host systemd it would run real
  // host commands against the try-out's paths.
  if (sim && c.host === 'systemd') {
    const why =
      'contradict each other: --sim is the try-out mode on the simulated host (--host sim); leave out --sim to run on systemd';
    throw new InvalidConfigError(
      sources.get('sim') === 'file' && sources.get('host') === 'file'
        ? `${configFile}: sim: ${String(merged.sim)} and host: systemd ${why}`
        : `${given('sim', sources, merged, configFile)} and ${given('host', sources, merged, configFile)} ${why}`,
    );
  }
  const host = c.host ?? (sim ? 'sim' : 'systemd');
  const socket = abs(c.socket, 'agentd.sock', DEFAULT_SOCKET);
  // bind(2) takes at most 107 bytes of path: a longer one would fail (or be cut short) only
  // once the daemon has created its directories.
  const socketBytes = Buffer.byteLength(socket);
  if (socketBytes > MAX_SOCKET_PATH_BYTES) {
    throw new InvalidConfigError(
      `${describeSource('socket', sources.get('socket'), configFile)}: the path ${socket} is ${socketBytes} bytes long, expected at most ${MAX_SOCKET_PATH_BYTES} (the limit of a unix socket path, 108 bytes with its final NUL); choose a shorter path`,
    );
  }
  return Object.freeze({
    configFile,
    socket,
    socketMode: c.socketMode,
    socketGroup: c.socketGroup ?? null,
    pidFile: abs(c.pidFile, 'agentd.pid', DEFAULT_PID_FILE),
    stateDir: abs(c.stateDir, 'state', DEFAULT_STATE_DIR),
    root: abs(c.root, 'root', '/'),
    host,
    sim,
    metricsAddress,
    kubeconfig: c.kubeconfig ? path.resolve(cwd, c.kubeconfig) : null,
    registryAuthFile: abs(c.registryAuthFile, 'registry-auth.json', DEFAULT_REGISTRY_AUTH_FILE),
    machineName: c.machineName ?? null,
    watch: c.watch ?? null,
    repair: c.repair,
    fleet: c.fleet,
    fleetNamespace: c.fleetNamespace,
    crdGroup: c.crdGroup,
    shutdownGraceMs: c.shutdownGrace,
    machineStartTimeoutMs: c.machineStartTimeout,
    verifyTimeoutMs: c.verifyTimeout,
    switchOrder: c.switchOrder,
    transferLimits: Object.freeze({
      minRateBytesPerSecond: c.downloadMinRate,
      rateWindowMs: c.downloadRateWindow,
      requestTimeoutMs: c.outboundTimeout,
    }),
    logLevel: c.logLevel,
    logFormat: c.logFormat ?? (input.isTTY ? 'pretty' : 'json'),
    proxy: proxyFromEnv(env),
  });
}
