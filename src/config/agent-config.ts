/**
 * The agent config: the JSON document (PascalCase keys, Go field names) that the upstream
 * agent reads and writes as `<machine>-applied-config.json`. One zod schema validates it at
 * every boundary (RPC params, files on disk, the sim default); defaults are filled here and
 * nowhere else.
 */
import * as z from 'zod';
import { describeError } from '../errors.js';
import { parseImageReference } from './image-reference.js';
import { REDACTED, redactDeep } from './redact.js';

export const DEFAULT_CONTAINERD_VERSION = '2.0.4';
export const DEFAULT_RUNC_VERSION = '1.1.12';
export const DEFAULT_CNI_VERSION = '1.5.1';
export const DEFAULT_OCI_IMAGE = 'ghcr.io/azure/agent-ubuntu2404:v20260427';

const VERSION_RE = /^v?\d+\.\d+\.\d+(?:[-+][0-9A-Za-z.-]+)?$/;
const DNS_SUBDOMAIN_RE = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const BOOTSTRAP_TOKEN_RE = /^[a-z0-9]{6}\.[a-z0-9]{16}$/;

// Kubernetes syntax for what the kubelet registers the node with (--node-labels,
// --register-with-taints): a label key is a qualified name — an optional DNS-subdomain prefix
// and `/`, then a name of at most 63 characters of [A-Za-z0-9-_.] that starts and ends with a
// letter or digit; a label value is such a name or empty; a taint is key[=value]:Effect with a
// label key and value. The kubelet refuses anything else at start, so agentd refuses it with the
// request (docs/api.md). Written out as patterns so the OpenRPC document carries them.
const LABEL_NAME = '[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?';
const LABEL_PREFIX = '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*';
const LABEL_KEY = `(${LABEL_PREFIX}/)?${LABEL_NAME}`;
const LABEL_VALUE = '(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?';
export const TAINT_EFFECTS = ['NoSchedule', 'PreferNoSchedule', 'NoExecute'] as const;
const LABEL_KEY_RE = new RegExp(`^${LABEL_KEY}$`);
const LABEL_VALUE_RE = new RegExp(`^${LABEL_VALUE}$`);
const TAINT_RE = new RegExp(`^${LABEL_KEY}(=${LABEL_VALUE})?:(${TAINT_EFFECTS.join('|')})$`);
/** Longest DNS-subdomain prefix of a label key. */
const LABEL_PREFIX_MAX = 253;

const prefixFits = (key: string): boolean => {
  const slash = key.indexOf('/');
  return slash === -1 || slash <= LABEL_PREFIX_MAX;
};

/** A label key: `[prefix/]name` (the prefix a DNS subdomain of at most 253 characters, the name at most 63). */
export const labelKeySchema = z
  .string()
  .regex(LABEL_KEY_RE, {
    error: (iss) =>
      `expected a label key [prefix/]name (name: at most 63 of A-Z a-z 0-9 - _ ., alphanumeric at both ends; prefix: a DNS subdomain), got ${JSON.stringify(iss.input)}`,
  })
  .refine(prefixFits, {
    error: `expected a label key whose prefix is at most ${LABEL_PREFIX_MAX} characters`,
  });

/** A label value: empty, or at most 63 of [A-Za-z0-9-_.], alphanumeric at both ends. */
export const labelValueSchema = z.string().regex(LABEL_VALUE_RE, {
  error: (iss) =>
    `expected a label value (empty, or at most 63 of A-Z a-z 0-9 - _ ., alphanumeric at both ends), got ${JSON.stringify(iss.input)}`,
});

/** A taint as the kubelet registers it: `key[=value]:Effect`. */
export const taintSchema = z
  .string()
  .regex(TAINT_RE, {
    error: (iss) =>
      `expected a taint key[=value]:Effect (key and value in label syntax, Effect one of ${TAINT_EFFECTS.join(', ')}), got ${JSON.stringify(iss.input)}`,
  })
  .refine(prefixFits, {
    error: `expected a taint whose key prefix is at most ${LABEL_PREFIX_MAX} characters`,
  });

/** Node labels: label keys to label values. */
export const nodeLabelsSchema = z.record(labelKeySchema, labelValueSchema);

/** A semantic version, accepted with or without a leading `v`, stored without it. */
export const versionSchema = z
  .string()
  .regex(VERSION_RE, {
    error: (iss) =>
      `expected a version like 1.34.0 (a leading v is allowed), got ${JSON.stringify(iss.input)}`,
  })
  .transform((v) => v.replace(/^v/, ''));

/**
 * An OCI image reference, checked at the boundary with the same parser the puller uses, so
 * `--image 'bad ref!!'` is refused with the request instead of failing later in preflight.
 */
