import { writeSync } from 'node:fs';
import { errnoCode } from '../shared/index.js';

/** The one JSON document kubelet parses from a FlexVolume call (stdout and stderr together). */
export interface FlexCapabilities {
  attach?: boolean;
  selinuxRelabel?: boolean;
  supportsMetrics?: boolean;
  fsGroup?: boolean;
  requiresFSResize?: boolean;
}

export interface FlexReply {
  status: 'Success' | 'Failure' | 'Not supported';
  message?: string;
  device?: string;
  volumeName?: string;
  attached?: boolean;
  volumeNewSize?: number;
  capabilities?: FlexCapabilities;
}

export const success = (fields: Omit<FlexReply, 'status'> = {}): FlexReply => ({ status: 'Success', ...fields });
export const failure = (message: string): FlexReply => ({ status: 'Failure', message });
export const notSupported = (message?: string): FlexReply =>
  message ? { status: 'Not supported', message } : { status: 'Not supported' };

/** kubelet treats a non-zero exit with Success as a failure, so the exit code follows the status. */
export function exitCodeOf(reply: FlexReply): number {
  return reply.status === 'Failure' ? 1 : 0;
}

/**
 * Writes the reply to fd 1 and exits. Not through process.stdout: on a pipe (kubelet's case) that
 * getter builds a net.Socket stream and loads the modules behind it, which cost `init` a sixth of
 * Node's whole start-up; the reply is one small write that a synchronous loop finishes.
 */
export function sendReply(reply: FlexReply): void {
  try {
    writeAll(1, JSON.stringify(reply));
  } catch {
    // Nobody reads the reply any more (EPIPE: the caller gave up): nothing else to tell it.
    process.exit(1);
  }
  process.exit(exitCodeOf(reply));
}

function writeAll(fd: number, text: string): void {
  let bytes = Buffer.from(text, 'utf8');
  while (bytes.length > 0) {
    try {
      bytes = bytes.subarray(writeSync(fd, bytes));
    } catch (err) {
      // A non-blocking pipe that is full: wait for the reader rather than lose the reply.
      if (errnoCode(err) !== 'EAGAIN') throw err;
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1);
    }
  }
}
