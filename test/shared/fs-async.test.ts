// The core's file calls (shared/fs-async.ts) answer alike on libuv's threadpool and, in a FlexVolume
// call, on the calling thread: the same results, the same errors. On the CSI server's service thread
// they run on the thread only while it serves one call, and a walk over a volume's data never does.
// This file switches its module's modes; vitest gives every test file modules of its own.
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import * as fsAsync from '../../shared/fs-async.js';

const dir = mkdtempSync('/tmp/twinvol-test-fs-async-');
afterAll(() => rmSync(dir, { recursive: true, force: true }));
writeFileSync(join(dir, 'file'), 'contents');

/** What each call gives, or the code it fails with: run once each way. */
async function answers(tag: string): Promise<unknown[]> {
  const settle = (p: Promise<unknown>) => p.then((v) => v, (err: NodeJS.ErrnoException) => `rejected ${err.code}`);
  const sub = join(dir, `made-${tag}`);
  const fd = await fsAsync.open(join(dir, 'file'), 'r');
  const synced = await fsAsync.fsync(fd).then(() => 'synced');
  const buf = Buffer.alloc(4);
  const read = await fsAsync.readAt(fd, buf, 0, 4, 3).then((n) => [n, buf.toString()]);
  const size = await fsAsync.fstat(fd).then((st) => st.size);
  await fsAsync.close(fd);
  const dirFd = await fsAsync.open(dir, 'r');
  const readDir = await settle(fsAsync.readAt(dirFd, Buffer.alloc(1), 0, 1, 0));
  await fsAsync.close(dirFd);
  return [
    read,
    size,
    readDir,
    await settle(fsAsync.readFile(join(dir, 'file'), 'utf8')),
    await settle(fsAsync.stat(join(dir, 'file')).then((st) => [st.ino, st.size])),
    await settle(fsAsync.lstat(join(dir, 'missing'))),
    await settle(fsAsync.realpath(`${dir}/./file`)),
    await settle(fsAsync.mkdir(sub, { recursive: true }).then((first) => first === sub)),
    await settle(fsAsync.mkdir(sub)),
    await settle(fsAsync.readdir(dir).then((names) => names.filter((n) => !n.startsWith('made-')))),
    await settle(fsAsync.rmdir(sub)),
    await settle(fsAsync.unlink(join(dir, 'missing'))),
    synced,
  ];
}

describe('the core file calls', () => {
  it('answer and fail alike on the threadpool and blocking, and blocking they are done when called', async () => {
    const onThreadpool = await answers('a');
    fsAsync.blockingFileCalls();
    const blocking = await answers('b');
    expect(blocking).toEqual(onThreadpool);
    expect(onThreadpool).toEqual([[4, 'tent'], 8, 'rejected EISDIR', 'contents', expect.any(Array), 'rejected ENOENT', join(dir, 'file'), true, 'rejected EEXIST', ['file'], undefined, 'rejected ENOENT', 'synced']);
    // Done before the caller awaits anything: on this thread.
    const made = join(dir, 'made-now');
    void fsAsync.mkdir(made);
    expect(existsSync(made)).toBe(true);
    // An error is a rejected promise, as on the threadpool, never a throw at the call.
    const refused = fsAsync.readFile(join(dir, 'missing'));
    await expect(refused).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('on the service thread, run on it only while it is alone, and never walk a volume there', async () => {
    // On the thread, a call has settled by the time the microtasks queued with it have run; on the
    // threadpool it settles in a later turn of the event loop, however fast the pool's thread is.
    const settlesAtOnce = async (p: Promise<unknown>) => {
      let settled = false;
      void p.then(() => (settled = true));
      for (let i = 0; i < 3; i++) await Promise.resolve();
      const now = settled;
      await p;
      return now;
    };
    let alone = true;
    fsAsync.blockingFileCallsWhile(() => alone);
    const aloneMade = await settlesAtOnce(fsAsync.mkdir(join(dir, 'alone')));
    alone = false;
    const crowdedMade = await settlesAtOnce(fsAsync.mkdir(join(dir, 'crowded')));
    expect([aloneMade, crowdedMade]).toEqual([true, false]);
    expect(existsSync(join(dir, 'crowded'))).toBe(true);
    // A tree that holds data goes on the threadpool even when the thread is alone: a directory with
    // something in it, or a file larger than a record. In a FlexVolume call, on the thread.
    alone = true;
    const removeTree = (name: string, data: 'nested' | 'large') => {
      mkdirSync(join(dir, name, 'data'));
      writeFileSync(join(dir, name, 'volume.json'), '{}');
      writeFileSync(data === 'nested' ? join(dir, name, 'data', 'inside') : join(dir, name, 'image'), Buffer.alloc(data === 'nested' ? 1 : 65 * 1024));
      return settlesAtOnce(fsAsync.walkCalls.rmTree(join(dir, name)));
    };
    expect(await removeTree('alone', 'nested')).toBe(false);
    mkdirSync(join(dir, 'alone'));
    expect(await removeTree('alone', 'large')).toBe(false);
    // A small one (a record and an empty directory: a volume never written to) goes at once while alone.
    mkdirSync(join(dir, 'small'));
    mkdirSync(join(dir, 'small', 'data'));
    writeFileSync(join(dir, 'small', 'volume.json'), '{}');
    expect(await settlesAtOnce(fsAsync.walkCalls.rmTree(join(dir, 'small')))).toBe(true);
    // A link to a small tree: the link goes, the tree it points to stays whole.
    mkdirSync(join(dir, 'target'));
    writeFileSync(join(dir, 'target', 'volume.json'), '{}');
    symlinkSync(join(dir, 'target'), join(dir, 'link'));
    await fsAsync.walkCalls.rmTree(join(dir, 'link'));
    expect([existsSync(join(dir, 'link')), readFileSync(join(dir, 'target', 'volume.json'), 'utf8')]).toEqual([false, '{}']);
    fsAsync.blockingFileCalls();
    expect(await removeTree('crowded', 'nested')).toBe(true);
    expect([existsSync(join(dir, 'alone')), existsSync(join(dir, 'crowded')), existsSync(join(dir, 'small'))]).toEqual([false, false, false]);
  });
});
