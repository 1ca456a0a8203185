/** Byte progress of one download, throttled so a fast transfer does not flood the event stream. */
import type { Clock, ProgressSink } from '../../host/types.js';

/** At most one event per this many milliseconds per download (plus the final one). */
export const PROGRESS_INTERVAL_MS = 100;

export interface ByteProgress {
  /** Report the bytes so far; emitted only if the last event is at least the interval old. */
  update(bytes: number): void;
  /** Report the final count, always emitted. */
  done(bytes: number): void;
}

export function createByteProgress(
  sink: ProgressSink | undefined,
  clock: Clock,
  task: string,
  totalBytes: number | undefined,
): ByteProgress {
  if (!sink) return { update: () => undefined, done: () => undefined };
  let last = Number.NEGATIVE_INFINITY;
  const emit = (bytes: number): void => {
    sink({ task, bytes, ...(totalBytes === undefined ? {} : { totalBytes }) });
  };
  return {
    update(bytes) {
      const now = clock.now();
      if (now - last < PROGRESS_INTERVAL_MS) return;
      last = now;
      emit(bytes);
    },
    done(bytes) {
      emit(bytes);
    },
  };
}
