/** Verified downloads of the kube/CRI/CNI binaries into a machine rootfs, through a content-addressed cache. */
export { resolveArtifacts, crictlVersionFor, DEFAULT_BASE_URLS, type DownloadKey } from './resolve.js';
export { renderUrlTemplate, type TemplateValues } from './url-template.js';
export { parseChecksumFile } from './checksum-file.js';
export {
  installArtifacts,
  type InstallArtifactsOptions,
  type InstallArtifactsResult,
} from './install-artifacts.js';
export { checkArtifacts, type ArtifactCheck, type CheckArtifactsOptions } from './check-artifacts.js';
export { ensureCached, cacheEntryPath, type CacheRequest, type CacheDeps, type CachedFile } from './cache.js';
export {
  defaultArtifactDispatcher,
  DEFAULT_RETRY_POLICY,
  type HttpContext,
  type RetryPolicy,
} from './http.js';
export { defaultVersionProbe, versionOutputMatches } from './version-check.js';
export { defaultOpenWrite } from './file-io.js';
export * from './types.js';
