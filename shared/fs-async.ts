import {
  chmod as chmodCb, chmodSync, chown as chownCb, chownSync, close as closeCb, closeSync, fsync as fsyncCb, fsyncSync,
  fstat as fstatCb, fstatSync, ftruncate as ftruncateCb, ftruncateSync, lstat as lstatCb, lstatSync, mkdir as mkdirCb, mkdirSync, open as openCb, openSync,
  read as readCb, readdir as readdirCb, readdirSync, readFile as readFileCb, readFileSync, readSync, readlink as readlinkCb, readlinkSync,
  realpath as realpathCb, realpathSync, rm as rmCb, rmdir as rmdirCb, rmdirSync, rmSync, stat as statCb, statfs as statfsCb,
  statfsSync, statSync, truncate as truncateCb, truncateSync, unlink as unlinkCb, unlinkSync, utimes as utimesCb, utimesSync,
  writeFile as writeFileCb, writeFileSync,
} from 'node:fs';
import { promisify } from 'node:util';

/**
 * The core's asynchronous file calls: libuv's threadpool, as with node:fs/promises, through the
 * callback API of node:fs, which Node has loaded before any code runs. node:fs/promises is a module
 * of its own that pulls in FileHandle's streams, readline and the watchers, about 1.9 ms of every
 * FlexVolume node verb here (docs/architecture.md, "Start-up of the FlexVolume executable"), for the
 * dozen calls below. An open file is a number here, closed with close(). test/flex/startup-builtins.test.ts
 * checks that node verbs do not load node:fs/promises.
 *
 * Each is promisified on its first call: promisify copies a function's properties, and twenty of
 * them at load cost getvolumename, which makes none of these calls, about 0.4 ms.
 */
function fileCall<F extends (...args: never[]) => Promise<unknown>>(make: () => F, sync: (...args: never[]) => unknown, walk = false): F {
  let made: F | undefined;
  const call = (...args: unknown[]): unknown => {
    if (!(walk ? walksBlock : blockingNow())) return Reflect.apply((made ??= make()), undefined, args);
    try {
      return Promise.resolve(Reflect.apply(sync, undefined, args));
    } catch (err) {
      return Promise.reject(err);
    }
  };
  // It hands every argument to what make() returns, or to its synchronous twin (same arguments, same
  // result, thrown rather than rejected), and gives back a promise of that result: it is an F.
  return call as unknown as F;
}

let blockingNow: () => boolean = () => false;
let walksBlock = false;

/**
 * Makes every call below run on the calling thread, for a process that has nothing else to do
 * meanwhile: a FlexVolume call (flex/dispatch.ts). Its first asynchronous file call started libuv's
 * four threads, and a dir mount waited for them and for a round trip on each of about ten calls: a
 * profile of the mount (node --cpu-prof, 12 calls) had 6.4 ms of its 58 ms idle, 2.6 ms of them
 * behind the first lstat. The calls are the same, with the same answers and errors.
 */
export function blockingFileCalls(): void {
  blockingNow = () => true;
  walksBlock = true;
}

/**
 * Whether a call that may wait long (a walk of a volume's data; shared/mounter.ts: a filesystem's
 * mount or unmount) runs on the calling thread: in a FlexVolume call, which has nothing else to do.
 */
export function longCallsBlock(): boolean {
  return walksBlock;
}

/**
 * The CSI server's service thread (csi/service-thread-worker.ts): a file call runs on the thread
 * while `alone()` says no other call is being served, and on libuv's threadpool otherwise, where
 * other calls' work overlaps its wait for the disk (an fsync is 0.1-0.5 ms here). Alone, a round
 * trip through the threadpool only added its wake-ups: a dir lifecycle's RPCs made about 20 of them,
 * and ran 10-12% faster (1 against 1, interleaved) with them on the thread. The calls that walk a
 * volume's data (removing a tree, the fsGroup walk) stay on the threadpool whatever `alone()` says:
 * one of them over a million files would hold the thread, and every call behind it, for seconds.
 */
export function blockingFileCallsWhile(alone: () => boolean): void {
  blockingNow = alone;
  walksBlock = false;
}

