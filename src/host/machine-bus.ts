/**
 * The node check over D-Bus: what `machinectl show <m>` and `systemctl --machine=<m> is-active
 * kubelet.service` tell, asked of machined and of the machine's own systemd directly, with no
 * process started. `status` and repair's check (every 30 s) ask it; on a real host a check by
 * command cost two process starts and ~20–30 ms of CPU (docs/operations.md, "What agentd costs").
 *
 * It answers only what it knows for certain, the same way the commands would:
 * - machined (`org.freedesktop.machine1`, on the host's system bus) has no such machine:
 *   not registered;
 * - the machine's systemd, reached on the machine's own system bus through its leader's root
 *   (`/proc/<leader>/root/run/dbus/system_bus_socket`, the socket `systemctl --machine` uses),
 *   says kubelet.service's `ActiveState`: the word `systemctl is-active` prints.
 * Anything else (no bus, a refused or broken connection, an error reply, a deadline) answers
 * null, and the caller asks with the commands, which stay the reference. A machine still
 * booting, whose bus is not up yet, is such a case. The connections to the host's bus and to each
 * running machine's are kept between checks; every answer is asked afresh.
 * docs/architecture.md, "The host seam".
 */
import pino from 'pino';
import type { Logger } from 'pino';
import { describeError } from '../errors.js';
import { raceAbort } from '../retry/backoff.js';
import { isCancelled } from './machines-poll.js';
import { openBus, DBusError } from './dbus/connection.js';
import type { BusConnection } from './dbus/connection.js';
import type { Variant } from './dbus/wire.js';
import type { HostPaths } from './paths.js';
import type { Clock, MachineName } from './types.js';

/** What the bus could tell about a machine. */
export type MachineBusAnswer = { registered: false } | { registered: true; activeState: string };

export interface MachineBus {
  /** The machine's registration and kubelet's `ActiveState`, or null when the bus cannot say. */
  inspect(
    m: MachineName,
    options: { timeoutMs: number; signal?: AbortSignal },
  ): Promise<MachineBusAnswer | null>;
  /** Close the connections to the host's bus and the machines'. */
  close(): void;
}

export interface MachineBusOptions {
  paths: HostPaths;
  clock: Clock;
  logger?: Logger;
}

/** The system bus socket, on the host and inside every machine. */
export const SYSTEM_BUS_SOCKET = '/run/dbus/system_bus_socket';
const MACHINED = 'org.freedesktop.machine1';
const NO_SUCH_MACHINE = 'org.freedesktop.machine1.NoSuchMachine';
const PROPERTIES = 'org.freedesktop.DBus.Properties';

/** systemd's object path label: every byte but [A-Za-z0-9] (and a leading digit) as `_xx`. */
export function busLabel(name: string): string {
  let out = '';
  for (const [i, byte] of Buffer.from(name, 'utf8').entries()) {
    const alnum =
      (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5a) || (byte >= 0x61 && byte <= 0x7a);
    const digitFirst = i === 0 && byte >= 0x30 && byte <= 0x39;
    out += alnum && !digitFirst ? String.fromCharCode(byte) : `_${byte.toString(16).padStart(2, '0')}`;
  }
  return out;
}

/** How long opening a connection (connect, authenticate, Hello) may take. */
const CONNECT_MS = 10_000;

/**
 * One connection shared by every check: opened at the first use, dropped when opening it
 * failed (the next use tries again), opened anew when it was closed (a bus restarted, a machine
 * stopped). Concurrent uses share one opening.
 */
class SharedBus {
  #bus: Promise<BusConnection> | null = null;

  constructor(private readonly open: () => Promise<BusConnection>) {}

