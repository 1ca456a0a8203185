/** The bounds of agentd's outbound HTTP: downloads, image pulls and their checks (src/outbound-http.ts). */

/** The bounds of every outbound transfer (docs/operations.md, "Limits"); the daemon config sets them. */
export interface TransferLimits {
  /** A download must average at least this many bytes per second over each `rateWindowMs`. */
  minRateBytesPerSecond: number;
  /** The window over which a download's rate is averaged. */
  rateWindowMs: number;
  /**
   * The total deadline of a call, from its request to the end of its body. A download's deadline
   * grows by the time its declared size takes at `minRateBytesPerSecond`.
   */
  requestTimeoutMs: number;
}

/**
 * 10 KiB/s over 60 s: a kubelet (~80 MiB) still arrives over a link that slow (in about 2.3 h),
 * while a server that trickles a byte every few seconds is given up on after a minute, not
 * hours. 2 min for a call: a HEAD, a checksum file, a manifest or a token answered in less than
 * that on any link that can download at all.
 */
export const DEFAULT_TRANSFER_LIMITS: Readonly<TransferLimits> = Object.freeze({
  minRateBytesPerSecond: 10 * 1024,
  rateWindowMs: 60_000,
  requestTimeoutMs: 120_000,
});
