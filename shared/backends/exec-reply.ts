/**
 * A FlexVolume driver's reply, read as kubelet reads it (kubernetes pkg/volume/flexvolume/driver-call.go:
 * `DriverCall.Run` and `handleCmdResponse`), or leniently for drivers known to print around their JSON.
 *
 * kubelet takes stdout and stderr combined and hands the whole of it to Go's json.Unmarshal into its
 * DriverStatus struct. So, strictly: the output is exactly one JSON value (whitespace around it only);
 * `null` decodes to nothing (an empty status, hence a failure); any other non-object is a type error;
 * keys match the struct's field names case-insensitively; a field of the wrong type is an error;
 * unknown keys are ignored. Then "Not supported" is its own answer, anything but "Success" a failure
 * with the driver's message, and a Success with a non-zero exit code is still a failure ("driver bug").
 */

export interface DriverCapabilities {
  attach: boolean;
  selinuxRelabel: boolean;
  supportsMetrics: boolean;
  fsGroup: boolean;
  requiresFSResize: boolean;
}

/** kubelet's defaults (driver-call.go defaultCapabilities): what a driver's init leaves out is assumed. */
export function defaultCapabilities(): DriverCapabilities {
  return { attach: true, selinuxRelabel: true, supportsMetrics: false, fsGroup: true, requiresFSResize: true };
}

export interface DriverStatus {
  status: string;
  message: string;
  device: string;
  volumeName: string;
  attached: boolean;
  capabilities: DriverCapabilities | null;
  volumeNewSize: number;
}

export type ReplyOutcome =
  | { kind: 'success'; status: DriverStatus }
  | { kind: 'not-supported' }
  | { kind: 'failure'; message: string };

export type OutputMode = 'strict' | 'lenient';

/** How a call ended, as far as the reply is concerned. */
export interface Finished {
  exitCode: number;
  output: string;
}

type FieldKind = 'string' | 'bool' | 'int' | 'caps';
const STATUS_FIELDS: Record<Exclude<keyof DriverStatus, 'capabilities'> | 'capabilities', FieldKind> = {
  status: 'string',
  message: 'string',
  device: 'string',
  volumeName: 'string',
  attached: 'bool',
  capabilities: 'caps',
  volumeNewSize: 'int',
};
const CAPABILITY_FIELDS: readonly (keyof DriverCapabilities)[] = ['attach', 'selinuxRelabel', 'supportsMetrics', 'fsGroup', 'requiresFSResize'];

class DecodeError extends Error {}

/** Go's field matching: the exact name first, else the first case-insensitive match. */
function fieldFor<K extends string>(key: string, names: readonly K[]): K | undefined {
  return names.find((n) => n === key) ?? names.find((n) => n.toLowerCase() === key.toLowerCase());
}

function decodeCapabilities(value: unknown, into: DriverCapabilities | null): DriverCapabilities | null {
  if (value === null) return null;
  if (typeof value !== 'object' || Array.isArray(value)) throw new DecodeError('capabilities: not an object');
  // A non-nil pointer is decoded into: a second "capabilities" key merges with the first.
  const caps = into ?? { attach: false, selinuxRelabel: false, supportsMetrics: false, fsGroup: false, requiresFSResize: false };
  for (const [key, v] of Object.entries(value as Record<string, unknown>)) {
    const field = fieldFor(key, CAPABILITY_FIELDS);
    if (!field || v === null) continue;
    if (typeof v !== 'boolean') throw new DecodeError(`capabilities.${field}: not a bool`);
    caps[field] = v;
  }
  return caps;
}

/**
 * Why JSON.parse refused the output, in our words: V8's message quotes a piece of the output itself
 * ('Unexpected token 'T', "Tr0ub4dor-"... is not valid JSON'), which may be a secret, and no scrubbing
 * of whole values finds a piece. Only its position, a number, is kept.
 */
function invalidJson(err: unknown): string {
  const message = err instanceof Error ? err.message : '';
  if (message.startsWith('Unexpected end of JSON input')) return 'unexpected end of JSON input';
  // Anchored at the end: a message quoting the output ends "is not valid JSON", never so.
  const position = / JSON at position (\d+)(?: \(line \d+ column \d+\))?$/.exec(message)?.[1];
  return position === undefined ? 'invalid JSON' : `invalid JSON at position ${position}`;
}

