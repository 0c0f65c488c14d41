import { randomUUID } from 'node:crypto';
import type { handleUnaryCall, ServerUnaryCall, UntypedHandleCall } from '@grpc/grpc-js';
import { aborted, asTwinvolError, checkBounds, type ErrorCode, type Log, type LogFields, scrub, unimplemented } from '../shared/index.js';
import { GrpcStatus, type GrpcStatusCode, statusName } from './grpc-status.js';
import { type CallScope, callScope, secretValuesOf } from './logging-scope.js';

const GRPC_CODE: Record<ErrorCode, GrpcStatusCode> = {
  InvalidArgument: GrpcStatus.INVALID_ARGUMENT,
  NotFound: GrpcStatus.NOT_FOUND,
  AlreadyExists: GrpcStatus.ALREADY_EXISTS,
  FailedPrecondition: GrpcStatus.FAILED_PRECONDITION,
  ResourceExhausted: GrpcStatus.RESOURCE_EXHAUSTED,
  OutOfRange: GrpcStatus.OUT_OF_RANGE,
  Aborted: GrpcStatus.ABORTED,
  Unimplemented: GrpcStatus.UNIMPLEMENTED,
  Unavailable: GrpcStatus.UNAVAILABLE,
  Internal: GrpcStatus.INTERNAL,
};

export interface RpcOptions<Req> {
  /** What the call is about (volume id, snapshot id, node, path), for its log line. Never secrets. */
  describe?: (req: Req) => LogFields;
  /**
   * The key of the object the call changes ("volume/<id>"). A second call on the same key while the
   * first runs answers ABORTED at once, as the spec allows: the CO retries with backoff, and no
   * request queues behind a slow mount holding a gRPC slot. Read-only calls leave this out.
   */
  exclusiveOn?: (req: Req) => string | undefined;
}

/**
 * A handler's second argument adds fields to the call's log line; a `warning` among them makes the
 * line a warning (a call that succeeded but left something for an operator to look at).
 */
export type Handler<Req, Res> = (req: Req, note: (fields: LogFields) => void) => Promise<Res>;

/** Told of every call as it ends: its method, gRPC status name and duration (csi/metrics.ts counts them). */
export type CallObserver = (method: string, code: string, seconds: number) => void;

/**
 * Calls a CO makes all the time to learn what never changes, or to check liveness (the livenessprobe
 * sidecar calls Probe every few seconds): logged at debug when they succeed, so info is not a list of them.
 */
const ROUTINE = new Set(['Probe', 'GetPluginInfo', 'GetPluginCapabilities', 'ControllerGetCapabilities', 'NodeGetCapabilities', 'GroupControllerGetCapabilities']);

/** Subject fields every line of the call carries (the rest, paths and node ids, are on its rpc line). */
const SCOPED = ['volumeId', 'snapshotId', 'groupSnapshotId'];

/**
 * The one wrapper every RPC passes through: in-process serialisation per volume, error mapping
 * (TwinvolError code to gRPC status; anything else INTERNAL with its message only, never a stack),
 * one JSON log line per call with method, request id, subject, duration and result code, and the
 * call's scope (csi/logging-scope.ts) around the handler, so every line it leads to names the call.
 */
export class Rpc {
  private readonly inFlight = new Map<string, string>();

  constructor(
    private readonly log: Log,
    private readonly observe: CallObserver = () => {},
  ) {}

