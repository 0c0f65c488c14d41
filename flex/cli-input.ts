import { asTwinvolError, type Config, loadConfig, parseBoolean, quoted } from '../shared/index.js';

// The administrator's command line as flex/cli.ts reads it: what counts as a usage error (exit 2,
// one line, nothing touched), and the checks yargs leaves out.

/** A command line that does not parse: exit 2, one line, before anything is touched. */
export class UsageError extends Error {}

/**
 * A config that does not load (shared/config.ts says which file or variable, and where in it): exit 2
 * like a usage error, as nothing was touched and the input is what must change, but --help cannot
 * mend it, so the line does not point there.
 */
export class ConfigError extends UsageError {}

/** The settings every command that opens the catalog reads, or the ConfigError that says why not. */
export function cliConfig(): Config {
  try {
    return loadConfig();
  } catch (err) {
    throw new ConfigError(asTwinvolError(err).message);
  }
}

/** Runs a check of the command line's values: whatever it refuses is a usage error. */
export function usable<T>(check: () => T): T {
  try {
    return check();
  } catch (err) {
    throw err instanceof UsageError ? err : new UsageError(asTwinvolError(err).message);
  }
}

export const oneLine = (message: string) => message.replace(/\s+/g, ' ').trim();

/**
 * A yargs middleware (run before validation) that refuses a boolean flag given any value but `true`
 * or `false`. yargs-parser reads `--force=yes`, `--json=1` and `--json=` as false, silently. Exactly
 * `true` and `false`, as every other boolean twinvol reads (PV options and twinvol-csi's flags:
 * shared/validate.ts parseBoolean; the config file's JSON booleans): `1`, `yes` and their kind are
 * refused rather than guessed, since `--force=no` read either way would be a guess about a flag that
 * lets other nodes attach a volume still in use. A flag is boolean where the command knows it as one:
 * yargs parsed its value as a boolean (an unknown `--force=yes` stays a string, for strict mode to
 * name). Tokens after `--` are positional, never flags.
 */
export function booleanValues(argv: readonly string[]) {
  return (parsed: Readonly<Record<string, unknown>>): void => {
    const end = argv.indexOf('--');
    for (const token of end === -1 ? argv : argv.slice(0, end)) {
      const given = /^(--?)([^-=][^=]*)=(.*)$/s.exec(token);
      if (!given || typeof parsed[given[2] ?? ''] !== 'boolean') continue;
      const [, dashes = '', name = '', value = ''] = given;
      const flag = `${dashes}${name}`;
      if (value === '') throw new UsageError(`${flag}= has no value: give ${flag} alone, or ${flag}=true or ${flag}=false`);
      usable(() => parseBoolean(value, `${flag} (given ${quoted(value)})`, false));
    }
  };
}

/**
 * A repeatable option's values as a list. Repeated, yargs gives an array; once, a string. Not
 * `array: true`, which takes every word after the flag: `--mapping m.yaml pvs.yaml` read pvs.yaml as
 * a second mapping file.
 */
export function asList(value: string | string[]): string[] {
  return Array.isArray(value) ? value : [value];
}
