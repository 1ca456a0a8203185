/** The shells `agentctl completion` writes scripts for (its own module: the command tree needs only this). */
export const SHELLS = ['bash', 'zsh', 'fish'] as const;
export type Shell = (typeof SHELLS)[number];
