/**
 * Goal-state resolution: from an `update` request and the applied config, the config the
 * target machine must get, and how it differs from what runs now (drift).
 */
import { PreconditionFailedError, InvalidParamsError } from '../errors.js';
import {
  agentConfigSchema,
  REDACTED,
  type AgentConfig,
  type AgentConfigInput,
} from '../config/agent-config.js';
import { redactDeep } from '../config/redact.js';

/** The `set` shorthand of `update`: the fields the Machine CR carries. */
export interface GoalSet {
  kubernetesVersion?: string;
  image?: string;
  nodeLabels?: Record<string, string>;
  registerWithTaints?: string[];
}

export interface GoalRequest {
  config?: AgentConfig;
  set?: GoalSet;
}

/**
 * The target config. `config` replaces the applied one (keeping the applied download overrides
 * when it has none: the upstream agent dropped them, agentd does not); `set` modifies the
 * applied one; neither re-applies the applied one. `fallback` is the base on a node that has
 * not joined (the `--sim` default config), or null.
 */
export function resolveGoal(
  req: GoalRequest,
  applied: AgentConfig | null,
  fallback: AgentConfig | null,
): AgentConfig {
  if (req.config && req.set) throw new InvalidParamsError('update: pass either config or set, not both', []);
  if (req.config) {
    const config = structuredClone(req.config);
    if (config.Downloads === undefined && applied?.Downloads !== undefined)
      config.Downloads = structuredClone(applied.Downloads);
    return config;
  }
  const base = applied ?? fallback;
  if (!base) {
    throw new PreconditionFailedError(
      'the node has not joined yet and has no applied config to start from: pass a full agent config (agentctl update --config FILE)',
    );
  }
  if (!req.set) return structuredClone(base);
  const next: AgentConfigInput = structuredClone(base);
  if (req.set.kubernetesVersion !== undefined) next.Cluster.Version = req.set.kubernetesVersion;
  if (req.set.image !== undefined) next.OCIImage = req.set.image;
  if (req.set.nodeLabels !== undefined) next.Kubelet.Labels = req.set.nodeLabels;
  if (req.set.registerWithTaints !== undefined) next.Kubelet.RegisterWithTaints = req.set.registerWithTaints;
  const parsed = agentConfigSchema.safeParse(next);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => ({
      path: `set→${i.path.join('.')}`,
      message: i.message,
      code: i.code,
    }));
    throw new InvalidParamsError(
      `update: the config after set would be invalid: ${issues[0]?.path}: ${issues[0]?.message}`,
      issues,
    );
  }
  return parsed.data;
}

const SECRET_PATHS = new Set(['Kubelet.Auth.BootstrapToken', 'Kubelet.Auth.ExecCredential']);

/** Canonical JSON (sorted keys) for comparisons that ignore key order. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

export interface ConfigChange {
  path: string;
  from: unknown;
  to: unknown;
}

/**
 * Every field that differs (version, image, API server, CA, cluster DNS, auth, labels, taints,
 * CRI/CNI versions, download overrides — the whole config counts). Secret values are redacted.
 */
export function diffConfigs(from: AgentConfig | null, to: AgentConfig): ConfigChange[] {
  const out: ConfigChange[] = [];
  const walk = (a: unknown, b: unknown, p: string): void => {
    const isObj = (v: unknown): v is Record<string, unknown> =>
      v !== null && typeof v === 'object' && !Array.isArray(v);
    // A section present on one side only is walked too (against nothing), so its secrets are
    // redacted field by field instead of being reported inside a whole-object value.
    const section = (v: unknown): v is Record<string, unknown> | undefined => v === undefined || isObj(v);
    if ((isObj(a) || isObj(b)) && section(a) && section(b) && !SECRET_PATHS.has(p) && !p.endsWith('Labels')) {
      const from = a ?? {};
      const to = b ?? {};
      for (const k of new Set([...Object.keys(from), ...Object.keys(to)]))
        walk(from[k], to[k], p ? `${p}.${k}` : k);
      return;
    }
    if (canonicalJson(a) === canonicalJson(b)) return;
    const secret = SECRET_PATHS.has(p) || p.startsWith('Kubelet.Auth.');
    out.push({
      path: p,
      from: secret && a !== undefined ? REDACTED : redactDeep(a ?? null),
      to: secret && b !== undefined ? REDACTED : redactDeep(b ?? null),
    });
  };
  walk(from ?? {}, to, '');
  return out;
}
