import { spawn, type SpawnOptions } from 'node:child_process';

export interface Collected {
  /** null when a signal ended it. */
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs `command args` with stdin closed and collects its exit code, stdout and stderr apart: the one
 * place the suites' "run an executable once and look at what it said" goes through
 * (test/helpers/flex-runner.ts runAdmin, test/csi/helpers/server.ts runCsiOnce, test/sea's env -i runs).
 */
export function collect(command: string, args: readonly string[], options: Pick<SpawnOptions, 'cwd' | 'env'> = {}): Promise<Collected> {
  return new Promise((done, fail) => {
    const child = spawn(command, [...args], { ...options, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout?.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', fail);
    child.on('close', (code) => done({ code, stdout, stderr }));
  });
}
