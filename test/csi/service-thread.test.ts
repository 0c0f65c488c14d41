import { spawnSync } from 'node:child_process';
import { closeSync, constants, lstatSync, openSync, readFileSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { type CallOutcome, outcome } from './helpers/client.js';
import { useCsiServer } from './helpers/fixture.js';
import { MiB, mountCap, size } from './helpers/requests.js';

/**
 * The CSI server answers Identity on its main thread and every other call on its service thread
 * (csi/service-thread.ts). Here the service thread is stuck for real: a volume's record is replaced
 * by a FIFO, so the record read of ControllerGetVolume (a synchronous open, shared/store/json-record.ts)
 * waits for a writer, as it would on a network filesystem that stopped answering.
 */
describe('a stuck service thread', () => {
  const csi = useCsiServer({ nodeId: 'node-a' });

  /** Probe's outcome every 250 ms until `done` holds of it, or the deadline passes; the last one. */
  async function probeUntil(done: (o: CallOutcome) => boolean, deadlineMs: number): Promise<CallOutcome> {
    const until = Date.now() + deadlineMs;
    for (;;) {
      const o = await outcome(csi.identity('Probe'));
      if (done(o) || Date.now() > until) return o;
      await new Promise((r) => setTimeout(r, 250));
    }
  }

  it('Probe answers while it is stuck, fails once it has been silent for 10 s, and is ready again once it goes on', async () => {
    const created = await csi.ctl('CreateVolume', { name: 'stuck-1', volume_capabilities: [mountCap()], parameters: { backend: 'dir' }, capacity_range: size(MiB) });
    const id = created.volume.volume_id;
    const record = join(csi.s.dataRoot, 'volumes', id, 'volume.json');
    const text = readFileSync(record);
    rmSync(record);
    expect(spawnSync('mkfifo', ['-m', '0600', record]).status).toBe(0);
    let unblocked = false;
    /** A writer for the FIFO: the stuck read gets the record's text, and the record file comes back. */
    const unblock = () => {
      if (unblocked) return;
      unblocked = true;
      try {
        // Non-blocking: with no reader waiting this fails (ENXIO) instead of waiting for one.
        const fd = openSync(record, constants.O_WRONLY | constants.O_NONBLOCK);
        writeSync(fd, text);
        closeSync(fd);
      } catch {
        // No reader: nothing is stuck on it.
      }
    };
    try {
      const stuck = outcome(csi.ctl('ControllerGetVolume', { volume_id: id }));
      await new Promise((r) => setTimeout(r, 300));
      // Answered by the main thread while the service thread waits.
      expect(await outcome(csi.identity('Probe'))).toEqual({ code: 'OK', message: '' });
      const failed = await probeUntil((o) => o.code !== 'OK', 20_000);
      expect(failed.code).toBe('FAILED_PRECONDITION');
      const said = /^the service thread has answered nothing for (\d+) s \(1 call\(s\) waiting\): a call is stuck/.exec(failed.message);
      // At least the 10 s of STALL_MS (csi/service-thread.ts); more if this machine was slow to ask.
      expect(Number(said?.[1])).toBeGreaterThanOrEqual(10);
      unblock();
      expect(await stuck).toEqual({ code: 'OK', message: '' });
      expect(await probeUntil((o) => o.code === 'OK', 5_000)).toEqual({ code: 'OK', message: '' });
    } finally {
      unblock();
      // The record as it was: the FIFO is replaced once its reader has read it.
      if (lstatSync(record).isFIFO()) rmSync(record);
      writeFileSync(record, text);
    }
  }, 40_000);
});
