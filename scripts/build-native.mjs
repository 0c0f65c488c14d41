// Builds native/*.c (mount(2), umount2(2), statx(2), statmount(2) and loop devices for the CSI server and the
// FlexVolume executable, posix_spawn for the CSI server's tools) with node-gyp: run by `npm ci` (package.json
// "install"). The addon is a fast path, not a requirement: without it every mount goes through mount(8), and
// the CSI server forks its tools from a thread of their own, as before, so a machine that cannot build it
// (no compiler, no Node headers) gets a warning that says what it loses, not a failed install.
// shared/native-mount.ts loads it.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';

const root = join(import.meta.dirname, '..');
// npm names its own node-gyp to the scripts it runs; outside npm, the one installed with npm.
const candidates = [process.env.npm_config_node_gyp, join(process.execPath, '../../lib/node_modules/npm/node_modules/node-gyp/bin/node-gyp.js')];
const gyp = candidates.find((p) => p && existsSync(p));
const warn = (why) =>
  process.stderr.write(`twinvol: the native mount addon was not built (${why}); mounts will go through mount(8), which works, more slowly\n`);

// The headers of the very Node that runs this, when installed with it (<prefix>/include/node): no
// download, which a machine without the internet could not make. npm passes its own nodedir setting.
const prefix = join(process.execPath, '../..');
const nodedir = process.env.npm_config_nodedir || (existsSync(join(prefix, 'include/node/node_api.h')) ? prefix : undefined);

if (process.platform !== 'linux') warn(`not Linux: ${process.platform}`);
else if (!gyp) warn('node-gyp not found');
else {
  const r = spawnSync(process.execPath, [gyp, 'rebuild', '--loglevel=warn', ...(nodedir ? [`--nodedir=${nodedir}`] : [])], { cwd: root, encoding: 'utf8', timeout: 300_000 });
  if (r.status !== 0) {
    process.stderr.write(`${r.stdout ?? ''}${r.stderr ?? ''}`.slice(-4000));
    warn(r.error ? r.error.message : `node-gyp exited with ${r.status ?? r.signal}`);
  }
}