export const imageReferenceSchema = z
  .string()
  .min(1, 'image reference is empty (expected [registry/]repository[:tag][@sha256:<64 hex>])')
  .superRefine((ref, ctx) => {
    if (ref === '') return; // one issue for an empty reference: the min(1) above
    try {
      parseImageReference(ref);
    } catch (err) {
      ctx.addIssue({ code: 'custom', message: describeError(err), input: ref });
    }
  })
  .meta({ description: 'OCI image reference: [registry/]repository[:tag][@sha256:digest].' });

const downloadOverrideSchema = z.strictObject({
  BaseURL: z.url({ protocol: /^https?$/ }).optional(),
  URL: z.string().min(1).optional(),
  Version: versionSchema.optional(),
});
export type DownloadOverride = z.infer<typeof downloadOverrideSchema>;

const execCredentialSchema = z.looseObject({
  command: z.string().min(1),
  args: z.array(z.string()).optional(),
  env: z.array(z.strictObject({ name: z.string(), value: z.string() })).optional(),
  apiVersion: z.string().optional(),
});

function makeAgentConfigSchema(object: typeof z.strictObject | typeof z.looseObject) {
  return object({
    MachineName: z
      .string()
      .max(253)
      .regex(DNS_SUBDOMAIN_RE, 'expected a DNS subdomain name such as worker-01'),
    Cluster: z.strictObject({
      CaCertBase64: z
        .base64('expected the base64 of the cluster CA PEM')
        .refine((s) => Buffer.from(s, 'base64').toString('utf8').includes('-----BEGIN CERTIFICATE-----'), {
          message: 'expected the base64 of a PEM certificate (no BEGIN CERTIFICATE line found)',
        }),
      ClusterDNS: z.union([z.ipv4(), z.ipv6()], { error: 'expected the kube-dns ClusterIP address' }),
      Version: versionSchema,
    }),
    Kubelet: z.strictObject({
      ApiServer: z
        .string()
        .min(1)
        // Only a URL without any scheme gets https://: `ftp://x` must fail, not become `https://ftp://x`.
        .transform((s) => (/^[A-Za-z][A-Za-z0-9+.-]*:\/\//.test(s) ? s : `https://${s}`))
        .pipe(z.url({ protocol: /^https?$/ })),
      Auth: z
        .strictObject({
          BootstrapToken: z
            .string()
            .regex(BOOTSTRAP_TOKEN_RE, 'expected a bootstrap token <6 chars>.<16 chars> of [a-z0-9]')
            .optional(),
          ExecCredential: execCredentialSchema.optional(),
        })
        .refine((a) => (a.BootstrapToken === undefined) !== (a.ExecCredential === undefined), {
          message: 'exactly one of BootstrapToken and ExecCredential is required',
        }),
      Labels: nodeLabelsSchema.default({}),
      RegisterWithTaints: z.array(taintSchema).default([]),
    }),
    CRI: z
      .strictObject({
        Containerd: z
          .strictObject({ Version: versionSchema })
          .default({ Version: DEFAULT_CONTAINERD_VERSION }),
        Runc: z.strictObject({ Version: versionSchema }).default({ Version: DEFAULT_RUNC_VERSION }),
      })
      .default({
        Containerd: { Version: DEFAULT_CONTAINERD_VERSION },
        Runc: { Version: DEFAULT_RUNC_VERSION },
      }),
    CNI: z.strictObject({ PluginVersion: versionSchema }).default({ PluginVersion: DEFAULT_CNI_VERSION }),
    OCIImage: imageReferenceSchema.default(DEFAULT_OCI_IMAGE),
    Downloads: z
      .strictObject({
        Kubernetes: downloadOverrideSchema.optional(),
        Containerd: downloadOverrideSchema.optional(),
        Runc: downloadOverrideSchema.optional(),
        CNI: downloadOverrideSchema.optional(),
        Crictl: downloadOverrideSchema.optional(),
      })
      .optional(),
  });
}

/** Strict schema for configs handed to agentd (RPC, files the operator writes): unknown keys are errors. */
export const agentConfigSchema = makeAgentConfigSchema(z.strictObject);
/**
 * Lenient top level for applied configs written by the upstream agent, which may carry fields
 * agentd does not know; they are kept, not dropped, when the file is read.
 */
export const appliedConfigFileSchema = makeAgentConfigSchema(z.looseObject);

/** A validated agent config with every default filled in. */
export type AgentConfig = z.output<typeof agentConfigSchema>;
/** What a caller may send: defaults may be omitted, versions may carry a leading v. */
export type AgentConfigInput = z.input<typeof agentConfigSchema>;

export { REDACTED };

/**
 * A deep copy of the config with its secrets replaced by the one redactor (src/config/redact.ts):
 * the bootstrap token, the exec credential's args and env values, and URL userinfo in the
 * download overrides (and anywhere else a URL appears).
 */
export function redactAgentConfig<T extends AgentConfig>(config: T): T {
  return redactDeep(config);
}

/** The exact bytes agentd writes for an applied config: pretty JSON, two spaces, trailing newline. */
export function serializeAgentConfig(config: AgentConfig): string {
  return `${JSON.stringify(config, null, 2)}\n`;
}
