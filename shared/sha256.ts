import { sha256 } from '@noble/hashes/sha2.js';
import { bytesToHex, utf8ToBytes } from '@noble/hashes/utils.js';

/**
 * The digests of the latest names. A CSI server hashes the same few paths again and again (8 digests
 * per dir lifecycle, counted, for 2 paths: every look-up of a mount record by path hashes it), and
 * under 16 lifecycles in flight the pure-JS digest was 1.1% of its main thread in a CPU profile.
 * Bounded, and simply emptied when full.
 */
const recent = new Map<string, string>();
const RECENT_LIMIT = 1024;

/**
 * The hex sha256 of a string's UTF-8 bytes: mount records' names (shared/store/node-state.ts), long
 * catalog names (shared/store/catalog.ts) and kubelet's CSI staging directories
 * (shared/kubelet-paths.ts). Every FlexVolume node call names a mount record, and loading node:crypto
 * for these few bytes took about 5 ms of each call; @noble/hashes is a small, audited, pure-JS
 * implementation with the same digest, so records named by earlier builds are still found.
 */
export function sha256Hex(text: string): string {
  let hex = recent.get(text);
  if (hex === undefined) {
    if (recent.size >= RECENT_LIMIT) recent.clear();
    hex = bytesToHex(sha256(utf8ToBytes(text)));
    recent.set(text, hex);
  }
  return hex;
}
