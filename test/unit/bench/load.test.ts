import { describe, expect, it } from 'vitest';
import { parseLog, parseSummary, percentile } from '../../../bench/lib/load.js';

// The summary h2load 1.52 prints (trimmed of its latency tables).
const SUMMARY = `starting benchmark...
spawning thread #0: 64 total client(s). Timing-based test with 0s of warm-up time and 2s of main duration for measurements.
Main benchmark duration is started for all clients.

finished in 2.00s, 80159.50 req/s, 25.01MB/s
requests: 160319 total, 160383 started, 160319 done, 160300 succeeded, 12 failed, 3 errored, 4 timeout
status codes: 160300 2xx, 1 3xx, 2 4xx, 5 5xx
traffic: 50.03MB (52456789) total, 3.21MB (3365123) headers (space savings 0.00%), 46.01MB (48242123) data
`;

describe('bench/lib/load: reading h2load', () => {
  it('takes the rate, the 2xx count and every kind of failure from the summary', () => {
    expect(parseSummary(SUMMARY)).toEqual({
      rps: 80159.5,
      succeeded: 160300,
      failures: 12 + 3 + 4 + 1 + 2 + 5,
    });
  });

  it('refuses output without a summary, quoting it', () => {
    expect(() => parseSummary('-D: value error 1.5\n')).toThrow(/no summary:\n-D: value error 1.5/);
  });

  it('keeps the 2xx response times of the log, in ms, sorted', () => {
    const log = [
      '1764210000000000\t200\t900',
      '1764210000000100\t-1\t5',
      '1764210000000200\t200\t300',
      '',
    ].join('\n');
    const times = parseLog(log);
    expect([...times]).toEqual([0.3, 0.9]);
    expect(percentile(times, 50)).toBe(0.3);
    expect(percentile(times, 99)).toBe(0.9);
  });
});
