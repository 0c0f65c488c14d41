import { type ChildProcess, spawn } from 'node:child_process';
import { basename, dirname } from 'node:path';
import { eventually } from './eventually.js';

/**
 * The attacker of the mount races (test/shared/mount-race.test.ts, test/fuzz/csi-publish-race.test.ts),
 * in its own process group: make `target` a directory, then replace it with a prepared symlink to
 * `outside` (rename(2) cannot put a symlink over a directory, so the directory goes first and the
 * symlink is renamed into its place in one step), then remove the link. A step that fails (the
 * directory is mounted on, or not empty) is skipped; the loop goes on until `stopFlipper`.
 */
export function startFlipper(target: string, outside: string): ChildProcess {
  const name = basename(target);
  const script = `cd '${dirname(target)}' || exit 1; while :; do mkdir '${name}' 2>/dev/null; sleep 0.001; rmdir '${name}' 2>/dev/null && ln -sfn '${outside}' .link && mv -T .link '${name}'; sleep 0.001; rm -f '${name}' 2>/dev/null; done`;
  return spawn('sh', ['-c', script], { stdio: 'ignore', detached: true });
}

/**
 * Kills the flipper's whole group and waits until no member is left. mkdir, ln, mv and rm are processes
 * of their own: killing only the shell let one of them create the target after a cleanup had listed the
 * directory, and the cleanup's rmdir failed with ENOTEMPTY (CI, 7e14dc8). A member killed inside a
 * system call still finishes that call, so the wait is for the group to be gone, not only the shell.
 */
export async function stopFlipper(f: ChildProcess | undefined, deadlineMs = 10_000): Promise<void> {
  if (!f?.pid) return;
  const group = -f.pid;
  const shellGone = f.exitCode !== null || f.signalCode !== null ? Promise.resolve() : new Promise((r) => f.once('exit', r));
  if (!signalGroup(group, 'SIGKILL')) return;
  await shellGone;
  if (!(await eventually(() => !signalGroup(group, 0), deadlineMs))) throw new Error(`the flipper's process group ${f.pid} is still alive after ${deadlineMs} ms`);
}

/** Whether the group had a member to signal (ESRCH: none left, not even a zombie). */
function signalGroup(group: number, signal: NodeJS.Signals | 0): boolean {
  try {
    process.kill(group, signal);
    return true;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ESRCH') return false;
    throw e;
  }
}
