import { appendFileSync, mkdirSync, renameSync, statSync } from 'node:fs';
import { dirname } from 'node:path';

export type LogFields = Record<string, unknown>;

/** Keys whose values never reach a log: FlexVolume secrets arrive as kubernetes.io/secret/<key>. */
const SECRET_KEY = /secret|password|passwd|token|credential|passphrase|private.?key/i;

/** A deep copy with every secret-looking value replaced, including inside nested maps and arrays. */
export function redact(value: unknown, key = ''): unknown {
  if (key && SECRET_KEY.test(key)) return '[redacted]';
  if (Array.isArray(value)) return value.map((v) => redact(v));
  if (value && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[k] = redact(v, k);
    return out;
  }
  return value;
}

export type LogSink = (line: string) => void;

/** One JSON line per event, secrets redacted, with the fields every line carries (call, volume id). */
export class Logger {
  constructor(
    private readonly sink: LogSink,
    private readonly base: LogFields = {},
  ) {}

  with(fields: LogFields): Logger {
    return new Logger(this.sink, { ...this.base, ...fields });
  }

  log(level: 'info' | 'warn' | 'error', msg: string, fields: LogFields = {}): void {
    const line = JSON.stringify(redact({ time: new Date().toISOString(), level, msg, ...this.base, ...fields }));
    try {
      this.sink(line);
    } catch {
      // A log that cannot be written must not turn a working call into a failed one.
    }
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

export const stderrSink: LogSink = (line) => {
  process.stderr.write(`${line}\n`);
};

const MAX_LOG_BYTES = 10 * 1024 * 1024;

/** Appends to a file (the FlexVolume log: stdout and stderr belong to kubelet), keeping one rotated copy. */
export function fileSink(path: string): LogSink {
  return (line) => {
    mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
    try {
      if (statSync(path).size > MAX_LOG_BYTES) renameSync(path, `${path}.1`);
    } catch {
      // no log yet
    }
    appendFileSync(path, `${line}\n`, { mode: 0o600 });
  };
}
