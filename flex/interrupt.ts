import { constants } from 'node:os';

/**
 * SIGINT and SIGTERM as an abort, for a command that has mounts, loop devices, a scratch directory or a
 * server of its own to take down before it exits (`twinvol compare`, the demo): Node's default for
 * either signal is to die at once, and then none of that is undone and a child server is left running
 * under pid 1. While this listens, a second signal is swallowed as well, so that pressing Ctrl-C again
 * cannot cut the clean-up short.
 */
export interface Interrupt {
  /** Aborted, with reason `stopped by <SIGNAL>`, by the first signal. */
  readonly signal: AbortSignal;
  /** The first signal received, if any. */
  readonly received: NodeJS.Signals | undefined;
  /** Stops listening: from then on the signals' defaults apply again. */
  close(): void;
}

export function onInterrupt(): Interrupt {
  const abort = new AbortController();
  let received: NodeJS.Signals | undefined;
  const stop = (signal: NodeJS.Signals) => {
    if (received) return;
    received = signal;
    abort.abort(new Error(`stopped by ${signal}`));
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
  return {
    signal: abort.signal,
    get received() {
      return received;
    },
    close() {
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
    },
  };
}

/** The shell's exit code for a run ended by `signal`: 128 + its number (130 for SIGINT, 143 for SIGTERM). */
export function signalExitCode(signal: NodeJS.Signals): number {
  return 128 + constants.signals[signal];
}
