// Builds an older release of twinvol beside this checkout, for the rolling-upgrade suites (test/upgrade):
// `node scripts/old-release.mjs [commit]` prints the path of its dist/ (TWINVOL_OLD_DIST), building it
// first unless an earlier run did. The default commit is the release the suites were written against.
//
// No npm and no worktree: the commit's files come from `git archive` into a directory of their own
// under the system's temporary directory (its build-native writes that directory's build/, never this
// checkout's), with this checkout's node_modules linked in (the commit's package-lock.json must be
// this one's: checked), and its own gen-types, build-native and build run there, the single executables
// skipped. A build goes to a directory named for this process and is renamed into place once whole, so
// two runs at once cannot leave a half-built release that a third one would take for done.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, realpathSync, renameSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const DEFAULT_COMMIT = '8cb4cb1';
const root = join(import.meta.dirname, '..');
const fail = (why) => {
  process.stderr.write(`old-release: ${why}\n`);
  process.exit(1);
};
const git = (...args) => execFileSync('git', ['-C', root, ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });

const asked = process.argv[2] ?? DEFAULT_COMMIT;
if (process.argv.length > 3 || !/^[0-9a-f]{7,40}$/.test(asked)) fail(`usage: node scripts/old-release.mjs [commit]; ${JSON.stringify(asked)} is no commit hash`);
let commit;
try {
  commit = git('rev-parse', '--verify', `${asked}^{commit}`).trim();
} catch {
  fail(`commit ${asked} is not in this repository's history (a shallow clone? git fetch --unshallow)`);
}
const dir = join(tmpdir(), `twinvol-release-${commit.slice(0, 12)}`);
const built = (d) => ['dist/flex/twinvol', 'dist/csi/twinvol-csi', 'dist/flex/twinvol-mount.node'].every((f) => existsSync(join(d, f)));

if (!built(dir)) {
  if (git('diff', '--stat', commit, 'HEAD', '--', 'package-lock.json').trim())
    fail(`commit ${asked} locks other packages than this checkout: its node_modules, not this one's, would be needed`);
  const partial = `${dir}.partial-${process.pid}`;
  rmSync(partial, { recursive: true, force: true });
  mkdirSync(partial, { recursive: true });
  try {
    const archive = spawnSync('git', ['-C', root, 'archive', '--format=tar', commit], { maxBuffer: 1 << 30 });
    if (archive.status !== 0) throw new Error(`git archive ${commit}: ${archive.stderr}`);
    execFileSync('tar', ['-x', '-C', partial], { input: archive.stdout });
    symlinkSync(realpathSync(join(root, 'node_modules')), join(partial, 'node_modules'));
    for (const script of ['gen-types.mjs', 'build-native.mjs', 'build.mjs']) {
      process.stderr.write(`old-release: ${commit.slice(0, 12)}: node scripts/${script}\n`);
      const r = spawnSync(process.execPath, [join('scripts', script)], { cwd: partial, stdio: ['ignore', 'inherit', 'inherit'], env: { ...process.env, TWINVOL_NO_SEA: '1' } });
      if (r.status !== 0) throw new Error(`scripts/${script} of ${commit.slice(0, 12)} exited with ${r.status ?? r.signal}`);
    }
    if (!built(partial)) throw new Error(`the build of ${commit.slice(0, 12)} made no dist/flex/twinvol, dist/csi/twinvol-csi and mount addon`);
    try {
      renameSync(partial, dir);
    } catch (err) {
      // Another run finished first: its build stands.
      if (!built(dir)) throw err;
    }
  } catch (err) {
    rmSync(partial, { recursive: true, force: true });
    fail(err instanceof Error ? err.message : String(err));
  }
  rmSync(partial, { recursive: true, force: true });
}
process.stdout.write(`${join(dir, 'dist')}\n`);
