import type { NativeSpawn } from '../native-mount.js';
import { signalQuietly } from '../runner.js';
import { startErrorName } from '../spawn-native.js';
import type { DriverEnded, DriverRunOptions } from './exec-run.js';

type StartDriver = NonNullable<NativeSpawn['startDriver']>;

/**
 * One driver call through the addon's posix_spawn (native/spawn.c spawnDriver), with the rules
 * shared/backends/exec-run.ts keeps through execa: stdin on /dev/null, stdout and stderr both on
 * `outputFd`, a session and process group of the driver's own, SIGTERM at the deadline and SIGKILL
 * `graceMs` later, and the whole group killed once a call past its deadline has ended.
 *
 * Why not execa here: its spawn is libuv's, which forks, and a fork copies the page tables of the
 * whole server on the calling thread (docs/exec-backend.md has the figures): from a server of about
 * 170 MiB a driver call held the CSI service thread 3.4 ms, where posix_spawn holds it 0.2 ms.
 */
export function runDriverNatively(start: StartDriver, file: string, args: readonly string[], env: readonly string[], outputFd: number, opts: DriverRunOptions): Promise<DriverEnded> {
  return new Promise((resolve) => {
    let timedOut = false;
    const timers: ReturnType<typeof setTimeout>[] = [];
    const began = start(file, [file, ...args], env, outputFd, (code, signal) => {
      for (const t of timers) clearTimeout(t);
      // What the driver started lives on in its group after a deadline: none of it may (a hung mount).
      if (timedOut && 'pid' in began) signalQuietly(-began.pid, 'SIGKILL');
      resolve({ exitCode: code ?? -1, timedOut, ...(code === null ? { signal: signal ?? 'unknown' } : {}), ...('pid' in began ? { pid: began.pid } : {}) });
    });
    if ('errno' in began) {
      // As execa words a start that failed: "spawn <file> ENOENT".
      resolve({ exitCode: -1, timedOut: false, startError: `spawn ${file} ${startErrorName(began.errno)}` });
      return;
    }
    opts.onStart?.(began.pid);
    // The driver is reaped only in the exit callback, which clears these first: the pid is still its own.
    timers.push(
      setTimeout(() => {
        timedOut = true;
        signalQuietly(began.pid, 'SIGTERM');
        timers.push(setTimeout(() => signalQuietly(began.pid, 'SIGKILL'), opts.graceMs));
      }, opts.timeoutMs),
    );
  });
}
