import { execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { closeSync, fsyncSync, openSync, readFileSync, readSync, statfsSync, writeFileSync, writeSync } from 'node:fs';

export const sha256 = (data: Buffer) => createHash('sha256').update(data).digest('hex');

/** Writes `bytes` random bytes to a file and flushes them to the volume; returns their sha256. */
export function writeRandomFile(path: string, bytes = 1 << 20): string {
  const data = randomBytes(bytes);
  writeFileSync(path, data, { flush: true });
  return sha256(data);
}

export const fileSha256 = (path: string) => sha256(readFileSync(path));

/** Writes random bytes at the start of a raw block device (or the file it is published on). */
export function writeRandomDevice(path: string, bytes = 1 << 20): string {
  const data = randomBytes(bytes);
  const fd = openSync(path, 'r+');
  try {
    writeSync(fd, data, 0, data.length, 0);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  return sha256(data);
}

export function deviceSha256(path: string, bytes = 1 << 20): string {
  const buf = Buffer.alloc(bytes);
  const fd = openSync(path, 'r');
  try {
    readSync(fd, buf, 0, bytes, 0);
  } finally {
    closeSync(fd);
  }
  return sha256(buf);
}

export const deviceSize = (path: string) => Number(execFileSync('blockdev', ['--getsize64', path], { encoding: 'utf8' }).trim());

/** Total bytes of the filesystem mounted at `path`, as df sees it. */
export function fsTotalBytes(path: string): number {
  const st = statfsSync(path);
  return st.blocks * st.bsize;
}

/** CAP_SYS_RESOURCE (bit 24): what the kernel asks of an online ext4 resize. Containers often lack it. */
export function hasCapSysResource(): boolean {
  const line = readFileSync('/proc/self/status', 'utf8').split('\n').find((l) => l.startsWith('CapEff:')) ?? '';
  return (BigInt(`0x${line.split(/\s+/)[1] ?? '0'}`) & (1n << 24n)) !== 0n;
}