/** json.Unmarshal(output, &status) with status pre-filled as kubelet does; throws DecodeError as Go errs. */
function decodeStatus(text: string): DriverStatus {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new DecodeError(text.trim() === '' ? 'unexpected end of JSON input' : invalidJson(err));
  }
  const status: DriverStatus = { status: '', message: '', device: '', volumeName: '', attached: false, capabilities: defaultCapabilities(), volumeNewSize: 0 };
  if (value === null) return status;
  if (typeof value !== 'object' || Array.isArray(value)) throw new DecodeError('cannot unmarshal a non-object into the driver status');
  const names = Object.keys(STATUS_FIELDS) as (keyof DriverStatus)[];
  // Go keeps decoding after a type error and reports the first one at the end.
  let firstError: DecodeError | undefined;
  for (const [key, v] of Object.entries(value as Record<string, unknown>)) {
    const field = fieldFor(key, names);
    if (!field) continue;
    try {
      const kind = STATUS_FIELDS[field];
      if (kind === 'caps') status.capabilities = decodeCapabilities(v, status.capabilities);
      else if (v === null) continue;
      else if (kind === 'string') {
        if (typeof v !== 'string') throw new DecodeError(`${field}: not a string`);
        (status as unknown as Record<string, string>)[field] = v;
      } else if (kind === 'bool') {
        if (typeof v !== 'boolean') throw new DecodeError(`${field}: not a bool`);
        status.attached = v;
      } else {
        if (typeof v !== 'number' || !Number.isSafeInteger(v)) throw new DecodeError(`${field}: not an int64`);
        status.volumeNewSize = v;
      }
    } catch (err) {
      if (!(err instanceof DecodeError)) throw err;
      firstError ??= err;
    }
  }
  if (firstError) throw firstError;
  return status;
}

export interface FoundObject {
  start: number;
  end: number;
  value: Record<string, unknown>;
}

/** How much reading `jsonObjectsIn` did: characters read while looking for objects, and handed to JSON.parse. */
export interface ScanMeter {
  scanned: number;
  parsed: number;
}

/**
 * Every top-level JSON object in `text`, in order: from each `{` met left to right, the object that
 * JSON.parse accepts from there to its closing brace, if one does (then the search goes on after it);
 * other `{` are passed over (a Python dict in a traceback). A driver's output is up to 4 MiB, so this
 * stays linear however many `{` it holds: see ObjectReader.
 */
export function jsonObjectsIn(text: string, meter?: ScanMeter): FoundObject[] {
  const found: FoundObject[] = [];
  const reader = new ObjectReader(text);
  let i = text.indexOf('{');
  while (i >= 0) {
    const end = reader.endOf(i);
    const value = end > 0 ? parseObject(text.slice(i, end)) : undefined;
    if (meter && end > 0) meter.parsed += end - i;
    if (value) {
      found.push({ start: i, end, value });
      i = text.indexOf('{', end);
    } else i = text.indexOf('{', i + 1);
  }
  if (meter) meter.scanned += reader.scanned;
  return found;
}

