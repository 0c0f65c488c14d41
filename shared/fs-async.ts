import * as fs from 'node:fs';
import { promisify } from 'node:util';

/**
 * The core's asynchronous file calls: libuv's threadpool, as with node:fs/promises, through the
 * callback API of node:fs, which Node has loaded before any code runs. node:fs/promises is a module
 * of its own that pulls in FileHandle's streams, readline and the watchers, about 1.9 ms of every
 * FlexVolume node verb here (docs/architecture.md, "Start-up of the FlexVolume executable"), for the
 * dozen calls below. An open file is a number here, closed with close(). test/flex/startup-builtins.test.ts
 * checks that node verbs do not load node:fs/promises.
 */
export const chmod = promisify(fs.chmod);
export const chown = promisify(fs.chown);
export const close = promisify(fs.close);
export const fsync = promisify(fs.fsync);
export const ftruncate = promisify(fs.ftruncate);
export const lstat = promisify(fs.lstat);
export const mkdir = promisify(fs.mkdir);
export const open = promisify(fs.open);
export const readdir = promisify(fs.readdir);
export const readFile = promisify(fs.readFile);
export const readlink = promisify(fs.readlink);
// The native one, as fs/promises' is: fs.realpath is a JS walk that lstats every component, and an
// lstat of a dead FUSE or NFS mount fails (ENOTCONN) where realpath(3) still answers the path.
export const realpath = promisify(fs.realpath.native);
export const rm = promisify(fs.rm);
export const rmdir = promisify(fs.rmdir);
export const stat = promisify(fs.stat);
export const statfs = promisify(fs.statfs);
export const truncate = promisify(fs.truncate);
export const unlink = promisify(fs.unlink);
export const utimes = promisify(fs.utimes);
export const writeFile = promisify(fs.writeFile);