  unary<Req, Res>(method: string, handler: Handler<Req, Res>, options: RpcOptions<Req> = {}): handleUnaryCall<Req, Res> {
    return (call, callback) => {
      const started = performance.now();
      const req = call.request;
      const requestId = randomUUID();
      const scope: CallScope = { fields: { method, requestId }, secrets: [] };
      let subject: LogFields = {};
      let key: string | undefined;
      const noted: LogFields = {};
      const finish = (code: GrpcStatusCode, message?: string) => {
        if (key !== undefined) this.inFlight.delete(key);
        const seconds = (performance.now() - started) / 1000;
        const fields = { method, requestId, ...subject, ...clip(noted), durationMs: Math.round(seconds * 10_000) / 10, code: statusName(code), ...(message ? { message } : {}) };
        if (code === GrpcStatus.OK) {
          if (noted.warning !== undefined) this.log.warn('rpc', fields);
          else if (ROUTINE.has(method)) this.log.debug('rpc', fields);
          else this.log.info('rpc', fields);
        } else if (code === GrpcStatus.INTERNAL) this.log.error('rpc', fields);
        else this.log.warn('rpc', fields);
        this.observe(method, statusName(code), seconds);
      };
      const run = async (): Promise<Res> => {
        // Secrets first: whatever goes wrong below, no line of this call shows one.
        scope.secrets = secretValuesOf(req);
        // Bounded before anything reads it, the log line's subject included (shared/validate.ts).
        checkBounds(req, '');
        subject = clip(options.describe?.(req) ?? {});
        for (const k of SCOPED) if (subject[k] !== undefined) scope.fields[k] = subject[k];
        // The whole request, for a trace: its secrets censored by the logger (csi/logging.ts).
        if (this.log.enabled('trace')) this.log.trace('rpc request', { request: req });
        const wanted = options.exclusiveOn?.(req);
        if (wanted !== undefined) {
          const busy = this.inFlight.get(wanted);
          if (busy !== undefined) throw aborted(`${busy} on ${wanted} is still in progress; try again`);
          this.inFlight.set(wanted, method);
          key = wanted;
        }
        return handler(req, (fields) => Object.assign(noted, fields));
      };
      callScope.run(scope, () =>
        run().then(
          (reply) => {
            finish(GrpcStatus.OK);
            callback(null, reply);
          },
          (err: unknown) => {
            const e = asTwinvolError(err);
            const code = GRPC_CODE[e.code];
            // The status goes to the sidecars and kubelet, which put it in Events that more people read
            // than may read the Secret: the request's secret values are cut from it, as from the log.
            const details = boundedDetails(scrub(e.message, scope.secrets));
            finish(code, details);
            callback({ code, details });
          },
        ),
      );
    };
  }

  /** An RPC twinvol does not offer: UNIMPLEMENTED (never INTERNAL), logged like any other call. */
  unimplemented<Req, Res>(method: string): handleUnaryCall<Req, Res> {
    return this.unary<Req, Res>(method, async () => {
      throw unimplemented(`${method} is not implemented by twinvol`);
    });
  }
}

/** A call's gRPC error, as grpc-js's callback takes it. */
export interface CallError {
  code: number;
  details: string;
}

/**
 * Runs one unary handler on a request alone and settles with its reply or its gRPC error: how the
 * service thread answers a call that came across from the main thread (csi/service-thread-worker.ts),
 * and how tests call handlers in process. CSI has unary methods only, and twinvol's handlers read
 * nothing of the call but its request (Rpc.unary above, csi/exec-service.ts's routing).
 */
export function invokeUnary(handler: UntypedHandleCall, request: unknown): Promise<{ reply: unknown } | { error: CallError }> {
  const unary = handler as handleUnaryCall<unknown, unknown>;
  return new Promise((resolve) => {
    unary({ request } as ServerUnaryCall<unknown, unknown>, (err, reply) => {
      if (err) resolve({ error: { code: err.code ?? GrpcStatus.UNKNOWN, details: err.details ?? ('message' in err ? err.message : '') } });
      else resolve({ reply });
    });
  });
}

/** What of an error message a status carries: its first and last 2,048 characters (see `boundedDetails`). */
export const DETAILS_CAP = 4096;

/**
 * An error's message as the status and the call's log line carry it. A FlexVolume driver's reason can
 * be a whole log (test/exec/drivers/tmpfs.sh `verbose`), and a status whose message passed about 64 KB
 * was never answered at all: grpc-js could not send the trailers, and the caller waited out its
 * deadline and retried into the same silence. The beginning says which call and volume, the end is
 * where drivers and tools explain, so the middle goes. Percent-encoded in the trailer, 4,096
 * characters take at most 36 KiB, under the limit.
 */
export function boundedDetails(message: string): string {
  if (message.length <= DETAILS_CAP) return message;
  const half = DETAILS_CAP / 2;
  // Not between the halves of a surrogate pair: a lone half would reach the CO as U+FFFD.
  const head = message.slice(0, isLowSurrogate(message, half) ? half - 1 : half);
  const tailFrom = message.length - half;
  const tail = message.slice(isLowSurrogate(message, tailFrom) ? tailFrom + 1 : tailFrom);
  return `${head} ... (${message.length - head.length - tail.length} characters left out) ... ${tail}`;
}

function isLowSurrogate(text: string, at: number): boolean {
  const c = text.charCodeAt(at);
  return c >= 0xdc00 && c <= 0xdfff;
}

/** Subject fields come from the caller: a 4 MiB "volume id" must not become a 4 MiB log line. */
function clip(fields: LogFields): LogFields {
  return Object.fromEntries(Object.entries(fields).map(([k, v]) => [k, typeof v === 'string' && v.length > 256 ? `${v.slice(0, 256)}...` : v]));
}
