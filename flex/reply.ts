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

/** Writes the reply and exits once it is flushed: a pipe write in Node completes asynchronously. */
export function sendReply(reply: FlexReply): void {
  process.stdout.write(JSON.stringify(reply), () => process.exit(exitCodeOf(reply)));
}
