import { type Logger as Pino, pino } from 'pino';
import { type Log, type LogFields, type LogLevel, redact, scrub } from '../shared/index.js';
import { callScope } from './logging-scope.js';

/**
 * The CSI server's log: one JSON object per line on stderr through pino, at `--log-level` and above.
 *
 * pino writes through its synchronous destination (sonic-boom on fd 2, no worker thread, no
 * transport), so the bundle stays one file and a line is out before the process exits. Lines keep the
 * shape the server always wrote (`level` as a word, `time` in ISO 8601, `msg`), which the test suites
 * and anyone's log pipeline read. Secrets are kept out three ways: pino's redact censors the
 * `secrets` fields of a logged request, shared/log.ts's `redact` any secret-looking key in the fields,
 * and every value of the current call's secrets is cut out of the finished line (csi/logging-scope.ts),
 * which covers a value echoed inside a message (a driver's reply, an error).
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
      mixin: () => callScope.getStore()?.fields ?? {},
      redact: { paths: ['secrets', 'request.secrets'], censor: '[redacted]' },
      hooks: {
        streamWrite: (line) => {
          const secrets = callScope.getStore()?.secrets;
          return secrets?.length ? scrub(line, secrets) : line;
        },
      },
    },
    destination,
  );
  return new PinoLog(logger);
}

class PinoLog implements Log {
  constructor(private readonly pino: Pino) {}

  with(fields: LogFields): Log {
    return new PinoLog(this.pino.child(redacted(fields)));
  }
  enabled(level: LogLevel): boolean {
    return this.pino.isLevelEnabled(level);
  }
  trace(msg: string, fields: LogFields = {}): void {
    if (this.pino.isLevelEnabled('trace')) this.pino.trace(redacted(fields), msg);
  }
  debug(msg: string, fields: LogFields = {}): void {
    if (this.pino.isLevelEnabled('debug')) this.pino.debug(redacted(fields), msg);
  }
  info(msg: string, fields: LogFields = {}): void {
    this.pino.info(redacted(fields), msg);
  }
  warn(msg: string, fields: LogFields = {}): void {
    this.pino.warn(redacted(fields), msg);
  }
  error(msg: string, fields: LogFields = {}): void {
    this.pino.error(redacted(fields), msg);
  }
}

function redacted(fields: LogFields): LogFields {
  const out = redact(fields);
  return out && typeof out === 'object' && !Array.isArray(out) ? (out as LogFields) : {};
}
