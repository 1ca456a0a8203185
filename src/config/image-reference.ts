/**
 * Image references (`[registry/]repository[:tag][@sha256:<hex>]`), parsed the way Docker does:
 * no registry means Docker Hub, whose API host is `registry-1.docker.io` and whose one-component
 * names live under `library/`.
 */
import { InvalidConfigError } from '../errors.js';
import { redactImageReference } from './redact.js';

/** `sha256:<64 lowercase hex>` (the OCI digests agentd accepts; src/provision/oci/digest.ts checks blobs). */
const isSha256Digest = (value: string): boolean => /^sha256:[0-9a-f]{64}$/.test(value);

/** A parsed image reference. */
export interface ImageReference {
  /** Registry API host, with the port when one was given (`registry-1.docker.io`, `127.0.0.1:5000`). */
  registry: string;
  /** Repository path inside the registry (`library/busybox`, `azure/agent-ubuntu2404`). */
  repository: string;
  /** What to ask the registry for: the digest when one was given, else the tag (`latest` by default). */
  reference: string;
  tag?: string;
  digest?: string;
}

const DOCKER_HUB_ALIASES = new Set(['docker.io', 'index.docker.io', 'registry-1.docker.io']);
const DOCKER_HUB_API_HOST = 'registry-1.docker.io';
const COMPONENT_RE = /^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$/;
const TAG_RE = /^\w[\w.-]{0,127}$/;
const HOST_RE =
  /^(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*|\[[0-9A-Fa-f:.]+\])(?::\d{1,5})?$/;
const EXPECTED = 'expected [registry/]repository[:tag][@sha256:<64 hex>]';

function invalid(ref: string, why: string): InvalidConfigError {
  // The reference as typed may carry credentials (user:password@registry/…): never shown.
  const shown = redactImageReference(ref);
  return new InvalidConfigError(`image reference ${JSON.stringify(shown)}: ${why} (${EXPECTED})`, {
    data: { field: 'OCIImage', received: shown },
  });
}

/** Whether the first path component names a registry rather than a repository namespace. */
function looksLikeRegistry(component: string): boolean {
  return (
    component.includes('.') ||
    component.includes(':') ||
    component === 'localhost' ||
    component.startsWith('[')
  );
}

/** Parse an image reference; throws INVALID_CONFIG naming what is wrong with it. */
export function parseImageReference(ref: string): ImageReference {
  if (typeof ref !== 'string' || ref.trim() === '') throw invalid(String(ref), 'empty');
  if (ref !== ref.trim() || /\s/.test(ref)) throw invalid(ref, 'contains whitespace');

  let rest = ref;
  let digest: string | undefined;
  const at = rest.indexOf('@');
  if (at >= 0) {
    digest = rest.slice(at + 1);
    rest = rest.slice(0, at);
    if (redactImageReference(ref) !== ref)
      throw invalid(
        ref,
        'holds credentials before the registry (user:password@); give them in the registry auth file (--registry-auth-file)',
      );
    if (!isSha256Digest(digest))
      throw invalid(ref, `digest ${JSON.stringify(digest)} is not sha256:<64 lowercase hex>`);
  }

  let tag: string | undefined;
  const colon = rest.lastIndexOf(':');
  if (colon > rest.lastIndexOf('/')) {
    tag = rest.slice(colon + 1);
    rest = rest.slice(0, colon);
    if (!TAG_RE.test(tag)) throw invalid(ref, `tag ${JSON.stringify(tag)} is not valid`);
  }

  const parts = rest.split('/');
  let registry = 'docker.io';
  if (parts.length > 1 && looksLikeRegistry(parts[0] ?? '')) {
    registry = parts.shift() ?? '';
    if (!HOST_RE.test(registry))
      throw invalid(ref, `registry ${JSON.stringify(registry)} is not a host[:port]`);
  }
  if (DOCKER_HUB_ALIASES.has(registry.toLowerCase())) {
    registry = DOCKER_HUB_API_HOST;
    if (parts.length === 1) parts.unshift('library');
  }
  for (const part of parts) {
    if (!COMPONENT_RE.test(part)) {
      const why =
        part === '' ? 'has an empty path component' : `path component ${JSON.stringify(part)} is not valid`;
      throw invalid(
        ref,
        part !== part.toLowerCase() ? `repository must be lowercase, got ${JSON.stringify(part)}` : why,
      );
    }
  }
  const repository = parts.join('/');
  if (repository.length > 255)
    throw invalid(ref, `repository is ${repository.length} characters, more than 255`);

  const result: ImageReference = { registry, repository, reference: digest ?? tag ?? 'latest' };
  if (tag !== undefined || digest === undefined) result.tag = tag ?? 'latest';
  if (digest !== undefined) result.digest = digest;
  return result;
}

/** Render a reference back to text (`registry/repository@digest` or `registry/repository:tag`). */
export function formatImageReference(ref: ImageReference): string {
  return ref.digest
    ? `${ref.registry}/${ref.repository}@${ref.digest}`
    : `${ref.registry}/${ref.repository}:${ref.reference}`;
}
