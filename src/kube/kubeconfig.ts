/**
 * Kubeconfig files: agentd's `--kubeconfig` (client.ts), and the operator's kubeconfig that
 * `agentctl fleet pause|resume` act with (docs/fleet.md, "Pause, halt and resume"), found as
 * kubectl finds it: `--kubeconfig`, else the files `KUBECONFIG` lists (merged, the first to name
 * a cluster, user or context wins; files that do not exist are skipped), else `~/.kube/config`;
 * `--context` overrides the current context. Every error names the file and what is wrong with it.
 */
import { readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { describeError, InvalidConfigError } from '../errors.js';

/**
 * Why the text is not a kubeconfig, without the excerpt of the file a YAML error carries: the
 * lines around the error may hold a token or a key, and the message is printed and logged.
 */
function describeParseError(err: unknown): string {
  const e = err as { reason?: unknown; mark?: { line?: unknown; column?: unknown } } | null;
  if (
    typeof e?.reason === 'string' &&
    typeof e.mark?.line === 'number' &&
    typeof e.mark.column === 'number'
  ) {
    return `${e.reason} (line ${e.mark.line + 1}, column ${e.mark.column + 1})`;
  }
  return describeError(err).split('\n')[0] ?? '';
}

/** Read one kubeconfig file; `label` names it in errors (`--kubeconfig /etc/kc`). */
function readKubeconfigFile(file: string, label: string, option: string): KubeConfig {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new InvalidConfigError(`${label}: cannot read it: ${describeError(err)}`, {
      cause: err,
      data: { option, file },
    });
  }
  if (text.trim() === '') {
    throw new InvalidConfigError(`${label}: the file is empty: expected a kubeconfig (kind: Config)`, {
      data: { option, file },
    });
  }
  const kc = new KubeConfig();
  try {
    kc.loadFromString(text);
  } catch (err) {
    throw new InvalidConfigError(`${label}: not a kubeconfig: ${describeParseError(err)}`, {
      cause: err,
      data: { option, file },
    });
  }
  // Relative certificate and key paths are relative to the file, as kubectl reads them.
  kc.makePathsAbsolute(path.dirname(file));
  return kc;
}

const contextNames = (kc: KubeConfig): string =>
  kc.contexts.length === 0 ? 'it has none' : `it has ${kc.contexts.map((c) => c.name).join(', ')}`;

/**
 * Check that the context in use names a cluster and a user the files define; `label` names the
 * files, `option` the flag for the error data.
 */
function validateCurrentContext(kc: KubeConfig, label: string, option: string, files: string[]): void {
  const name = kc.getCurrentContext();
  const ctx = name ? kc.getContextObject(name) : null;
  const data = { option, file: files.join(path.delimiter) };
  if (!name) {
    throw new InvalidConfigError(`${label}: no current-context: pass --context NAME (${contextNames(kc)})`, {
      data,
    });
  }
  if (ctx === null) {
    throw new InvalidConfigError(`${label}: no context named ${JSON.stringify(name)} (${contextNames(kc)})`, {
      data: { ...data, context: name },
    });
  }
  if (kc.getCluster(ctx.cluster) === null) {
    throw new InvalidConfigError(
      `${label}: context ${JSON.stringify(name)} names cluster ${JSON.stringify(ctx.cluster)}, which is not defined there`,
      { data: { ...data, context: name } },
    );
  }
  if (kc.getUser(ctx.user) === null) {
    throw new InvalidConfigError(
      `${label}: context ${JSON.stringify(name)} names user ${JSON.stringify(ctx.user)}, which is not defined there`,
      { data: { ...data, context: name } },
    );
  }
}

/** agentd's `--kubeconfig FILE`: loaded whole, its current context naming a cluster and a user. */
export function loadKubeconfig(file: string): KubeConfig {
  const label = `--kubeconfig ${file}`;
  const kc = readKubeconfigFile(file, label, 'kubeconfig');
  validateCurrentContext(kc, label, 'kubeconfig', [file]);
  return kc;
}

/** Where an operator's kubeconfig came from. */
export type KubeconfigSource = '--kubeconfig' | 'KUBECONFIG' | '~/.kube/config';

