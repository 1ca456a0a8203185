/**
 * Rendering of `Downloads.<Name>.URL` templates.
 *
 * The upstream agent (Azure "unbounded", `internal/agentartifacts`) renders these with Go's
 * `fmt.Sprintf(template, args...)`, with a fixed argument list per artifact:
 *
 * | override   | arguments                              |
 * |------------|----------------------------------------|
 * | Kubernetes | version, arch, binary                  |
 * | Containerd | version, version, arch                 |
 * | Runc       | version, arch                          |
 * | CNI        | version, arch, version                 |
 * | Crictl     | version, version, os (`linux`), arch   |
 *
 * so `https://mirror/k8s/v%s/bin/linux/%s/%s` works for both agents. Supported verbs: `%s`,
 * `%v`, explicit indexes `%[2]s`, and `%%` for a literal percent sign. Templates may use fewer
 * verbs than there are arguments (Go would append `%!(EXTRA …)`, which agentd does not copy).
 *
 * As an agentd extension, named placeholders in Go-template style are accepted as well:
 * `{{.Version}}`, `{{.Arch}}`, `{{.OS}}` and, for Kubernetes only, `{{.Binary}}`.
 *
 * Anything else — an unknown placeholder, an unsupported verb, an argument index out of range —
 * is an `InvalidConfigError` naming the field and the offending text.
 */
import { InvalidConfigError } from '../../errors.js';

/** Values available to one artifact's template. */
export interface TemplateValues {
  /** Positional arguments, in the upstream order. */
  args: readonly string[];
  /** Named placeholders available to this artifact (`Version`, `Arch`, …). */
  named: Readonly<Record<string, string>>;
}

const PLACEHOLDER_RE = /\{\{\s*\.([A-Za-z][A-Za-z0-9]*)\s*\}\}|\{\{[^}]*\}\}|%(?:\[(\d+)\])?(.)?/g;

/** Render `template` for the config field `field` (used in error messages). */
export function renderUrlTemplate(field: string, template: string, values: TemplateValues): string {
  let next = 0;
  return template.replace(
    PLACEHOLDER_RE,
    (match: string, name?: string, index?: string, verb?: string): string => {
      if (match.startsWith('{{')) {
        if (name === undefined) {
          throw new InvalidConfigError(
            `${field}: unsupported template expression ${match} in ${JSON.stringify(template)}; expected one of ${describeNamed(values)}`,
          );
        }
        const value = values.named[name];
        if (value === undefined) {
          throw new InvalidConfigError(
            `${field}: unknown placeholder {{.${name}}} in ${JSON.stringify(template)}; expected one of ${describeNamed(values)}`,
          );
        }
        return value;
      }
      if (verb === '%' && index === undefined) return '%';
      if (verb !== 's' && verb !== 'v') {
        throw new InvalidConfigError(
          `${field}: unsupported format verb ${JSON.stringify(match)} in ${JSON.stringify(template)}; expected %s, %v, %[n]s or %% (${values.args.length} arguments: ${values.args.join(', ')})`,
        );
      }
      const position = index === undefined ? next : Number(index) - 1;
      const value = values.args[position];
      if (value === undefined) {
        throw new InvalidConfigError(
          `${field}: ${JSON.stringify(match)} in ${JSON.stringify(template)} refers to argument ${position + 1}, but there are only ${values.args.length} (${values.args.join(', ')})`,
        );
      }
      next = position + 1;
      return value;
    },
  );
}

function describeNamed(values: TemplateValues): string {
  return Object.keys(values.named)
    .map((k) => `{{.${k}}}`)
    .join(', ');
}