  get(): Promise<BusConnection> {
    const current = (this.#bus ??= this.open());
    return current.then(
      (bus) => {
        if (!bus.closed) return bus;
        if (this.#bus === current || this.#bus === null) this.#bus = this.open();
        return this.#bus;
      },
      (err: unknown) => {
        if (this.#bus === current) this.#bus = null;
        throw err;
      },
    );
  }

  close(): void {
    const current = this.#bus;
    this.#bus = null;
    void current?.then(
      (bus) => bus.close(),
      () => undefined,
    );
  }
}

const KUBELET_UNIT_PATH = `/org/freedesktop/systemd1/unit/${busLabel('kubelet.service')}`;

export function createMachineBus(options: MachineBusOptions): MachineBus {
  const { paths, clock } = options;
  const log = (options.logger ?? pino({ enabled: false })).child({ subsystem: 'machine-bus' });
  const hostSocket = paths.resolve(SYSTEM_BUS_SOCKET);
  // What the last check found: logged when it changes, not every 30 s.
  let lastWay: string | null = null;

  const report = (way: 'bus' | 'commands', reason?: string): void => {
    const key = `${way}:${reason ?? ''}`;
    if (key === lastWay) return;
    lastWay = key;
    if (way === 'bus') log.info('node checks ask machined and the machines’ systemd over D-Bus');
    else log.info({ reason }, 'node checks run machinectl and systemctl: D-Bus could not answer');
  };

  const host = new SharedBus(() => openBus(hostSocket, { hello: true, clock, timeoutMs: CONNECT_MS }));

  // Each running machine's bus connection, kept between checks while its leader stays: a check
  // then asks one question over it, not connect, authenticate, Hello, ask and close. The machine
  // stopping closes its bus, and with it this connection; a new leader gets a new connection.
  const inside = new Map<MachineName, { leader: number; bus: SharedBus }>();

  const machineBus = (m: MachineName, leader: number): Promise<BusConnection> => {
    let known = inside.get(m);
    if (known?.leader !== leader) {
      forget(m);
      const socket = paths.resolve(`/proc/${leader}/root${SYSTEM_BUS_SOCKET}`);
      known = {
        leader,
        bus: new SharedBus(() => openBus(socket, { hello: true, clock, timeoutMs: CONNECT_MS })),
      };
      inside.set(m, known);
    }
    return known.bus.get();
  };

  /** Close and drop machine `m`'s connection. */
  const forget = (m: MachineName): void => {
    inside.get(m)?.bus.close();
    inside.delete(m);
  };

  async function kubeletState(
    m: MachineName,
    leader: number,
    callOptions: { timeoutMs: number; signal?: AbortSignal },
  ): Promise<string> {
    try {
      const bus = await raceAbort(machineBus(m, leader), callOptions.signal, `connect to ${m}'s bus`);
      const reply = await bus.call(
        {
          destination: 'org.freedesktop.systemd1',
          path: KUBELET_UNIT_PATH,
          interface: PROPERTIES,
          member: 'Get',
          args: ['org.freedesktop.systemd1.Unit', 'ActiveState'],
        },
        callOptions,
      );
      return stringIn(reply.body[0], 'ActiveState');
    } catch (err) {
      // Whatever went wrong, the next check starts with a new connection.
      forget(m);
      throw err;
    }
  }

  return {
    async inspect(m, callOptions) {
      try {
        const bus = await raceAbort(host.get(), callOptions.signal, 'connect to the system bus');
        let machinePath: string;
        try {
          const reply = await bus.call(
            {
              destination: MACHINED,
              path: '/org/freedesktop/machine1',
              interface: 'org.freedesktop.machine1.Manager',
              member: 'GetMachine',
              args: [m],
            },
            callOptions,
          );
          machinePath = String(reply.body[0]);
        } catch (err) {
          if (err instanceof DBusError && err.errorName === NO_SUCH_MACHINE) {
            report('bus');
            return { registered: false };
          }
          throw err;
        }
        const leaderReply = await bus.call(
          {
            destination: MACHINED,
            path: machinePath,
            interface: PROPERTIES,
            member: 'Get',
            args: ['org.freedesktop.machine1.Machine', 'Leader'],
          },
          callOptions,
        );
        const leader = numberIn(leaderReply.body[0], 'Leader');
        report('bus');
        try {
          return { registered: true, activeState: await kubeletState(m, leader, callOptions) };
        } catch (err) {
          // The machine's own bus: not up yet while it boots, gone while it stops. Not worth
          // more than a debug line; the commands will say what is going on.
          if (isCancelled(err)) throw err;
          log.debug(
            { machine: m, err: describeError(err) },
            'the machine’s systemd did not answer over D-Bus',
          );
          return null;
        }
      } catch (err) {
        if (isCancelled(err)) throw err;
        report('commands', describeError(err));
        return null;
      }
    },
    close() {
      for (const m of [...inside.keys()]) forget(m);
      host.close();
    },
  };
}

function stringIn(value: unknown, what: string): string {
  const v = value as Variant | undefined;
  if (v?.signature !== 's' || typeof v.value !== 'string') throw new Error(`${what} is not a string variant`);
  return v.value;
}

function numberIn(value: unknown, what: string): number {
  const v = value as Variant | undefined;
  if (v?.signature !== 'u' || typeof v.value !== 'number' || v.value <= 0) {
    throw new Error(`${what} is not a process id`);
  }
  return v.value;
}
