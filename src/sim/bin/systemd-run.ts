#!/usr/bin/env node
/** `systemd-run` of the simulated host (integration tests put it first on PATH; see install.ts). */
import { simToolMain } from './main.js';

await simToolMain('systemd-run');
