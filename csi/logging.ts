import { type Logger as Pino, pino } from 'pino';
import { type Log, type LogFields, type LogLevel, redact, scrub } from '../shared/index.js';
import { callScope } from './logging-scope.js';

/**
 * The CSI server's log: one JSON object per line on stderr through pino, at `--log-level` and above.
 *
 * pino writes through its synchronous destination (sonic-boom on fd 2, no worker thread, no
 * transport), so the bundle stays one file and a line is out before the process exits. Lines keep the
 * shape the server always wrote (`level` as a word, `time` in ISO 8601, `msg`), which the test suites
 * and anyone's log pipeline read. Secrets are kept out two ways, both in `clean` below, before pino
 * sees a field: shared/log.ts's `redact` censors any secret-looking key (a logged request's `secrets`
 * map included, so pino's own redact option would only repeat it), and every value of the current
 * call's secrets is cut out of each string the line holds, its message included
 * (csi/logging-scope.ts), which covers a value echoed in an error or a driver's reply. Strings only,
 * before the line is serialised: cutting a short secret ("1234") out of the finished text could cut
 * into a number or a `true` and leave a line that is not JSON.
 */
export function createLog(level: LogLevel, fd = 2): Log {
  const destination = pino.destination({ dest: fd, sync: true });
  // A log that cannot be written (stderr closed) must not take the server down with an 'error' event.
  destination.on('error', () => {});
  const logger = pino(
    {
      level,
      base: { component: 'twinvol-csi' },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
      mixin: () => clean(callScope.getStore()?.fields ?? {}),
    },
    destination,
  );
  return new PinoLog(logger, (line) => destination.write(line));
}

/** In place of a line that could not be cleaned: what it was not, without a word of it. */
const WITHHELD_LINE = 'a log line could not be cleaned of the call\'s secrets and was withheld';

class PinoLog implements Log {
  constructor(
    private readonly pino: Pino,
    private readonly fallback: (line: string) => void,
  ) {}

  /** A child whose fields could not be cleaned carries none of them, only that they were withheld (see `write`). */
  with(fields: LogFields): Log {
    let own: LogFields;
    try {
      own = clean(fields);
    } catch {
      own = { withheldFields: true };
    }
    return new PinoLog(this.pino.child(own), this.fallback);
  }
  enabled(level: LogLevel): boolean {
    return this.pino.isLevelEnabled(level);
  }
  trace(msg: string, fields?: LogFields): void {
    this.write('trace', msg, fields);
  }
  debug(msg: string, fields?: LogFields): void {
    this.write('debug', msg, fields);
  }
  info(msg: string, fields?: LogFields): void {
    this.write('info', msg, fields);
  }
  warn(msg: string, fields?: LogFields): void {
    this.write('warn', msg, fields);
  }
  error(msg: string, fields?: LogFields): void {
    this.write('error', msg, fields);
  }
  /** Level first: a line below --log-level (an info line at warn, say) is not walked for secrets at all. */
  private write(level: LogLevel, msg: string, fields: LogFields = {}): void {
    if (!this.pino.isLevelEnabled(level)) return;
    try {
      this.pino[level](clean(fields), cut(msg));
    } catch {
      // A line whose cleaning throws (a secret pattern V8 refused once did: abe9218) is not written as
      // it is, and the throw must not reach the caller: on the service thread it ended the server, its
      // message quoting the secret. The error's own words are left out for the same reason.
      this.fallback(`${JSON.stringify({ level: 'error', time: new Date().toISOString(), component: 'twinvol-csi', withheldLevel: level, msg: WITHHELD_LINE })}\n`);
    }
  }
}

/** The current call's secret values cut out of a string. */
function cut(text: string): string {
  const secrets = callScope.getStore()?.secrets;
  return secrets?.length ? scrub(text, secrets) : text;
}

/** A line's fields with secret-looking keys redacted and the call's secret values cut out of every string (keys too). */
function clean(fields: LogFields): LogFields {
  const secrets = callScope.getStore()?.secrets ?? [];
  const walk = (value: unknown): unknown => {
    if (typeof value === 'string') return secrets.length ? scrub(value, secrets) : value;
    if (Array.isArray(value)) return value.map(walk);
    if (value && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([k, v]) => [secrets.length ? scrub(k, secrets) : k, walk(v)]));
    return value;
  };
  const out = walk(redact(fields));
  return out && typeof out === 'object' && !Array.isArray(out) ? (out as LogFields) : {};
}
