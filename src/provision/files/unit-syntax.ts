/**
 * Quoting for values agentd writes into systemd unit files (systemd.syntax(7)): `%` starts a
 * specifier, `\` and `"` are special inside quotes, and a newline would end the setting.
 */
import { InvalidConfigError } from '../../errors.js';

// eslint-disable-next-line no-control-regex -- control characters are exactly what is refused
const CONTROL_RE = /[\u0000-\u001f\u007f]/;

/** A value for one `Key=value` line, double-quoted and escaped. `what` names it in errors. */
export function quoteUnitValue(value: string, what: string): string {
  if (CONTROL_RE.test(value)) {
    throw new InvalidConfigError(
      `${what}: expected no control characters or newlines, got ${JSON.stringify(value)}`,
    );
  }
  const escaped = value.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/%/g, '%%');
  return `"${escaped}"`;
}

/** An `Environment="NAME=value"` line. */
export function environmentLine(name: string, value: string, what: string): string {
  return `Environment=${quoteUnitValue(`${name}=${value}`, what)}`;
}

/**
 * Check one command-line argument that reaches the command through `$VAR` expansion, which
 * systemd splits at whitespace and unquotes: such an argument must hold none of those.
 */
export function validateExpandedArg(arg: string, what: string): string {
  if (!/^[^\s"'\\%$]+$/.test(arg)) {
    throw new InvalidConfigError(
      `${what}: expected no whitespace, quotes, backslashes, "%" or "$", got ${JSON.stringify(arg)}`,
    );
  }
  return arg;
}
