import type { CallError } from './rpc.js';
import type { ToolReport } from './tools.js';

/**
 * What the CSI server's main thread and its service thread say to each other (csi/service-thread.ts,
 * csi/service-thread-worker.ts). Both ends are this bundle, but a message is still checked for its
 * shape before it is used: a mistake here must be an error that says so, not a call left hanging.
 */

/** main -> service thread */
export type ToService =
  /**
   * Go: the server's argv, which the main thread has checked, and the count of calls forwarded and
   * not yet answered (one Int32 both threads see: a call still queued for the thread counts too),
   * and where the mount addon is, or null for none (shared/native-mount.ts).
   */
  | { type: 'start'; argv: string[]; unanswered: Int32Array; nativeMount: string | null }
  | { type: 'call'; id: number; service: string; method: string; request: unknown }
  /** A call the main thread answered itself (Probe), for the call metrics the service thread keeps. */
  | { type: 'observe'; method: string; code: string; seconds: number }
  | { type: 'stop' };


/** service thread -> main */
export type FromService =
  | { type: 'ready'; tools: ToolReport; methods: Record<string, string[]> }
  /** The service thread cannot go on (start-up failed, or a bug escaped): the process exits with this line. */
  | { type: 'failed'; message: string }
  | { type: 'answer'; id: number; error?: CallError; reply?: unknown }
  /** Sent every HEARTBEAT_MS while the thread's event loop turns: silence means it is stuck. */
  | { type: 'alive' }
  | { type: 'stopped' };

/** How often the service thread says it is alive (csi/service-thread.ts judges the silence). */
export const HEARTBEAT_MS = 1000;

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null;
const isStrings = (v: unknown): v is string[] => Array.isArray(v) && v.every((x) => typeof x === 'string');

export function parseToService(v: unknown): ToService {
  if (isRecord(v)) {
    if (v.type === 'call' && typeof v.id === 'number' && typeof v.service === 'string' && typeof v.method === 'string')
      return { type: 'call', id: v.id, service: v.service, method: v.method, request: v.request };
    if (v.type === 'observe' && typeof v.method === 'string' && typeof v.code === 'string' && typeof v.seconds === 'number')
      return { type: 'observe', method: v.method, code: v.code, seconds: v.seconds };
    if (v.type === 'stop') return { type: 'stop' };
    if (
      v.type === 'start' && isStrings(v.argv) && v.unanswered instanceof Int32Array && v.unanswered.buffer instanceof SharedArrayBuffer &&
      (v.nativeMount === null || typeof v.nativeMount === 'string')
    )
      return { type: 'start', argv: v.argv, unanswered: v.unanswered, nativeMount: v.nativeMount };
  }
  throw new Error(`the service thread received a message it does not know: ${JSON.stringify(v)?.slice(0, 200)}`);
}

export function parseFromService(v: unknown): FromService {
  if (isRecord(v)) {
    if (v.type === 'answer' && typeof v.id === 'number') {
      const e = v.error;
      if (e === undefined) return { type: 'answer', id: v.id, reply: v.reply };
      if (isRecord(e) && typeof e.code === 'number' && typeof e.details === 'string') return { type: 'answer', id: v.id, error: { code: e.code, details: e.details } };
    }
    if (v.type === 'ready' && isRecord(v.tools) && isStrings(v.tools.missing) && isStrings(v.tools.missingOptional) && isRecord(v.methods)) {
      const methods: Record<string, string[]> = {};
      for (const [service, names] of Object.entries(v.methods)) if (isStrings(names)) methods[service] = names;
      return { type: 'ready', tools: { missing: v.tools.missing, missingOptional: v.tools.missingOptional }, methods };
    }
    if (v.type === 'failed' && typeof v.message === 'string') return { type: 'failed', message: v.message };
    if (v.type === 'stopped') return { type: 'stopped' };
    if (v.type === 'alive') return { type: 'alive' };
  }
  throw new Error(`the CSI server received a message from its service thread it does not know: ${JSON.stringify(v)?.slice(0, 200)}`);
}
