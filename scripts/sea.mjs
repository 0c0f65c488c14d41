// Node single executable applications (https://nodejs.org/api/single-executable-applications.html)
// of the bundles: a copy of the node binary carrying the bundle, so the FlexVolume driver runs where
// there is no Node (distroless kube-controller-manager images, `env -i`). Called by scripts/build.mjs.
//
// postject rewrites the whole ~100 MB ELF binary through LIEF in WebAssembly: 5 to 8 s a copy here,
// paid on every build since global-setup rebuilds before each test run. So postject runs once per node
// binary, injecting a zero-filled slot larger than any blob (the template, kept in
// node_modules/.cache); a build copies the template and writes its blob into the slot. Node reads the
// blob as length-prefixed fields (SeaDeserializer in Node's src/node_sea.cc) and ignores the zeros
// after them. A bundle that did not change since the last build is not rebuilt at all.
import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import { copyFile, chmod, mkdir, mkdtemp, open, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';

// The fuse Node's binary carries (src/node_sea.cc); postject flips it to mark the binary a SEA.
const FUSE = 'NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2';
const CACHE = 'node_modules/.cache/twinvol-sea';
const MiB = 2 ** 20;

/** Runs a command, its output kept and shown only if it fails (postject prints LIEF warnings). */
function run(cmd, args) {
  return new Promise((done, fail) => {
    const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    child.on('error', fail);
    child.on('close', (code) => (code === 0 ? done(out) : fail(new Error(`${basename(cmd)} ${args.join(' ')} failed (${code}):\n${out}`))));
  });
}

const templates = new Map();
/** The node binary with an empty slot of `slotBytes` injected, made once and kept; its path and the slot's offset. */
function template(slotBytes) {
  // Both executables of one build share one template: made once, not by both at the same time.
  if (!templates.has(slotBytes)) templates.set(slotBytes, makeTemplate(slotBytes));
  return templates.get(slotBytes);
}

async function makeTemplate(slotBytes) {
  const node = process.execPath;
  const st = await stat(node);
  const id = createHash('sha256').update(`${node}\0${st.size}\0${st.mtimeMs}\0${process.version}`).digest('hex').slice(0, 16);
  const path = join(CACHE, `node-${process.version}-${id}-${slotBytes / MiB}M`);
  try {
    const meta = JSON.parse(await readFile(`${path}.json`, 'utf8'));
    const t = { path, offset: meta.offset, marker: Buffer.from(meta.marker, 'hex'), slotBytes };
    if (await slotAt(path, t)) return t;
  } catch {
    // not made yet (or half made by a build that was killed): make it
  }
  await mkdir(CACHE, { recursive: true });
  const work = await mkdtemp(join(tmpdir(), 'twinvol-sea-'));
  try {
    const marker = Buffer.from(`twinvol-sea-slot-${randomBytes(16).toString('hex')}`);
    const slot = Buffer.alloc(slotBytes);
    marker.copy(slot);
    await writeFile(join(work, 'slot'), slot);
    const binary = join(work, 'node');
    await copyFile(node, binary);
    const postject = createRequire(import.meta.url).resolve('postject/dist/cli.js');
    await run(process.execPath, [postject, binary, 'NODE_SEA_BLOB', join(work, 'slot'), '--sentinel-fuse', FUSE]);
    const bytes = await readFile(binary);
    const offset = bytes.indexOf(marker);
    if (offset < 0 || bytes.indexOf(marker, offset + 1) >= 0) throw new Error('sea: the injected slot is not found exactly once in the template');
    const tmp = `${path}.${process.pid}.tmp`;
    await rename(binary, tmp).catch(async () => {
      await copyFile(binary, tmp);
    });
    await rename(tmp, path);
    await writeFile(`${path}.json.${process.pid}.tmp`, JSON.stringify({ offset, marker: marker.toString('hex'), node, version: process.version }));
    await rename(`${path}.json.${process.pid}.tmp`, `${path}.json`);
    // Templates of a node binary that is gone (an upgrade) would keep 100 MB each forever.
    const current = `node-${process.version}-${id}-`;
    for (const name of await readdir(CACHE)) if (name.startsWith('node-') && !name.startsWith(current)) await rm(join(CACHE, name), { force: true });
    return { path, offset, marker, slotBytes };
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

/** Whether `file` holds template `t`'s empty slot (the marker) at its offset. */
async function slotAt(file, t) {
  return (await readAt(file, t.offset, t.marker.length)).equals(t.marker);
}

async function readAt(file, position, length) {
  const fd = await open(file, 'r');
  try {
    const buf = Buffer.alloc(length);
    const { bytesRead } = await fd.read(buf, 0, length, position);
    return buf.subarray(0, bytesRead);
  } catch {
    return Buffer.alloc(0);
  } finally {
    await fd.close();
  }
}

/**
 * What starts the FlexVolume bundle's trailing comment of packed modules and its index line:
 * scripts/build.mjs writes both and hands the marker to flex/packed-modules.ts (esbuild define),
 * which reads them back; here they become assets.
 */
export const PACKED_MARKER = 'TWINVOL-PACKED:';
/**
 * What the bundle's file beside it is called: the bundle's path and this. It holds the modules no
 * kubelet call runs; scripts/build.mjs writes it and hands the suffix to flex/packed-modules.ts
 * (esbuild define), as it does the marker.
 */
export const BESIDE_SUFFIX = '.modules';

/** The preparation blob of one bundle, made by this very node (a blob only runs in the binary that made it). */
async function blobOf(main, codeCache) {
  const work = await mkdtemp(join(tmpdir(), 'twinvol-sea-'));
  try {
    const config = join(work, 'sea-config.json');
    // The FlexVolume bundle's packed modules trail it as a comment, or sit in the file beside it,
    // and its loader reads them by the index on the script's last line (scripts/build.mjs
    // packedTrailer, flex/packed-modules.ts); a single executable has no such files, so the index
    // and each blob become assets (named as flex/packed-modules.ts assetName says: the marker, the
    // key of the file beside if it is there, and the blob's offset) and the script goes in without them.
    const text = await readFile(main, 'latin1');
    const start = text.lastIndexOf(`\n/*${PACKED_MARKER}\n`);
    const assets = {};
    if (start >= 0) {
      const indexAt = text.lastIndexOf(`\n//${PACKED_MARKER}`) + 3 + PACKED_MARKER.length;
      const index = JSON.parse(text.slice(indexAt));
      await writeFile(join(work, 'index'), JSON.stringify(index));
      assets[PACKED_MARKER] = join(work, 'index');
      let beside;
      for (const [at, length, , key] of Object.values(index)) {
        const name = `${PACKED_MARKER}${key ? `${key}:` : ''}${at}`;
        if (assets[name]) continue;
        beside ??= key ? await readFile(`${main}${BESIDE_SUFFIX}`, 'latin1') : undefined;
        if (key && !beside.startsWith(`${PACKED_MARKER}${key}\n`)) throw new Error(`${main}${BESIDE_SUFFIX} is not the one ${main} was built with`);
        const file = join(work, `blob-${key ?? 'here'}-${at}`);
        await writeFile(file, (key ? beside : text).slice(at, at + length), 'latin1');
        assets[name] = file;
      }
      await writeFile(join(work, 'main.cjs'), `${text.slice(0, start)}\n`, 'latin1');
      main = join(work, 'main.cjs');
    }
    // disableExperimentalSEAWarning: kubelet reads stderr as part of the reply; a warning there breaks it.
    await writeFile(config, JSON.stringify({ main, output: join(work, 'blob'), disableExperimentalSEAWarning: true, useCodeCache: codeCache, assets }));
    await run(process.execPath, ['--experimental-sea-config', config]);
    return await readFile(join(work, 'blob'));
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

/**
 * Makes `out`, a single executable running the CommonJS bundle `main`, unless the one there was
 * made from the same bundle by the same node and this same script (how it makes the blob is part of
 * what the executable is): its key (a hash of the three) is kept in the last bytes of the slot,
 * inside the file itself, so that two builds racing on dist/ can never leave a key beside an
 * executable it does not describe. Renamed into place, like the bundles (scripts/build.mjs).
 */
export async function buildSea({ main, out, codeCache = true }) {
  const key = Buffer.from(
    createHash('sha256')
      .update(await readFile(main))
      .update(await readFile(new URL(import.meta.url)))
      .update(`\0${codeCache}\0${process.execPath}\0${process.version}\0${(await stat(process.execPath)).mtimeMs}`)
      .digest('hex'),
  );
  const keyAt = (t) => t.offset + t.slotBytes - key.length;
  let t = await template(8 * MiB);
  if ((await readAt(out, keyAt(t), key.length).catch(() => Buffer.alloc(0))).equals(key)) return { out, rebuilt: false };
  const blob = await blobOf(main, codeCache);
  if (blob.length + key.length > t.slotBytes) {
    let slot = t.slotBytes;
    while (slot < blob.length + key.length) slot *= 2;
    t = await template(slot);
  }
  await mkdir(dirname(out), { recursive: true });
  const tmp = `${out}.${process.pid}.tmp`;
  try {
    // A reflink where the filesystem has them; a plain copy otherwise.
    await copyFile(t.path, tmp, constants.COPYFILE_FICLONE);
    // Checked on the private copy: another build may have replaced the template since it was read.
    if (!(await slotAt(tmp, t))) throw new Error(`sea: ${t.path} changed during the build; build again`);
    const fd = await open(tmp, 'r+');
    try {
      await fd.write(blob, 0, blob.length, t.offset);
      await fd.write(key, 0, key.length, keyAt(t));
    } finally {
      await fd.close();
    }
    await chmod(tmp, 0o755);
    await rename(tmp, out);
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  }
  return { out, rebuilt: true };
}
