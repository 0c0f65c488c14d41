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

/**
 * A message as one line for a terminal. A value echoed back (a 100 KB --pv path, an unknown argument
 * as long) is cut to its first 200 characters: a run without blanks that long is never read whole,
 * and a tool's stderr quoted in an error (up to 4 KiB, with blanks) is kept as it is.
 */
export const oneLine = (message: string) =>
  message
    .replace(/\s+/g, ' ')
    .trim()
    .replace(/\S{400,}/g, (word) => `${word.slice(0, 200)}...(${word.length - 200} more characters)`);

/**
 * A yargs middleware (run before validation, so before any command acts) that refuses what yargs
 * would otherwise drop or guess. `parsed` tells which flags the command knows, and as what.
 */
export function checkedWords(argv: readonly string[]) {
  return (parsed: Readonly<Record<string, unknown>>): void => {
    notUtf8(argv);
    const end = argv.indexOf('--');
    const flags = end === -1 ? argv : argv.slice(0, end);
    // yargs keeps what follows `--` out of every positional and out of strict mode's count:
    // `migrate plan -- pvs.yaml` read stdin, and `-- init` printed nothing, exit 0.
    const after = argv.slice(flags.length + 1);
    if (after.length) throw new UsageError(`no twinvol command reads arguments after "--" (given ${after.slice(0, 3).map((a) => quoted(a)).join(', ')}${after.length > 3 ? ', ...' : ''})`);
    flags.forEach((word, i) => {
      booleanValue(word, parsed);
      emptyValue(word, flags[i + 1], parsed);
    });
  };
}

/** The flags a word before the command may be: every other flag is a command's own and follows it. */
const FLAGS_BEFORE_COMMAND = ['--help', '-h', '--version'];

/**
 * A flag before the command it would belong to (`twinvol --bogus`, `twinvol --bogus volume list`,
 * `twinvol volume --bogus list`), named. yargs asked for the missing command first ("name a
 * command"), or took the next word for the flag's value and named that word, or the group's missing
 * command, instead. Checked before yargs parses; `groups`: the commands whose next word is a command
 * of their own (`volume` in `volume list`), none of which takes a flag but --help. What follows `--`
 * is the middleware's (checkedWords).
 */
export function flagBeforeCommand(argv: readonly string[], groups: ReadonlySet<string>): void {
  notUtf8(argv);
  let wanted = 1;
  let commands = 0;
  let group = '';
  for (const word of argv) {
    if (commands === wanted || word === '--') return;
    if (word.startsWith('-') && word !== '-') {
      // `--help=no` is the middleware's to refuse (booleanValue): only the name counts here.
      const name = word.split('=')[0] ?? word;
      if (FLAGS_BEFORE_COMMAND.includes(name)) continue;
      throw new UsageError(`unknown flag ${name}: name the ${group ? `${group} ` : ''}command first; before it twinvol takes only --help, -h and --version`);
    }
    if (commands === 0 && groups.has(word)) [wanted, group] = [2, word];
    commands++;
  }
}

/**
 * Node decodes argv as UTF-8 and puts U+FFFD where bytes are not: `install flex --plugin-dir
 * $'/srv/\xff'` installed into /srv/\uFFFD, a directory nobody named. The bytes are gone by then, so
 * such a word is refused.
 */
function notUtf8(argv: readonly string[]): void {
  const at = argv.findIndex((word) => word.includes('\ufffd'));
  if (at !== -1) throw new UsageError(`argument ${at + 1} (${quoted(argv[at] ?? '')}) is not valid UTF-8 (or holds U+FFFD): twinvol cannot name what it names`);
}

/**
 * A boolean flag given any value but `true` or `false`: yargs-parser reads `--force=yes`, `--json=1`
 * and `--json=` as false, silently. Exactly `true` and `false`, as every other boolean twinvol reads
 * (PV options and twinvol-csi's flags: shared/validate.ts parseBoolean; the config file's JSON
 * booleans): `1`, `yes` and their kind are refused rather than guessed, since `--force=no` read either
 * way would be a guess about a flag that lets other nodes attach a volume still in use. A flag is
 * boolean where yargs parsed its value as one (an unknown `--force=yes` stays a string, for strict
 * mode to name).
 */
function booleanValue(word: string, parsed: Readonly<Record<string, unknown>>): void {
  const given = /^(--?)([^-=][^=]*)=(.*)$/s.exec(word);
  if (!given || typeof parsed[given[2] ?? ''] !== 'boolean') return;
  const [, dashes = '', name = '', value = ''] = given;
  const flag = `${dashes}${name}`;
  if (value === '') throw new UsageError(`${flag}= has no value: give ${flag} alone, or ${flag}=true or ${flag}=false`);
  usable(() => parseBoolean(value, `${flag} (given ${quoted(value)})`, false));
}

/**
 * A flag that takes a value, given an empty one (`--fs-type ""`, `--csi-server=`): an unset variable,
 * quoted. yargs hands on the empty string, and a command reading it as "not given" took the default
 * (ext4 for `--fs-type`, a twinvol-csi found beside this executable for `--csi-server`). No flag of
 * twinvol's means anything by an empty value; leaving the flag out is how to ask for its default.
 */
function emptyValue(word: string, next: string | undefined, parsed: Readonly<Record<string, unknown>>): void {
  const given = /^--([^-=][^=]*)(=?)$/s.exec(word);
  if (!given) return;
  const [, name = '', equals] = given;
  if (!equals && next !== '') return;
  const value = parsed[name];
  if (value === '' || (Array.isArray(value) && value.includes(''))) throw new UsageError(`--${name} is given an empty value: give one, or leave the flag out for its default`);
}

/**
 * A repeatable option's values as a list. Repeated, yargs gives an array; once, a string. Not
 * `array: true`, which takes every word after the flag: `--mapping m.yaml pvs.yaml` read pvs.yaml as
 * a second mapping file.
 */
export function asList(value: string | string[]): string[] {
  return Array.isArray(value) ? value : [value];
}
