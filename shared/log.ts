import { appendFileSync, mkdirSync, renameSync, statSync } from 'node:fs';
import { dirname } from 'node:path';
import { isoNow } from './iso-time.js';

export type LogFields = Record<string, unknown>;

/**
 * Keys whose values never reach a log: FlexVolume secrets arrive as kubernetes.io/secret/<key>; `pass`
 * alone is mount.cifs's short name for password= (mount.cifs(8): pass=, dom=, cred= are synonyms).
 */
const SECRET_KEY = /secret|password|passwd|^pass$|token|credential|passphrase|private.?key/i;

/**
 * Keys whose values are mount options, one string or a list: a static volume's `mountOptions` (its
 * record, a StorageClass parameter) and CSI's `mount_flags` (a PV's spec.mountOptions), either of which
 * may hold a CIFS `password=`. Their secret options are cut (`redactOptionValues`), the rest kept.
 */
const MOUNT_OPTIONS_KEY = /^mount_?(options|flags)$/i;

/**
 * A deep copy with every secret-looking value replaced, including inside nested maps and arrays, and
 * the secret options among mount options cut.
 */
export function redact(value: unknown, key = ''): unknown {
  if (key && SECRET_KEY.test(key)) return '[redacted]';
  if (key && MOUNT_OPTIONS_KEY.test(key)) {
    if (typeof value === 'string') return redactOptionValues(value);
    if (Array.isArray(value)) return value.map((v) => (typeof v === 'string' ? redactOptionValues(v) : redact(v)));
  }
  if (Array.isArray(value)) return value.map((v) => redact(v));
  if (value && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[k] = redact(v, k);
    return out;
  }
  return value;
}

/**
 * One `key=value` of a comma-separated option list, with what comes before it (the start or a comma).
 * A value runs on through a doubled comma, which the CIFS client reads as a comma of a password
 * (fs/smb/client/fs_context.c), and through a quoted part, which libmount reads as one value: cut at
 * the first comma, a password's rest was shown ("password=[redacted],,rest").
 */
const OPTION = /(^|,)([^=,]+)=((?:"[^"]*"|,,|[^,])*)/g;

/**
 * One argument of a tool with the values of its secret-looking options cut: a static volume's
 * mountOptions may carry a CIFS `password=` or a Ceph `secret=`, and a failed mount's message goes to
 * kubelet, which logs it and shows it in the pod's events. Options are comma-separated `key=value`
 * (an empty option, so CIFS's ",," for a comma in a value, is refused: shared/validate.ts).
 */
export function redactOptionValues(arg: string): string {
  if (!arg.includes('=')) return arg;
  return arg.replace(OPTION, (whole, lead: string, key: string, value: string) => {
    if (SECRET_KEY.test(key)) return `${lead}${key}=[redacted]`;
    const password = passwordInUser(key, value);
    return password === undefined ? whole : `${lead}${key}=${value.slice(0, value.length - password.length)}[redacted]`;
  });
}

/**
 * mount.cifs still takes a password within the user name (`user=bob%pass`, `username=`, deprecated but
 * documented in mount.cifs(8)): what follows the first `%` is a password.
 */
function passwordInUser(key: string, value: string): string | undefined {
  const at = /^(user|username)$/i.test(key) ? value.indexOf('%') : -1;
  return at >= 0 && at < value.length - 1 ? value.slice(at + 1) : undefined;
}

/**
 * The values `redactOptionValues` cuts from an argument, for cutting them out of the tool's own words
 * as well: a mount helper may echo its command line, or the value alone, in its error.
 */
export function secretOptionValues(arg: string): string[] {
  if (!arg.includes('=')) return [];
  // Also as the filesystem reads it (its quotes gone, a doubled comma single), which a helper may echo.
  const read = (value: string) => value.replace(/"([^"]*)"/g, '$1').replace(/,,/g, ',');
  return [...arg.matchAll(OPTION)].flatMap((m) => {
    const value = SECRET_KEY.test(m[2]!) ? m[3] : passwordInUser(m[2]!, m[3] ?? '');
    return value ? [...new Set([value, read(value)])] : [];
  });
}

/** Where kubelet puts a PV's secretRef keys among a FlexVolume driver's options, each value in base64. */
export const KUBELET_SECRET_PREFIX = 'kubernetes.io/secret/';

