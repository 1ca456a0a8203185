/**
 * Resolve the daemon configuration from its four sources. Flags > env > file > defaults; the
 * result is frozen. Errors name the option, its source, the expectation and the value received.
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { isMap, isScalar, parseDocument } from 'yaml';
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

function describeSource(key: OptionKey, source: Source, file: string | null): string {
  const meta = DAEMON_OPTIONS[key];
  if (source === 'flag') return meta.flag;
  if (source === 'env') return `${meta.flag} (from env ${meta.env})`;
  return `${meta.flag} (from ${file ?? 'config file'} key ${key})`;
}

function issueMessage(issue: z.core.$ZodIssue): string {
  if (issue.code === 'invalid_union') {
    // The most specific branch message: prefer custom/format messages over "expected string".
    const nested = issue.errors.flat();
    const specific = nested.find((i) => i.code !== 'invalid_type') ?? nested[0];
    if (specific) return specific.message;
  }
  if (issue.code === 'unrecognized_keys') return `unknown option(s) ${issue.keys.join(', ')}`;
  return issue.message;
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
  const doc = parseDocument(text);
  const yamlError = doc.errors[0];
  if (yamlError) {
    throw new InvalidConfigError(`--config ${file}: not valid YAML: ${yamlError.message}`, {
      cause: yamlError,
    });
  }
  const contents = doc.contents;
  if (contents === null || (isScalar(contents) && contents.value === null)) return {};
  if (!isMap(contents)) {
    const got = isScalar(contents) ? typeof contents.value : 'a list';
    throw new InvalidConfigError(`--config ${file}: expected a YAML mapping of options, got ${got}`);
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
    const lines = parsed.error.issues.map((issue) => {
      const key = issue.path[0] as OptionKey | undefined;
      if (issue.code === 'unrecognized_keys' || key === undefined || !(key in DAEMON_OPTIONS)) {
        return `${configFile ?? 'config'}: ${issueMessage(issue)}`;
      }
      const received = merged[key];
      return `invalid ${describeSource(key, sources.get(key) ?? 'file', configFile)}: ${issueMessage(issue)}, got ${JSON.stringify(received)}`;
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
  const host = c.host ?? (sim ? 'sim' : 'systemd');
  return Object.freeze({
    configFile,
    socket: abs(c.socket, 'agentd.sock', DEFAULT_SOCKET),
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
    logLevel: c.logLevel,
    logFormat: c.logFormat ?? (input.isTTY ? 'pretty' : 'json'),
    proxy: proxyFromEnv(env),
  });
}
