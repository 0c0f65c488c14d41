/**
 * Errors the core raises. Each front end maps a code to its protocol: the CSI shim to a gRPC status,
 * the FlexVolume executable to {"status":"Failure"} with exit code 1. Messages are written for an
 * operator reading kubelet's log, so they name the volume or path and never carry option values.
 */
export type ErrorCode =
  | 'InvalidArgument'
  | 'NotFound'
  | 'AlreadyExists'
  | 'FailedPrecondition'
  | 'ResourceExhausted'
  | 'OutOfRange'
  | 'Aborted'
  | 'Unimplemented'
  | 'Unavailable'
  | 'Internal';

export class TwinvolError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
  ) {
    super(message);
    this.name = 'TwinvolError';
  }
}

export const invalidArgument = (message: string) => new TwinvolError('InvalidArgument', message);
export const notFound = (message: string) => new TwinvolError('NotFound', message);
export const alreadyExists = (message: string) => new TwinvolError('AlreadyExists', message);
export const failedPrecondition = (message: string) => new TwinvolError('FailedPrecondition', message);
export const resourceExhausted = (message: string) => new TwinvolError('ResourceExhausted', message);
export const outOfRange = (message: string) => new TwinvolError('OutOfRange', message);
export const aborted = (message: string) => new TwinvolError('Aborted', message);
export const unimplemented = (message: string) => new TwinvolError('Unimplemented', message);
/** What the call needs is not there now (the data root's network filesystem): a retry later may succeed. */
export const unavailable = (message: string) => new TwinvolError('Unavailable', message);
export const internal = (message: string) => new TwinvolError('Internal', message);

/** Any thrown value as a TwinvolError; unknown failures become Internal with their message only. */
export function asTwinvolError(err: unknown): TwinvolError {
  if (err instanceof TwinvolError) return err;
  const system = systemError(err);
  if (system) return system;
  if (err instanceof Error) return internal(err.message);
  return internal(String(err));
}

/** What an errno means to an operator, and what to do about it. */
const ERRNO: Record<string, { meaning: string; hint: string; code?: ErrorCode }> = {
  ENOSPC: { meaning: 'no space or no free inodes left on its filesystem', hint: 'free space (df) or inodes (df -i) there, then retry', code: 'ResourceExhausted' },
  EDQUOT: { meaning: 'the disk quota is used up', hint: 'raise the quota or free space, then retry', code: 'ResourceExhausted' },
  EROFS: { meaning: 'its filesystem is mounted read-only', hint: 'remount it read-write' },
  EACCES: { meaning: 'permission denied', hint: 'twinvol runs as root: check the path\'s mode and its filesystem\'s mount options' },
  EPERM: { meaning: 'operation not permitted', hint: 'twinvol needs root (CAP_SYS_ADMIN)' },
  EMFILE: { meaning: 'this process has too many open files', hint: 'raise the open-file limit (ulimit -n)' },
  ENFILE: { meaning: 'the system has too many open files', hint: 'raise fs.file-max or find the process holding them' },
  EIO: { meaning: 'an I/O error', hint: 'check the disk and the kernel log (dmesg)' },
  ENOENT: { meaning: 'it, or a directory on its path, does not exist', hint: 'check that the directory is there and was not removed underneath twinvol' },
  ENOTDIR: { meaning: 'a part of its path is not a directory', hint: 'check the path' },
  EISDIR: { meaning: 'it is a directory', hint: 'check the path' },
  EEXIST: { meaning: 'something is already there', hint: 'look at what is there; twinvol does not overwrite it' },
  ENAMETOOLONG: { meaning: 'its name is too long for the filesystem', hint: 'use a shorter root path' },
  ELOOP: { meaning: 'it passes through too many symbolic links', hint: 'check the path' },
};

const ACTIONS: Record<string, string> = { open: 'open', mkdir: 'create directory', rename: 'rename', write: 'write', read: 'read', unlink: 'remove', rmdir: 'remove directory', rm: 'remove', scandir: 'list', stat: 'look at', lstat: 'look at', fsync: 'sync', copyfile: 'copy', symlink: 'link' };

/**
 * A system call's failure (Node's error with code, syscall and path) as a message that says what
 * failed, on which file, and what to do, e.g. "cannot write /var/lib/twinvol/...: no space or no free
 * inodes left on its filesystem (ENOSPC); free space (df) or inodes (df -i) there, then retry".
 * Undefined for anything that is not such a failure, or whose errno has no entry above.
 */
export function systemError(err: unknown, file?: string): TwinvolError | undefined {
  if (typeof err !== 'object' || err === null || !('syscall' in err) || typeof err.syscall !== 'string') return undefined;
  const code = errnoCode(err);
  const known = code === undefined ? undefined : ERRNO[code];
  if (!known) return undefined;
  // A write through a file descriptor names no file: the caller that knows it says which.
  const path = 'path' in err && typeof err.path === 'string' ? err.path : file;
  const dest = 'dest' in err && typeof err.dest === 'string' ? ` to ${err.dest}` : '';
  const action = ACTIONS[err.syscall] ?? err.syscall;
  return new TwinvolError(known.code ?? 'Internal', `cannot ${action}${path ? ` ${path}${dest}` : ''}: ${known.meaning} (${code}); ${known.hint}`);
}

/** The C library's words for the errnos a tool's failure is worth naming by (strerror, as coreutils print it). */
const STRERROR: Record<string, string> = { 'No space left on device': 'ENOSPC', 'Disk quota exceeded': 'EDQUOT' };

/**
 * What `systemError` says of a system call's failure, for one a tool reported in its output instead
 * (cp: "error writing '...': No space left on device"): the operation, the files and what to do.
 * Undefined when the output names no errno worth it.
 */
export function systemErrorInOutput(output: string, syscall: string, path: string, dest?: string): TwinvolError | undefined {
  const code = Object.entries(STRERROR).find(([words]) => output.includes(words))?.[1];
  return code === undefined ? undefined : systemError({ code, syscall, path, ...(dest === undefined ? {} : { dest }) });
}

export function errnoCode(err: unknown): string | undefined {
  return typeof err === 'object' && err !== null && 'code' in err && typeof err.code === 'string'
    ? err.code
    : undefined;
}
