import {
  chmod as chmodCb, chown as chownCb, close as closeCb, fsync as fsyncCb, ftruncate as ftruncateCb, lstat as lstatCb,
  mkdir as mkdirCb, open as openCb, readdir as readdirCb, readFile as readFileCb, readlink as readlinkCb,
  realpath as realpathCb, rm as rmCb, rmdir as rmdirCb, stat as statCb, statfs as statfsCb, truncate as truncateCb,
  unlink as unlinkCb, utimes as utimesCb, writeFile as writeFileCb,
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
function promisifiedOnFirstCall<F extends (...args: never[]) => unknown>(make: () => F): F {
  let made: F | undefined;
  const call = (...args: unknown[]): unknown => Reflect.apply((made ??= make()), undefined, args);
  // It hands every argument to what make() returns and gives back its result: it is an F.
  return call as unknown as F;
}

export const chmod = promisifiedOnFirstCall(() => promisify(chmodCb));
export const chown = promisifiedOnFirstCall(() => promisify(chownCb));
export const close = promisifiedOnFirstCall(() => promisify(closeCb));
export const fsync = promisifiedOnFirstCall(() => promisify(fsyncCb));
export const ftruncate = promisifiedOnFirstCall(() => promisify(ftruncateCb));
export const lstat = promisifiedOnFirstCall(() => promisify(lstatCb));
export const mkdir = promisifiedOnFirstCall(() => promisify(mkdirCb));
export const open = promisifiedOnFirstCall(() => promisify(openCb));
export const readdir = promisifiedOnFirstCall(() => promisify(readdirCb));
export const readFile = promisifiedOnFirstCall(() => promisify(readFileCb));
export const readlink = promisifiedOnFirstCall(() => promisify(readlinkCb));
// The native one, as fs/promises' is: fs.realpath is a JS walk that lstats every component, and an
// lstat of a dead FUSE or NFS mount fails (ENOTCONN) where realpath(3) still answers the path.
export const realpath = promisifiedOnFirstCall(() => promisify(realpathCb.native));
export const rm = promisifiedOnFirstCall(() => promisify(rmCb));
export const rmdir = promisifiedOnFirstCall(() => promisify(rmdirCb));
export const stat = promisifiedOnFirstCall(() => promisify(statCb));
export const statfs = promisifiedOnFirstCall(() => promisify(statfsCb));
export const truncate = promisifiedOnFirstCall(() => promisify(truncateCb));
export const unlink = promisifiedOnFirstCall(() => promisify(unlinkCb));
export const utimes = promisifiedOnFirstCall(() => promisify(utimesCb));
export const writeFile = promisifiedOnFirstCall(() => promisify(writeFileCb));
