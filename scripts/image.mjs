// `npm run image`: the plugin image described by deploy/image/Containerfile, built without a container
// engine (no daemon, no user namespaces, no registry: docker.io is not reachable from here, so no FROM
// image can be pulled). The base comes from Debian's own packages instead: mmdebstrap makes the
// root filesystem of the Containerfile's suite with the packages its RUN line installs, as one layer;
// the files its COPY names are a second layer; umoci packs both as an OCI image with the
// Containerfile's ENV, LABEL and ENTRYPOINT. The result is an OCI archive (an OCI image layout in a
// tar), dist/image/twinvol.oci.tar, tagged with package.json's version, the tag deploy/ runs:
//   skopeo copy oci-archive:dist/image/twinvol.oci.tar:<version> docker://ghcr.io/twinvol/twinvol:<version>
//   podman load -i dist/image/twinvol.oci.tar
// Needs root (mmdebstrap's root mode), and installs mmdebstrap and umoci with apt-get when missing.
// TWINVOL_IMAGE_MIRROR names another Debian mirror; SOURCE_DATE_EPOCH is honoured (and defaults to
// the last commit's time), so two builds of one tree make the same layers.
import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { BESIDE_SUFFIX } from './sea.mjs';
import { BUILT_ADDON } from './addon-files.mjs';

const REPO = resolve(import.meta.dirname, '..');
const CONTAINERFILE = join(REPO, 'deploy/image/Containerfile');
const OUT_DIR = join(REPO, 'dist/image');
export const IMAGE_ARCHIVE = join(OUT_DIR, 'twinvol.oci.tar');

/**
 * The subset of a Containerfile deploy/image/Containerfile uses, read strictly: an instruction or a
 * form this does not know is an error, rather than an image that quietly differs from the file.
 */
export function readContainerfile(text) {
  const spec = { suite: '', packages: [], copies: [], env: [], labels: [], entrypoint: [] };
  const logical = text.replace(/\\\n/g, ' ').split('\n').map((l) => l.trim()).filter((l) => l && !l.startsWith('#'));
  for (const line of logical) {
    const [instruction = '', ...rest] = line.split(/\s+/);
    const args = rest.join(' ');
    switch (instruction.toUpperCase()) {
      case 'FROM': {
        const m = /^debian:([a-z]+)-slim$/.exec(args);
        if (!m) throw new Error(`Containerfile: FROM ${args}: only debian:<suite>-slim can be made from Debian's packages`);
        spec.suite = m[1];
        break;
      }
      case 'RUN': {
        const install = /apt-get install -y --no-install-recommends ((?:[a-z0-9.+-]+ ?)+)/.exec(args);
        if (!install) throw new Error(`Containerfile: RUN ${args}: only the apt-get install step is understood`);
        spec.packages.push(...install[1].trim().split(' '));
        break;
      }
      case 'COPY': {
        const parts = args.split(/\s+/);
        const dest = parts.pop();
        if (!dest?.endsWith('/') || !parts.length) throw new Error(`Containerfile: COPY ${args}: sources and a destination directory ending in / expected`);
        for (const src of parts) spec.copies.push({ src, dest: join(dest, src.split('/').pop()) });
        break;
      }
      case 'ENV':
        if (!/^[A-Z_][A-Z0-9_]*=\S+$/.test(args)) throw new Error(`Containerfile: ENV ${args}: one KEY=value expected`);
        spec.env.push(args);
        break;
      case 'LABEL':
        if (!/^[a-z0-9.-]+=\S+$/.test(args)) throw new Error(`Containerfile: LABEL ${args}: one key=value expected`);
        spec.labels.push(args);
        break;
      case 'ENTRYPOINT':
        spec.entrypoint = JSON.parse(args);
        break;
      default:
        throw new Error(`Containerfile: ${instruction} is not understood by scripts/image.mjs`);
    }
  }
  if (!spec.suite || !spec.packages.length || !spec.copies.length || !spec.entrypoint.length) throw new Error('Containerfile: FROM, RUN apt-get install, COPY and ENTRYPOINT are all needed');
  return spec;
}

