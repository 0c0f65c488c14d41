import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createLog } from '../../../csi/logging.js';

// The CSI server's log (csi/logging.ts) cleans every line of the call's secrets before pino writes
// it. A cleaning that throws must cost the line, never the call or the server.
let dir: string;
let fd: number;
beforeEach(() => {
  dir = mkdtempSync('/tmp/twinvol-test-logging-');
  fd = openSync(join(dir, 'log'), 'w');
});
afterEach(() => {
  closeSync(fd);
  rmSync(dir, { recursive: true, force: true });
});
const lines = () => readFileSync(join(dir, 'log'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);

/** Fields whose reading throws an error that quotes a secret. */
const hostile = () =>
  Object.defineProperty({}, 'reply', {
    enumerable: true,
    get() {
      throw new Error('hunter2 is the password');
    },
  });

describe('the CSI server log', () => {
  it('withholds a line whose fields cannot be read, without a word of it, and goes on logging', () => {
    const log = createLog('info', fd);
    expect(() => log.warn('driver said hunter2', { volumeId: 'v', detail: hostile() })).not.toThrow();
    log.info('next line', { volumeId: 'v' });
    const [withheld, next] = lines();
    expect(withheld).toMatchObject({ level: 'error', component: 'twinvol-csi', withheldLevel: 'warn', msg: "a log line could not be cleaned of the call's secrets and was withheld" });
    expect(JSON.stringify(withheld)).not.toContain('hunter2');
    expect(next).toMatchObject({ level: 'info', msg: 'next line', volumeId: 'v' });
  });

  it('a child logger whose fields cannot be read carries none of them, and its lines are written', () => {
    const log = createLog('info', fd);
    let child: ReturnType<typeof log.with> | undefined;
    expect(() => (child = log.with({ volumeId: 'v', detail: hostile() }))).not.toThrow();
    child?.info('from the child', { step: 1 });
    const [line] = lines();
    expect(line).toMatchObject({ level: 'info', msg: 'from the child', step: 1, withheldFields: true });
    expect(JSON.stringify(line)).not.toContain('hunter2');
    expect(line).not.toHaveProperty('volumeId');
  });
});
