import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ALL_TOOLS } from '../../csi/tools.js';

// The plugin image (deploy/image/Containerfile, built by `npm run image`: scripts/image.mjs). The
// Containerfile's content is checked in every run; the build itself (mmdebstrap and umoci, minutes)
// only with TWINVOL_LONG=1, then the image is unpacked and its executables and tools run inside it
// with chroot: no container runtime is needed, or present.
const REPO = resolve(import.meta.dirname, '../..');
const SCRIPT = join(REPO, 'scripts/image.mjs');
const ARCHIVE = join(REPO, 'dist/image/twinvol.oci.tar');
const LONG = process.env.TWINVOL_LONG === '1';
const version = (JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as { version: string }).version;

interface Spec {
  suite: string;
  packages: string[];
  copies: { src: string; dest: string }[];
  env: string[];
  entrypoint: string[];
}

/** Every tool twinvol runs (shared/runner.ts, shared/mounter.ts, scripts/ensure-tools.mjs), and the Debian package that has it. */
const TOOLS: Record<string, string> = {
  mount: 'mount', umount: 'mount', losetup: 'util-linux', blkid: 'util-linux', fsck: 'util-linux', fsfreeze: 'util-linux', nsenter: 'util-linux',
  'mkfs.ext4': 'e2fsprogs', e2fsck: 'e2fsprogs', resize2fs: 'e2fsprogs', 'mkfs.xfs': 'xfsprogs', xfs_growfs: 'xfsprogs',
};

describe('the plugin image', () => {
  it('holds both executables on PATH and the package of every tool the server runs (read from the Containerfile)', () => {
    const spec = JSON.parse(execFileSync(process.execPath, [SCRIPT, '--spec'], { encoding: 'utf8' })) as Spec;
    expect(spec.suite).toBe('bookworm');
    expect([...new Set(Object.values(TOOLS))].filter((p) => !spec.packages.includes(p))).toEqual([]);
    // The list above knows every tool the server can run (csi/tools.ts); cp is coreutils, in every image.
    expect(ALL_TOOLS.filter((t) => t !== 'cp' && !(t in TOOLS))).toEqual([]);
    expect(spec.copies).toEqual([
      { src: 'dist/sea/twinvol-csi', dest: '/usr/local/bin/twinvol-csi' },
      { src: 'dist/sea/twinvol', dest: '/usr/local/bin/twinvol' },
      // The mount addon, beside the server, where it looks (csi/service-thread.ts nativeMountBeside).
      { src: 'dist/sea/twinvol-mount.node', dest: '/usr/local/bin/twinvol-mount.node' },
    ]);
    // deploy/node.yaml runs `twinvol-csi`, deploy/flex-installer.yaml `twinvol install flex`, by name.
    expect(spec.env).toContainEqual(expect.stringMatching(/^PATH=(.*:)?\/usr\/local\/bin(:|$)/));
    expect(spec.entrypoint).toEqual(['/usr/local/bin/twinvol-csi']);
  });

  it('a container builder is sent what COPY takes and nothing else (.dockerignore at the context, the root)', () => {
    const spec = JSON.parse(execFileSync(process.execPath, [SCRIPT, '--spec'], { encoding: 'utf8' })) as Spec;
    const rules = readFileSync(join(REPO, '.dockerignore'), 'utf8').split('\n').filter((l) => l.trim() && !l.startsWith('#'));
    expect(rules[0]).toBe('*');
    expect(rules.slice(1).sort()).toEqual(spec.copies.map((c) => `!${c.src}`).sort());
  });
});

/** `node scripts/image.mjs`, without blocking the test's process for the minutes it takes. */
function buildImage(): Promise<{ status: number | null; stderr: string }> {
  return new Promise((done, fail) => {
    const child = spawn(process.execPath, [SCRIPT], { cwd: REPO, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-16_000)));
    child.on('error', fail);
    child.on('close', (status) => done({ status, stderr }));
  });
}

describe.skipIf(!LONG)('npm run image (TWINVOL_LONG=1)', () => {
  // Made in beforeAll, not in the describe body: the body runs even when the suite is skipped, and a
  // skipped suite's afterAll does not, which left an empty temp dir behind on every default run.
  let work = '';
  beforeAll(() => {
    work = mkdtempSync('/tmp/twinvol-image-');
  });
  afterAll(() => {
    if (work) rmSync(work, { recursive: true, force: true });
  });

  // mmdebstrap installs a whole base system: two minutes on an idle machine, over ten on a busy one.
  it('builds an OCI archive tagged with the version, whose twinvol-csi answers --version inside it', { timeout: 1_800_000 }, async () => {
    const built = await buildImage();
    expect(built.status, built.stderr.slice(-4000)).toBe(0);
    expect(existsSync(ARCHIVE)).toBe(true);

    const layout = join(work, 'layout');
    execFileSync('mkdir', ['-p', layout]);
    execFileSync('tar', ['-xf', ARCHIVE, '-C', layout]);
    const index = JSON.parse(readFileSync(join(layout, 'index.json'), 'utf8')) as { manifests: { digest: string; annotations?: Record<string, string> }[] };
    expect(index.manifests.map((m) => m.annotations?.['org.opencontainers.image.ref.name'])).toEqual([version]);
    const blob = (digest: string) => JSON.parse(readFileSync(join(layout, 'blobs', ...digest.split(':')), 'utf8')) as Record<string, unknown>;
    const manifest = blob(index.manifests[0]?.digest ?? '') as { config: { digest: string }; layers: unknown[] };
    expect(manifest.layers).toHaveLength(2);
    const config = (blob(manifest.config.digest) as { config: { Entrypoint: string[]; Labels: Record<string, string> } }).config;
    expect(config.Entrypoint).toEqual(['/usr/local/bin/twinvol-csi']);
    expect(config.Labels['org.opencontainers.image.version']).toBe(version);

    const rootfs = join(work, 'rootfs');
    execFileSync('umoci', ['raw', 'unpack', '--image', `${layout}:${version}`, rootfs], { stdio: 'ignore' });
    // An empty environment, as a container starts with only what the image sets: no node anywhere.
    const inside = (...argv: string[]) => execFileSync('chroot', [rootfs, '/usr/bin/env', '-i', 'PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin', ...argv], { encoding: 'utf8' });
    expect(inside('twinvol-csi', '--version')).toBe(`twinvol-csi ${version}\n`);
    expect(inside('twinvol', '--version')).toBe(`twinvol ${version}\n`);
    // The single executables carry their own Node; only a build without them (TWINVOL_NO_SEA=1) packs node.
    const sea = existsSync(join(REPO, 'dist/sea/twinvol-csi'));
    expect(inside('sh', '-c', 'command -v node || echo none').trim()).toBe(sea ? 'none' : '/usr/local/bin/node');
    const missing = inside('sh', '-c', `for t in ${Object.keys(TOOLS).join(' ')}; do command -v "$t" >/dev/null || echo "$t"; done`);
    expect(missing).toBe('');
  });
});
