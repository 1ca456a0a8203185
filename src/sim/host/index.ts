/** The simulated host: a `CommandRunner` over a persisted model of systemd machines. */
export { createSimHost } from './sim-host.js';
export type { SimHost, SimHostOptions, SimMachineSnapshot, SimState, SimUnitSnapshot } from './sim-host.js';
export type { SimRegistration, SimUnitActiveState, SimUnitName } from './state.js';
export { simStateFile, SIM_UNITS } from './state.js';
export { KUBELET_DROP_IN } from './rootfs.js';
export { parseSimCommand, formatCommandLine } from './command-line.js';
export type { SimCommand } from './command-line.js';
