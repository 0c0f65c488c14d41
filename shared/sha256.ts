import { sha256 } from '@noble/hashes/sha2.js';
import { bytesToHex, utf8ToBytes } from '@noble/hashes/utils.js';

/**
 * The hex sha256 of a string's UTF-8 bytes: mount records' names (shared/store/node-state.ts), long
 * catalog names (shared/store/catalog.ts) and kubelet's CSI staging directories
 * (shared/kubelet-paths.ts). Every FlexVolume node call names a mount record, and loading node:crypto
 * for these few bytes took about 5 ms of each call; @noble/hashes is a small, audited, pure-JS
 * implementation with the same digest, so records named by earlier builds are still found.
 */
export function sha256Hex(text: string): string {
  return bytesToHex(sha256(utf8ToBytes(text)));
}