function sh(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { stdio: ['ignore', 'inherit', 'inherit'], ...opts });
  if (r.error) throw r.error;
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} exited with ${r.status ?? r.signal}`);
}

function ensureTools() {
  const missing = ['mmdebstrap', 'umoci'].filter((t) => spawnSync('sh', ['-c', `command -v ${t}`]).status !== 0);
  if (!missing.length) return;
  if (process.getuid?.() !== 0) throw new Error(`npm run image needs ${missing.join(' and ')}: apt-get install ${missing.join(' ')}`);
  console.error(`installing ${missing.join(' ')}`);
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  spawnSync('apt-get', ['update', '-qq'], { stdio: 'inherit', env });
  sh('apt-get', ['install', '-y', '-qq', '--no-install-recommends', ...missing], { env });
}

/**
 * What the COPY line names, from dist/. Without the single executables (a build with TWINVOL_NO_SEA=1)
 * the bundles go in their place with the node binary this runs on, which the bundles' shebang finds on
 * PATH; the host is Debian bookworm too, so its glibc and libstdc++ are the image's.
 */
function filesFor(spec) {
  const present = spec.copies.every((c) => existsSync(join(REPO, c.src)));
  if (present) return spec.copies.map((c) => ({ from: join(REPO, c.src), to: c.dest }));
  const bundles = { 'twinvol-csi': 'dist/csi/twinvol-csi', twinvol: 'dist/flex/twinvol' };
  const files = spec.copies.map((c) => ({ from: join(REPO, bundles[c.src.split('/').pop()] ?? c.src), to: c.dest }));
  // The FlexVolume bundle's operator modules go beside it, where it reads them (flex/packed-modules.ts).
  for (const f of [...files]) if (existsSync(`${f.from}${BESIDE_SUFFIX}`)) files.push({ from: `${f.from}${BESIDE_SUFFIX}`, to: `${f.to}${BESIDE_SUFFIX}` });
  for (const f of files) if (!existsSync(f.from)) throw new Error(`${f.from} is missing: ${missingWhy(f.from)}`);
  console.error(`no ${spec.copies.map((c) => c.src).join(', ')}: packing the bundles and ${process.execPath} as /usr/local/bin/node`);
  return [...files, { from: process.execPath, to: '/usr/local/bin/node' }];
}

/** What to do about a file the image needs: the mount addon comes from npm ci, the rest from the build. */
function missingWhy(path) {
  if (!path.endsWith('.node')) return 'run npm run build first';
  if (!existsSync(join(REPO, BUILT_ADDON)))
    return 'npm ci did not build the mount addon (scripts/build-native.mjs needs make, a C compiler and Node\'s headers); run it again once they are there, then npm run build';
  return 'run npm run build first';
}

function sourceDateEpoch() {
  if (process.env.SOURCE_DATE_EPOCH) return process.env.SOURCE_DATE_EPOCH;
  try {
    return execFileSync('git', ['-C', REPO, 'log', '-1', '--format=%ct'], { encoding: 'utf8' }).trim();
  } catch {
    return String(Math.floor(Date.now() / 1000));
  }
}

export function buildImage() {
  if (process.getuid?.() !== 0) throw new Error('npm run image runs mmdebstrap in its root mode: run it as root');
  const spec = readContainerfile(readFileSync(CONTAINERFILE, 'utf8'));
  const version = JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')).version;
  const files = filesFor(spec);
  ensureTools();
  const epoch = sourceDateEpoch();
  const created = new Date(Number(epoch) * 1000).toISOString();
  const env = { ...process.env, SOURCE_DATE_EPOCH: epoch };
  const work = join(OUT_DIR, `.work-${process.pid}`);
  rmSync(work, { recursive: true, force: true });
  mkdirSync(work, { recursive: true });
  try {
    // Layer 1: Debian's minimal base (Essential packages and apt, as debian:<suite>-slim) plus the
    // RUN line's packages, without recommends, documentation or translations (slim leaves those out).
    const mirror = process.env.TWINVOL_IMAGE_MIRROR || 'http://deb.debian.org/debian';
    sh(
      'mmdebstrap',
      [
        '--mode=root',
        '--variant=minbase',
        '--format=tar',
        `--include=${spec.packages.join(',')}`,
        '--aptopt=APT::Install-Recommends "false"',
        ...['/usr/share/doc/*', '/usr/share/man/*', '/usr/share/info/*', '/usr/share/locale/*'].map((p) => `--dpkgopt=path-exclude=${p}`),
        '--dpkgopt=path-include=/usr/share/doc/*/copyright',
        spec.suite,
        join(work, 'base.tar'),
        mirror,
      ],
      { env },
    );
    // Layer 2: the COPY line's files, owned by root, with the build's fixed time.
    const tree = join(work, 'files');
    for (const f of files) {
      const to = join(tree, f.to);
      mkdirSync(dirname(to), { recursive: true });
      copyFileSync(f.from, to);
      chmodSync(to, 0o755);
    }
    const tarFlags = ['--sort=name', '--owner=0', '--group=0', '--numeric-owner', `--mtime=@${epoch}`];
    sh('tar', [...tarFlags, '-C', tree, '-cf', join(work, 'files.tar'), '.']);

    const layout = join(work, 'oci');
    const ref = `${layout}:${version}`;
    sh('umoci', ['init', '--layout', layout]);
    sh('umoci', ['new', '--image', ref]);
    sh('umoci', ['raw', 'add-layer', '--image', ref, '--history.created', created, '--history.created_by', `mmdebstrap ${spec.suite} + ${spec.packages.join(' ')}`, join(work, 'base.tar')]);
    sh('umoci', ['raw', 'add-layer', '--image', ref, '--history.created', created, '--history.created_by', `COPY ${spec.copies.map((c) => c.src).join(' ')}`, join(work, 'files.tar')]);
    sh('umoci', [
      'config',
      '--image', ref,
      '--created', created,
      '--history.created', created,
      '--history.created_by', 'scripts/image.mjs from deploy/image/Containerfile',
      '--config.entrypoint', spec.entrypoint[0],
      ...spec.entrypoint.slice(1).flatMap((a) => ['--config.entrypoint', a]),
      ...spec.env.flatMap((e) => ['--config.env', e]),
      ...[...spec.labels, `org.opencontainers.image.version=${version}`].flatMap((l) => ['--config.label', l]),
    ]);
    sh('umoci', ['gc', '--layout', layout]);
    // An OCI archive: the layout directory as one tar, written beside its final name and renamed.
    const partial = join(OUT_DIR, `.twinvol.oci.tar.${process.pid}`);
    sh('tar', [...tarFlags, '-C', layout, '-cf', partial, '.']);
    renameSync(partial, IMAGE_ARCHIVE);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  console.error(`wrote ${IMAGE_ARCHIVE} (tag ${version}: ghcr.io/twinvol/twinvol:${version})`);
  return { archive: IMAGE_ARCHIVE, tag: version };
}

if (process.argv[1] && resolve(process.argv[1]) === resolve(import.meta.filename)) {
  try {
    // --spec: what would be built, as read from the Containerfile, without building it (test/image).
    if (process.argv.includes('--spec')) console.log(JSON.stringify(readContainerfile(readFileSync(CONTAINERFILE, 'utf8'))));
    else buildImage();
  } catch (err) {
    console.error(`npm run image: ${err instanceof Error ? err.message : String(err)}`);
    process.exit(1);
  }
}
