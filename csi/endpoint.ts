import { connect } from 'node:net';
import { lstat, mkdir, unlink } from 'node:fs/promises';
import { dirname, posix } from 'node:path';
import { errnoCode, failedPrecondition, invalidArgument } from '../shared/index.js';

/** The socket path of a CSI endpoint: "unix:///csi/csi.sock", "unix:/csi/csi.sock" or a bare absolute path. */
export function socketPathOf(endpoint: string): string {
  const path = endpoint.replace(/^unix:(\/\/)?/, '');
  if (!posix.isAbsolute(path) || path.includes('\0') || posix.normalize(path) !== path)
    throw invalidArgument(`endpoint ${JSON.stringify(endpoint)} must be unix:///absolute/path or an absolute path`);
  return path;
}

/**
 * Clears the way for the socket. A socket file left by a previous run is removed; one that still
 * answers belongs to a running server and is left alone (two drivers on one socket would split the
 * CO's calls); anything that is not a socket is never deleted.
 */
export async function prepareSocket(path: string): Promise<void> {
  let st;
  try {
    st = await lstat(path);
  } catch (err) {
    if (errnoCode(err) !== 'ENOENT') throw err;
    await mkdir(dirname(path), { recursive: true, mode: 0o750 });
    return;
  }
  if (!st.isSocket()) throw failedPrecondition(`${path} exists and is not a socket; not removing it`);
  if (await answers(path)) throw failedPrecondition(`another server is listening on ${path}`);
  await unlink(path);
}

function answers(path: string): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(path);
    const done = (alive: boolean) => {
      socket.destroy();
      resolve(alive);
    };
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
    socket.setTimeout(500, () => done(false));
  });
}
