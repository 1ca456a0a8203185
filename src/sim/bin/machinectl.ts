#!/usr/bin/env node
/** `machinectl` of the simulated host (integration tests put it first on PATH; see install.ts). */
import { simToolMain } from './main.js';

await simToolMain('machinectl');
