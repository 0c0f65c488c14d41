import { readFileSync } from 'node:fs';

/**
 * SIGKILL to `pid` only while it is still the process a test started, as its argv tells (`isOurs`):
 * a pid a test logged may belong to a process long gone, and the kernel hands it out again. With
 * pid_max at 32768 (seen on these machines) and a suite that starts tens of thousands of processes,
 * it comes round within a run: the exec tests' clean-up killed a hang driver's logged pids after its
 * deadline had already killed them, and under load that SIGKILL landed on another test's `sleep`
 * (test/shared/spawn-native.test.ts read its tool's argv empty, a zombie).
 */
export function killIfStill(pid: number, isOurs: (argv: string[]) => boolean): void {
  if (!Number.isInteger(pid) || pid <= 1) return;
  let argv: string[];
  try {
    argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').slice(0, -1);
  } catch {
    return;
  }
  if (!isOurs(argv)) return;
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // gone since
  }
}
