import { spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { eventually } from './eventually.js';
import { killIfStill } from './kill-if-still.js';
import { processGone } from '../exec/helpers.js';

// The tests' clean-up kills logged pids only while they are still what a test started: a pid reused
// by another process since (pid_max 32768 comes round within a run) is left alone.
describe('killIfStill', () => {
  it('leaves a process whose argv is not the one logged, and kills one whose argv is', async () => {
    const child = spawn('sleep', ['30.0811'], { stdio: 'ignore' });
    const pid = child.pid!;
    try {
      await eventually(() => !processGone(pid));
      killIfStill(pid, (argv) => argv[1] === '300');
      expect(processGone(pid)).toBe(false);
      killIfStill(pid, (argv) => argv[0] === 'sleep' && argv[1] === '30.0811');
      expect(await eventually(() => child.exitCode !== null || child.signalCode !== null)).toBe(true);
      expect(child.signalCode).toBe('SIGKILL');
    } finally {
      child.kill('SIGKILL');
    }
  });

  it('does nothing for a pid that names no process', () => {
    expect(() => killIfStill(2 ** 22 + 1, () => true)).not.toThrow();
  });
});
