import { mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { FILE_LOG_MAX_BYTES } from '../../shared/log.js';
import { flexOptions, runFlex } from '../helpers/flex-runner.js';
import { createScratch, type Scratch } from '../helpers/scratch.js';

/**
 * The FlexVolume executable's log (<stateDir>/log/flex.log, shared/log.ts fileSink) lives on a tmpfs
 * and is written by every kubelet call for the life of the node: once it reaches FILE_LOG_MAX_BYTES it
 * is renamed to flex.log.1 (replacing the older copy) and a new one begun. Driven through the real
 * executable; the log is filled to the cap by hand, since a megabyte of calls would take minutes.
 */
let s: Scratch;
beforeEach(() => {
  s = createScratch();
});
afterEach(() => s.cleanup());

const logDir = () => join(s.stateDir, 'log');
const logFile = () => join(logDir(), 'flex.log');
const linesOf = (path: string) => readFileSync(path, 'utf8').split('\n').filter(Boolean);

/** A log of whole JSON lines marked `tag`, at least `bytes` long, as earlier calls would have left it. */
function fillLog(bytes: number, tag: string): string {
  mkdirSync(logDir(), { recursive: true, mode: 0o700 });
  const line = `${JSON.stringify({ level: 'info', msg: 'call', call: 'isattached', fill: tag, pad: 'x'.repeat(200) })}\n`;
  const text = line.repeat(Math.ceil(bytes / line.length));
  writeFileSync(logFile(), text, { mode: 0o600 });
  return text;
}

/** One real call that reaches the dispatcher (and so the log): a volume that does not exist. */
const call = (id: string) => runFlex(s.env, ['getvolumename', flexOptions(`pv-${id}`, { volumeId: id })]);

describe('the FlexVolume log stays bounded', () => {
  it('below the cap, calls append to flex.log and nothing is rotated', async () => {
    await call('ghost-a');
    await call('ghost-b');
    expect(readdirSync(logDir())).toEqual(['flex.log']);
    expect(linesOf(logFile()).map((l) => JSON.parse(l).volumeId)).toEqual(['ghost-a', 'ghost-b']);
  });

  it('at the cap, the next call moves the log to flex.log.1 and starts a new one; only one old file is kept', async () => {
    const first = fillLog(FILE_LOG_MAX_BYTES, 'first');
    expect((await call('ghost-1')).reply.status).toBe('Failure');
    expect(readdirSync(logDir()).sort()).toEqual(['flex.log', 'flex.log.1']);
    expect(readFileSync(`${logFile()}.1`, 'utf8')).toBe(first);
    expect(linesOf(logFile()).map((l) => JSON.parse(l).volumeId)).toEqual(['ghost-1']);

    // Below the cap again: appended, the old file untouched.
    await call('ghost-2');
    expect(linesOf(logFile()).map((l) => JSON.parse(l).volumeId)).toEqual(['ghost-1', 'ghost-2']);
    expect(readFileSync(`${logFile()}.1`, 'utf8')).toBe(first);

    // Full once more: the second rotation replaces the first old file rather than keeping both.
    const second = fillLog(FILE_LOG_MAX_BYTES, 'second');
    await call('ghost-3');
    expect(readdirSync(logDir()).sort()).toEqual(['flex.log', 'flex.log.1']);
    expect(readFileSync(`${logFile()}.1`, 'utf8')).toBe(second);
    expect(linesOf(logFile()).map((l) => JSON.parse(l).volumeId)).toEqual(['ghost-3']);
  });

  it('calls racing at the cap leave two files, each bounded and made of whole JSON lines', async () => {
    fillLog(FILE_LOG_MAX_BYTES, 'racing');
    const ids = Array.from({ length: 8 }, (_, i) => `ghost-r${i}`);
    await Promise.all(ids.map((id) => call(id)));
    expect(readdirSync(logDir()).sort()).toEqual(['flex.log', 'flex.log.1']);
    const current = linesOf(logFile()).map((l) => JSON.parse(l) as Record<string, unknown>);
    // Every line in the new file is one of these calls' (the filler went to flex.log.1), whole.
    expect(current.length).toBeGreaterThan(0);
    expect(current.every((l) => typeof l.volumeId === 'string' && ids.includes(l.volumeId))).toBe(true);
    expect(statSync(logFile()).size).toBeLessThan(FILE_LOG_MAX_BYTES);
    // The old file: the filler (or, if a racing rotation replaced it, calls' lines), never more than
    // the cap plus the lines of the racing calls.
    const old = linesOf(`${logFile()}.1`);
    expect(old.every((l) => typeof JSON.parse(l) === 'object')).toBe(true);
    expect(statSync(`${logFile()}.1`).size).toBeLessThan(FILE_LOG_MAX_BYTES + ids.length * 4096);
  });
});