export const chmod = fileCall(() => promisify(chmodCb), chmodSync);
export const chown = fileCall(() => promisify(chownCb), chownSync);
export const close = fileCall(() => promisify(closeCb), closeSync);
export const fstat = fileCall(() => promisify(fstatCb), fstatSync);
export const fsync = fileCall(() => promisify(fsyncCb), fsyncSync);
export const ftruncate = fileCall(() => promisify(ftruncateCb), ftruncateSync);
export const lstat = fileCall(() => promisify(lstatCb), lstatSync);
export const mkdir = fileCall(() => promisify(mkdirCb), mkdirSync);
export const open = fileCall(() => promisify(openCb), openSync);
/** pread(2): the bytes read into `buffer` at `offset`, from `position` of the file. */
export const readAt = fileCall(
  () => (fd: number, buffer: Buffer, offset: number, length: number, position: number) =>
    new Promise<number>((resolve, reject) => readCb(fd, buffer, offset, length, position, (err, bytesRead) => (err ? reject(err) : resolve(bytesRead)))),
  readSync,
);
export const readdir = fileCall(() => promisify(readdirCb), readdirSync);
export const readFile = fileCall(() => promisify(readFileCb), readFileSync);
export const readlink = fileCall(() => promisify(readlinkCb), readlinkSync);
// The native one, as fs/promises' is: fs.realpath is a JS walk that lstats every component, and an
// lstat of a dead FUSE or NFS mount fails (ENOTCONN) where realpath(3) still answers the path.
export const realpath = fileCall(() => promisify(realpathCb.native), realpathSync.native);
export const rm = fileCall(() => promisify(rmCb), rmSync);
export const rmdir = fileCall(() => promisify(rmdirCb), rmdirSync);
export const stat = fileCall(() => promisify(statCb), statSync);
export const statfs = fileCall(() => promisify(statfsCb), statfsSync);
export const truncate = fileCall(() => promisify(truncateCb), truncateSync);
export const unlink = fileCall(() => promisify(unlinkCb), unlinkSync);
export const utimes = fileCall(() => promisify(utimesCb), utimesSync);
export const writeFile = fileCall(() => promisify(writeFileCb), writeFileSync);

const removeInWalk = fileCall(() => promisify(rmCb), rmSync, true);

/**
 * The same calls for walking a volume's data, which may hold any number of files: never on the
 * service thread (blockingFileCallsWhile), in a FlexVolume call on its own thread as every call is.
 */
export const walkCalls = {
  chmod: fileCall(() => promisify(chmodCb), chmodSync, true),
  chown: fileCall(() => promisify(chownCb), chownSync, true),
  lstat: fileCall(() => promisify(lstatCb), lstatSync, true),
  readdir: fileCall(() => promisify(readdirCb), readdirSync, true),
  /**
   * A whole tree, whatever it holds, and no error when it is gone: a deleted volume's data, a work
   * directory. One that turns out small (removeSmallTree) goes at once where file calls may block now.
   */
  rmTree: (path: string): Promise<void> => (blockingNow() && removeSmallTree(path) ? Promise.resolve() : removeInWalk(path, { recursive: true, force: true })),
};

/** A file this small is a record, not a volume's data: unlinking it frees a block or two. */
const SMALL_FILE = 64 * 1024;

/**
 * Removes `path` if it holds at most 16 entries, each a file of at most SMALL_FILE or an empty
 * directory (a deleted volume that was never written to: its record and its empty data directory),
 * and says whether it did; anything else it stops at, and the walk removes the rest. On the
 * threadpool such a tree took eight round trips, each a thread woken and the service thread woken
 * after it (about 0.1 ms each on this VM's halted vCPUs): DeleteVolume's only file calls off the thread.
 */
function removeSmallTree(path: string): boolean {
  try {
    // A link is removed, never followed (as rm does): its target is not part of the tree.
    if (!lstatSync(path).isDirectory()) return false;
    const entries = readdirSync(path, { withFileTypes: true });
    if (entries.length > 16) return false;
    for (const e of entries) {
      const child = `${path}/${e.name}`;
      // A directory that is not empty fails here (ENOTEMPTY), as does one whose type the listing left unknown (EISDIR).
      if (e.isDirectory()) rmdirSync(child);
      else if (!e.isFile() || lstatSync(child).size <= SMALL_FILE) unlinkSync(child);
      else return false;
    }
    rmdirSync(path);
    return true;
  } catch {
    return false;
  }
}
