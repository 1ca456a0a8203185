#!/usr/bin/env node
/** `systemctl` of the simulated host (integration tests put it first on PATH; see install.ts). */
import { simToolMain } from './main.js';

await simToolMain('systemctl');
