/** Types shared by the OCI puller's parts. */

/** The CPU architectures agentd provisions rootfs images for (`linux/<arch>`). */
export const OCI_ARCHES = ['amd64', 'arm64'] as const;
export type OciArch = (typeof OCI_ARCHES)[number];

/** The subset of a pino logger the puller uses (a pino `Logger` fits). */
export interface OciLogger {
  debug(obj: object, msg?: string): void;
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
}

/** A logger that drops everything: the default when the caller gives none. */
export const silentLogger: OciLogger = {
  debug: () => undefined,
  info: () => undefined,
  warn: () => undefined,
};

/** An OCI content descriptor (the fields the puller reads). */
export interface Descriptor {
  mediaType: string;
  /** `sha256:<64 hex>`; other algorithms are refused when the manifest is read. */
  digest: string;
  size: number;
  platform?: { architecture: string; os: string; variant?: string | undefined } | undefined;
}