/** JSON.parse's answer for a slice the reader found to be one object (a safety net: it should agree). */
function parseObject(slice: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(slice);
    return value && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

// What the reader expects next in the innermost open object or array.
const KEY_OR_CLOSE = 0;
const KEY = 1;
const COLON = 2;
const VALUE = 3;
const VALUE_OR_CLOSE = 4;
const COMMA_OR_CLOSE = 5;
const SCALAR = /^(?:true|false|null|-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?)$/;
const ESCAPED = new Set(['"', '\\', '/', 'b', 'f', 'n', 'r', 't']);
const HEX4 = /^[0-9A-Fa-f]{4}$/;

/** A character of a number or a literal (a superset: the run they make is checked whole). */
function isScalarChar(c: number): boolean {
  return (c >= 0x30 && c <= 0x39) || (c >= 0x61 && c <= 0x7a) || (c >= 0x41 && c <= 0x5a) || c === 0x2b || c === 0x2d || c === 0x2e;
}

/**
 * Which `{` of a text start a JSON object, and where each ends, by JSON's grammar (exactly what
 * JSON.parse accepts). Reading from a `{` settles every object it opens on the way too: a value's
 * reading does not depend on what holds it, so an inner object is valid exactly when the outer reading
 * closes it, and where the outer reading fails, every reading from a start it holds open fails at the
 * same character. So a `{` is read from only if no reading has settled it: one inside a string of an
 * earlier reading. Two readings alive at once are then in and out of a string opposite each other (each
 * quote flips both; a backslash outside a string ends one), so a third start meets one of them outside
 * a string, which settles it or stops there: no character is read more than three times.
 */
class ObjectReader {
  /** Per position: 0 not settled, -1 no object starts there, else the end of the one that does. */
  private readonly ends: Int32Array;
  private readonly open: number[] = [];
  private pos = 0;
  scanned = 0;

  constructor(private readonly text: string) {
    this.ends = new Int32Array(text.length);
  }

  /** The end of the object starting at the `{` at `start`, or -1. */
  endOf(start: number): number {
    if (this.ends[start] === 0) this.readFrom(start);
    return this.ends[start] ?? -1;
  }

  private readFrom(start: number): void {
    const { text, open } = this;
    open.length = 0;
    open.push(start);
    this.pos = start + 1;
    let want = KEY_OR_CLOSE;
    while (open.length > 0 && this.pos < text.length) {
      const next = this.step(want);
      if (next < 0) break;
      want = next;
    }
    this.scanned += Math.min(this.pos + 1, text.length) - start;
    // Stopped short (not JSON here, or the end of the text): every object still open has no end.
    for (const s of open) if (s >= 0) this.ends[s] = -1;
  }

  /** Reads one token at `pos` (whitespace skipped): what is wanted next, or -1 where the text is not JSON. */
  private step(want: number): number {
    const c = this.text[this.pos] ?? '';
    const valueWanted = want === VALUE || want === VALUE_OR_CLOSE;
    const inObject = (this.open.at(-1) ?? -1) >= 0;
    if (c === ' ' || c === '\t' || c === '\n' || c === '\r') return this.advance(want);
    if (c === '"' && (valueWanted || want === KEY || want === KEY_OR_CLOSE)) return this.string() ? (valueWanted ? COMMA_OR_CLOSE : COLON) : -1;
    if (c === '{' && valueWanted) return this.push(this.pos, KEY_OR_CLOSE);
    if (c === '[' && valueWanted) return this.push(-1, VALUE_OR_CLOSE);
    if (c === '}' && inObject && (want === KEY_OR_CLOSE || want === COMMA_OR_CLOSE)) return this.close();
    if (c === ']' && !inObject && (want === VALUE_OR_CLOSE || want === COMMA_OR_CLOSE)) return this.close();
    if (c === ':' && want === COLON) return this.advance(VALUE);
    if (c === ',' && want === COMMA_OR_CLOSE) return this.advance(inObject ? KEY : VALUE);
    if (valueWanted && isScalarChar(c.charCodeAt(0))) return this.scalar() ? COMMA_OR_CLOSE : -1;
    return -1;
  }

  private advance(want: number): number {
    this.pos++;
    return want;
  }

  /** An object (its start) or an array (-1) opens at `pos`. */
  private push(start: number, want: number): number {
    this.open.push(start);
    return this.advance(want);
  }

  private close(): number {
    const start = this.open.pop() ?? -1;
    if (start >= 0) this.ends[start] = this.pos + 1;
    return this.advance(COMMA_OR_CLOSE);
  }

  /** A string from the quote at `pos`; true with `pos` past it, false with `pos` where it went wrong. */
  private string(): boolean {
    const { text } = this;
    for (this.pos++; this.pos < text.length; this.pos++) {
      const c = text.charCodeAt(this.pos);
      if (c === 0x22) {
        this.pos++;
        return true;
      }
      if (c < 0x20) return false;
      if (c !== 0x5c) continue;
      const e = text[this.pos + 1] ?? '';
      if (e === 'u' && HEX4.test(text.slice(this.pos + 2, this.pos + 6))) this.pos += 5;
      else if (ESCAPED.has(e)) this.pos++;
      else return false;
    }
    return false;
  }

  /** A number, true, false or null from `pos`: the run of characters that can make one, checked whole. */
  private scalar(): boolean {
    const { text } = this;
    const from = this.pos;
    while (this.pos < text.length && isScalarChar(text.charCodeAt(this.pos))) this.pos++;
    return SCALAR.test(text.slice(from, this.pos));
  }
}

export interface ReadReply {
  outcome: ReplyOutcome;
  /** What a lenient read set aside (text around the JSON, an exit code the JSON contradicts), for the log. */
  quirks: string[];
}

/**
 * What of the driver's own text (its output, its status and message) a failure or a quirk may show:
 * FlexDrivers cuts the call's secrets out (shared/secret-text.ts `shownOutput`). It gets the whole text, before
 * any excerpt is cut, so a secret straddling the cut is still found whole.
 */
export type ShowDriverText = (driverText: string) => string;

/**
 * The outcome of one driver call. `verb` words the failure as kubelet does ("mount command failed,
 * status: Failure, reason: ..."), so the CO sees the driver's own message.
 */
export function readReply(verb: string, done: Finished, mode: OutputMode, show: ShowDriverText = (text) => text): ReadReply {
  if (mode === 'lenient') return readLenient(verb, done, show);
  let status: DriverStatus;
  try {
    status = decodeStatus(done.output);
  } catch (err) {
    const why = err instanceof Error ? err.message : String(err);
    return { outcome: { kind: 'failure', message: `${verb}: the driver's reply is not one JSON status object (${why}; exit code ${done.exitCode}): ${excerpt(show(done.output))}` }, quirks: [] };
  }
  const outcome = judge(verb, status, show);
  if (done.exitCode !== 0 && outcome.kind === 'success')
    return { outcome: { kind: 'failure', message: `${verb}: driver bug: exit code ${done.exitCode} but Success in the reply` }, quirks: [] };
  return { outcome, quirks: [] };
}

function readLenient(verb: string, done: Finished, show: ShowDriverText): ReadReply {
  const quirks: string[] = [];
  // Drivers that print nothing for a verb they do not know mean "Not supported". One that a signal
  // ended (exit code -1: the OOM killer's SIGKILL) never answered at all: taken for "Not supported",
  // its detach was skipped (ControllerUnpublishVolume OK, the device still attached) and never asked again.
  if (done.output.trim() === '' && done.exitCode < 0)
    return { outcome: { kind: 'failure', message: `${verb}: the driver was killed by a signal before it printed anything` }, quirks };
  if (done.output.trim() === '') {
    quirks.push(`empty output (exit code ${done.exitCode}) read as Not supported`);
    return { outcome: { kind: 'not-supported' }, quirks };
  }
  // The last object that carries a status: a traceback after the reply may hold a dict that is JSON too.
  const objects = jsonObjectsIn(done.output).filter((o) => Object.keys(o.value).some((k) => k.toLowerCase() === 'status'));
  const last = objects.at(-1);
  if (!last) return { outcome: { kind: 'failure', message: `${verb}: no JSON status object in the driver's output (exit code ${done.exitCode}): ${excerpt(show(done.output))}` }, quirks };
  const rest = (done.output.slice(0, last.start) + done.output.slice(last.end)).trim();
  if (rest) quirks.push(`output around the reply: ${excerpt(show(rest))}`);
  let status: DriverStatus;
  try {
    status = decodeStatus(JSON.stringify(last.value));
  } catch (err) {
    return { outcome: { kind: 'failure', message: `${verb}: the driver's reply does not fit a status (${err instanceof Error ? err.message : String(err)})` }, quirks };
  }
  const outcome = judge(verb, status, show);
  if (done.exitCode !== 0 && outcome.kind === 'success') quirks.push(`exit code ${done.exitCode} with Success`);
  return { outcome, quirks };
}

function judge(verb: string, status: DriverStatus, show: ShowDriverText): ReplyOutcome {
  if (status.status === 'Not supported') return { kind: 'not-supported' };
  if (status.status !== 'Success') return { kind: 'failure', message: `${verb} command failed, status: ${show(status.status)}, reason: ${show(status.message)}` };
  return { kind: 'success', status };
}

/** The end of a long output, where drivers explain; cut from text already shown (see ShowDriverText). */
function excerpt(shown: string): string {
  const t = shown.trim();
  return t.length > 600 ? `...${t.slice(-600)}` : t;
}