export interface OperatorKubeconfigOptions {
  /** `--kubeconfig PATH`: this file only; it must exist. */
  kubeconfig?: string;
  /** `--context NAME`: instead of the files' current-context. */
  context?: string;
  /** Where `KUBECONFIG` and `HOME` are read. */
  env: NodeJS.ProcessEnv;
  /** The home directory when `HOME` is not set (os.homedir()). */
  homedir: string;
  /** Relative paths (of `--kubeconfig`, of `KUBECONFIG`'s entries) are taken from here. */
  cwd: string;
}

export interface OperatorKubeconfig {
  kc: KubeConfig;
  source: KubeconfigSource;
  /** The files read, in order. */
  files: string[];
  /** The context in use, and its cluster's server (both safe to print). */
  context: string;
  server: string;
}

function exists(file: string): boolean {
  try {
    statSync(file);
    return true;
  } catch (err) {
    // A file that is there but cannot be looked at is not skipped: reading it says why.
    return (err as NodeJS.ErrnoException).code !== 'ENOENT';
  }
}

/** Merge as kubectl does: the first file to name a cluster, user or context wins, and its current-context. */
function merge(configs: KubeConfig[]): KubeConfig {
  const byName = <T extends { name: string }>(lists: T[][]): T[] => {
    const seen = new Map<string, T>();
    for (const item of lists.flat()) if (!seen.has(item.name)) seen.set(item.name, item);
    return [...seen.values()];
  };
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: byName(configs.map((c) => c.clusters)),
    users: byName(configs.map((c) => c.users)),
    contexts: byName(configs.map((c) => c.contexts)),
    currentContext: configs.map((c) => c.getCurrentContext()).find((name) => Boolean(name)) ?? '',
  });
  return kc;
}

/**
 * The operator's kubeconfig for `agentctl fleet pause|resume`, found as kubectl finds it (this
 * file's comment). Throws InvalidConfigError naming the file, or the places looked at when there is none.
 */
export function loadOperatorKubeconfig(o: OperatorKubeconfigOptions): OperatorKubeconfig {
  let source: KubeconfigSource;
  let files: string[];
  let configs: KubeConfig[];
  let label: string;
  let option = 'kubeconfig';
  const list = (o.env.KUBECONFIG ?? '').split(path.delimiter).filter((f) => f !== '');
  if (o.kubeconfig !== undefined) {
    source = '--kubeconfig';
    files = [path.resolve(o.cwd, o.kubeconfig)];
    label = `--kubeconfig ${o.kubeconfig}`;
    configs = [readKubeconfigFile(files[0] as string, label, option)];
  } else if (list.length > 0) {
    source = 'KUBECONFIG';
    option = 'KUBECONFIG';
    files = list.map((f) => path.resolve(o.cwd, f)).filter(exists);
    if (files.length === 0) {
      throw new InvalidConfigError(
        `KUBECONFIG=${o.env.KUBECONFIG}: ${list.length === 1 ? 'the file does not exist' : 'none of these files exists'}; pass --kubeconfig FILE`,
        { data: { option, file: o.env.KUBECONFIG } },
      );
    }
    configs = files.map((f) => readKubeconfigFile(f, `KUBECONFIG file ${f}`, option));
    label = files.length === 1 ? `KUBECONFIG file ${files[0]}` : `the KUBECONFIG files ${files.join(', ')}`;
  } else {
    source = '~/.kube/config';
    const home = o.env.HOME || o.homedir;
    const file = path.join(home, '.kube', 'config');
    if (!exists(file)) {
      throw new InvalidConfigError(
        `no kubeconfig: no --kubeconfig, KUBECONFIG is not set, and ${file} does not exist; pass your kubeconfig with --kubeconfig FILE`,
        { data: { option, file } },
      );
    }
    files = [file];
    label = file;
    configs = [readKubeconfigFile(file, label, option)];
  }
  const kc = configs.length === 1 ? (configs[0] as KubeConfig) : merge(configs);
  if (o.context !== undefined) {
    if (kc.getContextObject(o.context) === null) {
      throw new InvalidConfigError(
        `--context ${o.context}: ${label} has no such context (${contextNames(kc)})`,
        {
          data: { option: 'context', context: o.context, file: files.join(path.delimiter) },
        },
      );
    }
    kc.setCurrentContext(o.context);
  }
  validateCurrentContext(kc, label, option, files);
  return {
    kc,
    source,
    files,
    context: kc.getCurrentContext(),
    server: kc.getCurrentCluster()?.server ?? '',
  };
}