/**
 * The secret values a FlexVolume options map carries (kubelet's JSON argument, a PV's options): each
 * kubernetes.io/secret/<key> as sent and decoded, every secret-looking option as a whole (a password
 * written inline in the PV, which kubelet hands the driver as it is), and the secret options among its
 * mount options. What a driver's words are cut of (shared/backends/exec-driver.ts, flex/check.ts).
 */
export function secretsInOptions(options: object): string[] {
  return Object.entries(options).flatMap(([key, value]) => {
    if (typeof value !== 'string' || value === '') return [];
    if (key.startsWith(KUBELET_SECRET_PREFIX)) return [value, Buffer.from(value, 'base64').toString('utf8')];
    if (SECRET_KEY.test(key)) return [value];
    return MOUNT_OPTIONS_KEY.test(key) ? secretOptionValues(value) : [];
  });
}

/** The secrets of an argument that is kubelet's options JSON (a FlexVolume call's, a driver's); none of any other. */
export function secretsInArgument(arg: string): string[] {
  if (!arg.trimStart().startsWith('{')) return [];
  try {
    const options: unknown = JSON.parse(arg);
    return options && typeof options === 'object' && !Array.isArray(options) ? secretsInOptions(options) : [];
  } catch {
    // Not JSON after all (a path that starts with a brace): nothing of the options in it.
    return [];
  }
}

export type LogSink = (line: string) => void;

/** Levels from the most to the least verbose, as pino names them (the CSI server: csi/logging.ts). */
export const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/**
 * What the CSI server's parts log through: this file's Logger (a sink of JSON lines: the FlexVolume
 * file, the CSI wrapper's unit tests) or the CSI server's pino logger (csi/logging.ts).
 */
export interface Log {
  with(fields: LogFields): Log;
  /** Whether a line at this level would be written: lets a caller skip building a costly one. */
  enabled(level: LogLevel): boolean;
  trace(msg: string, fields?: LogFields): void;
  debug(msg: string, fields?: LogFields): void;
  info(msg: string, fields?: LogFields): void;
  warn(msg: string, fields?: LogFields): void;
  error(msg: string, fields?: LogFields): void;
}

/**
 * One JSON line per event at info or above, secrets redacted, with the fields every line carries (call,
 * volume id). No level option: the FlexVolume file and the CSI wrapper's unit tests all log at info;
 * the CSI server's `--log-level` is pino's (csi/logging.ts).
 */
export class Logger implements Log {
  constructor(
    private readonly sink: LogSink,
    private readonly base: LogFields = {},
  ) {}

  with(fields: LogFields): Logger {
    return new Logger(this.sink, { ...this.base, ...fields });
  }

  enabled(level: LogLevel): boolean {
    return LOG_LEVELS.indexOf(level) >= LOG_LEVELS.indexOf('info');
  }

  log(level: LogLevel, msg: string, fields: LogFields = {}): void {
    if (!this.enabled(level)) return;
    const line = JSON.stringify(redact({ time: isoNow(), level, msg, ...this.base, ...fields }));
    try {
      this.sink(line);
    } catch {
      // A log that cannot be written must not turn a working call into a failed one.
    }
  }
  trace(msg: string, fields?: LogFields): void {
    this.log('trace', msg, fields);
  }
  debug(msg: string, fields?: LogFields): void {
    this.log('debug', msg, fields);
  }
  info(msg: string, fields?: LogFields): void {
    this.log('info', msg, fields);
  }
  warn(msg: string, fields?: LogFields): void {
    this.log('warn', msg, fields);
  }
  error(msg: string, fields?: LogFields): void {
    this.log('error', msg, fields);
  }
}


/**
 * Where the FlexVolume log rotates: kubelet runs the executable for every call on every node for the
 * life of the node, and the state dir is a tmpfs (RAM), so the file must stay bounded. One old file
 * is kept (`<path>.1`): at most about twice this, plus the lines of calls racing a rotation.
 */
export const FILE_LOG_MAX_BYTES = 1024 * 1024;

/** Appends to a file (the FlexVolume log: stdout and stderr belong to kubelet), keeping one rotated copy. */
export function fileSink(path: string, maxBytes = FILE_LOG_MAX_BYTES): LogSink {
  return (line) => {
    mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
    try {
      // A rename replaces the older copy in one step; two calls racing here lose at most that copy.
      if (statSync(path).size >= maxBytes) renameSync(path, `${path}.1`);
    } catch {
      // no log yet
    }
    appendFileSync(path, `${line}\n`, { mode: 0o600 });
  };
}
