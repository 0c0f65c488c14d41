import { getSystemErrorName } from 'node:util';
import { nativeMount, type NativeSpawn } from './native-mount.js';
import { type Captured, envPairs, keptOutput, setSpawner, signalQuietly, type SpawnRequest } from './runner.js';

/**
 * Tools started by the addon (native/spawn.c), for the CSI server: posix_spawn clones without
 * copying the process's memory map, where libuv's spawn forks and copies its page tables, a cost
 * that grows with the server's size (a fork of a 146 MiB process took 5.6 ms here, posix_spawn
 * 0.5 ms at any size), on whichever thread spawns, since threads share the map. The call blocks its
 * thread only until the tool has exec'd, so the service thread spawns its tools itself rather than
 * posting them to a spawning thread (shared/spawn-thread.ts), which stays for an addon that cannot
 * (none built, one built before this, or a kernel without pidfd_open: `otherwise`).
 *
 * The rules are spawnCaptured's (shared/runner.ts), and test/shared/runner.test.ts holds every
 * spawner to them: literal arguments, the request's environment, the latest outputCap bytes of each
 * stream, SIGKILL at the deadline, and an answer at the tool's exit whoever still holds its pipes.
 */
export function spawnNatively(otherwise: () => void): void {
  const spawn = nativeMount()?.spawnTool;
  if (!spawn?.supported()) return otherwise();
  setSpawner((request) => runNatively(spawn, request));
}

/** One tool, run to its exit: the Captured that spawnCaptured reports for the same request. */
export function runNatively(spawn: NativeSpawn, request: SpawnRequest): Promise<Captured> {
  return new Promise((resolve) => {
    const started = process.hrtime.bigint();
    const durationMs = () => Number(process.hrtime.bigint() - started) / 1e6;
    let deadline: ReturnType<typeof setTimeout> | undefined;
    let timedOut = false;
    const extraFds = request.fd3 === undefined ? [] : [request.fd3];
    const began = spawn.start(request.command, [request.command, ...request.args], envPairs(request.env), extraFds, request.outputCap, (exit) => {
      clearTimeout(deadline);
      const stdout = keptOutput(exit.stdout, exit.stdoutDropped, request.outputCap);
      const stderr = keptOutput(exit.stderr, exit.stderrDropped, request.outputCap);
      resolve({ exitCode: exit.code ?? -1, stdout, stderr, durationMs: durationMs(), timedOut });
    });
    if ('errno' in began) {
      // As spawn's error event words it: "spawn ENOENT".
      resolve({ exitCode: -1, stdout: '', stderr: '', durationMs: durationMs(), timedOut: false, startError: `spawn ${startErrorName(began.errno)}` });
      return;
    }
    // The tool is reaped only in the exit callback, which clears this first: the pid is still the tool's.
    deadline = setTimeout(() => {
      timedOut = true;
      signalQuietly(began.pid, 'SIGKILL');
    }, request.timeoutMs);
  });
}

/** Why a native start failed, by the errno's name ("ENOENT"); the addon answers -1 for what it could not read. */
export function startErrorName(errno: number): string {
  return errno > 0 ? getSystemErrorName(-errno) : 'an unreadable answer';
}
