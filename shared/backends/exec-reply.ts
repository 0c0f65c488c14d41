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

/** json.Unmarshal(output, &status) with status pre-filled as kubelet does; throws DecodeError as Go errs. */
function decodeStatus(text: string): DriverStatus {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new DecodeError(text.trim() === '' ? 'unexpected end of JSON input' : `invalid JSON: ${err instanceof Error ? err.message : String(err)}`);
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

/** Every top-level JSON object in `text`, in order (strings inside respected, invalid candidates skipped). */
export function jsonObjectsIn(text: string): { start: number; end: number; value: Record<string, unknown> }[] {
  const found: { start: number; end: number; value: Record<string, unknown> }[] = [];
  let i = text.indexOf('{');
  while (i >= 0) {
    const end = balancedEnd(text, i);
    if (end > 0) {
      try {
        const value: unknown = JSON.parse(text.slice(i, end));
        if (value && typeof value === 'object' && !Array.isArray(value)) {
          found.push({ start: i, end, value: value as Record<string, unknown> });
          i = text.indexOf('{', end);
          continue;
        }
      } catch {
        // Not JSON after all (a Python dict in a traceback): look further on.
      }
    }
    i = text.indexOf('{', i + 1);
  }
  return found;
}

/** Index just past the brace closing the one at `start`, or -1. */
function balancedEnd(text: string, start: number): number {
  let depth = 0;
  let inString = false;
  for (let i = start; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (c === '\\') i++;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === '{') depth++;
    else if (c === '}' && --depth === 0) return i + 1;
  }
  return -1;
}

export interface ReadReply {
  outcome: ReplyOutcome;
  /** What a lenient read set aside (text around the JSON, an exit code the JSON contradicts), for the log. */
  quirks: string[];
}

/**
 * The outcome of one driver call. `verb` words the failure as kubelet does ("mount command failed,
 * status: Failure, reason: ..."), so the CO sees the driver's own message.
 */
export function readReply(verb: string, done: Finished, mode: OutputMode): ReadReply {
  if (mode === 'lenient') return readLenient(verb, done);
  let status: DriverStatus;
  try {
    status = decodeStatus(done.output);
  } catch (err) {
    const why = err instanceof Error ? err.message : String(err);
    return { outcome: { kind: 'failure', message: `${verb}: the driver's reply is not one JSON status object (${why}; exit code ${done.exitCode}): ${excerpt(done.output)}` }, quirks: [] };
  }
  const outcome = judge(verb, status);
  if (done.exitCode !== 0 && outcome.kind === 'success')
    return { outcome: { kind: 'failure', message: `${verb}: driver bug: exit code ${done.exitCode} but Success in the reply` }, quirks: [] };
  return { outcome, quirks: [] };
}

function readLenient(verb: string, done: Finished): ReadReply {
  const quirks: string[] = [];
  // Drivers that print nothing for a verb they do not know mean "Not supported".
  if (done.output.trim() === '') {
    quirks.push(`empty output (exit code ${done.exitCode}) read as Not supported`);
    return { outcome: { kind: 'not-supported' }, quirks };
  }
  // The last object that carries a status: a traceback after the reply may hold a dict that is JSON too.
  const objects = jsonObjectsIn(done.output).filter((o) => Object.keys(o.value).some((k) => k.toLowerCase() === 'status'));
  const last = objects.at(-1);
  if (!last) return { outcome: { kind: 'failure', message: `${verb}: no JSON status object in the driver's output (exit code ${done.exitCode}): ${excerpt(done.output)}` }, quirks };
  const rest = (done.output.slice(0, last.start) + done.output.slice(last.end)).trim();
  if (rest) quirks.push(`output around the reply: ${excerpt(rest)}`);
  let status: DriverStatus;
  try {
    status = decodeStatus(JSON.stringify(last.value));
  } catch (err) {
    return { outcome: { kind: 'failure', message: `${verb}: the driver's reply does not fit a status (${err instanceof Error ? err.message : String(err)})` }, quirks };
  }
  const outcome = judge(verb, status);
  if (done.exitCode !== 0 && outcome.kind === 'success') quirks.push(`exit code ${done.exitCode} with Success`);
  return { outcome, quirks };
}

function judge(verb: string, status: DriverStatus): ReplyOutcome {
  if (status.status === 'Not supported') return { kind: 'not-supported' };
  if (status.status !== 'Success') return { kind: 'failure', message: `${verb} command failed, status: ${status.status}, reason: ${status.message}` };
  return { kind: 'success', status };
}

/** The end of a long output, where drivers explain. */
function excerpt(text: string): string {
  const t = text.trim();
  return t.length > 600 ? `...${t.slice(-600)}` : t;
}
