/**
 * The fleet's namespace (docs/fleet.md, "Another namespace"): agentd's `--fleet-namespace` and
 * agentctl's for `fleet pause|resume`, one rule for both. No zod here: agentctl's start loads it.
 */

/** Where the fleet gate's objects live (docs/fleet.md): policy, recorded failures, slot Leases. */
export const DEFAULT_FLEET_NAMESPACE = 'agentd-system';

/** A Kubernetes namespace name (an RFC 1123 label). */
export const NAMESPACE_NAME_RE = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
export const NAMESPACE_NAME_EXPECTED =
  'expected a Kubernetes namespace name: lowercase letters, digits and -, at most 63, such as agentd-system';
