import { AsyncLocalStorage } from 'node:async_hooks';
import type { LogFields } from '../shared/index.js';

/**
 * What every log line written during one RPC carries, and what it must never show. csi/rpc.ts opens
 * a scope per call; the CSI server's logger (csi/logging.ts) reads it for each line, so lines written
 * deep inside a call (an external command, the exec backend's driver calls, a warning) name the call
 * without every function on the way passing a logger down. Kept apart from csi/logging.ts so the RPC
 * wrapper does not load pino (its unit tests log through shared/log.ts's Logger).
 */
export interface CallScope {
  /** method, requestId, and the ids the call is about (volumeId, snapshotId, ...). */
  readonly fields: LogFields;
  /** The request's secret values: cut out of any line the call writes, in every form they travel in. */
  secrets: readonly string[];
}

export const callScope = new AsyncLocalStorage<CallScope>();

/**
 * Every value of the request's `secrets` maps (CSI names every secrets field so), as sent. The forms
 * they travel in (base64, as the exec backend hands them to a FlexVolume driver; JSON-escaped, as a
 * driver's reply quotes them) are scrub's to derive (shared/backends/exec-driver.ts), once per call.
 */
export function secretValuesOf(request: unknown): string[] {
  if (!request || typeof request !== 'object') return [];
  const out = new Set<string>();
  for (const [key, value] of Object.entries(request)) {
    if (key !== 'secrets' || !value || typeof value !== 'object') continue;
    for (const v of Object.values(value)) if (typeof v === 'string' && v.length > 0) out.add(v);
  }
  return [...out];
}
