import { existsSync, mkdirSync, mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { asTwinvolError, type Config, type Core, DEFAULT_PLUGIN_DIR, loopDevices, openCore, releaseAttachment, run, validateVolumeId, type VolumeId, type VolumeRecord } from '../../shared/index.js';
import { csiServerNear, mountsUnder } from '../scratch-world.js';
import { CsiSide, socketOf } from './verify-csi.js';
import { KubeletFlex, mounted } from './verify-flex.js';
import { type FlexPv, readFlexPv } from './verify-pv.js';
import { attempt, jsonReport, Recorder, summary, type VerifyResult } from './verify-report.js';
import { InputError, inUse, resolveSubject, type Subject } from './verify-subject.js';
import { deviceSum, differences, treeSum, type VolumeSum } from './verify-sum.js';

/**
 * `twinvol migrate verify VOLUME`: proves on this node that a volume's data survives the move from
 * FlexVolume to CSI and back (issue 10, item 2). The volume is brought up as kubelet would through
 * FlexVolume (flex/migrate/verify-flex.ts), checksummed (verify-sum.ts), torn down; brought up through
 * a CSI server as the sidecars and kubelet would (verify-csi.ts), checksummed, compared, torn down;
 * then through FlexVolume again (the rollback), compared with what CSI showed. Packed on its own
 * (scripts/build.mjs) and loaded only for this command: it is the one that loads grpc and execa.
 *
 * It refuses a volume in use, mounts read-only throughout (verifying changes nothing), and whatever
 * happens leaves no mount, loop device or server behind: each half tears down what it set up, and a
 * last sweep unmounts anything left in its scratch kubelet dir before removing it.
 */

export interface VerifyOptions {
  volumeId: VolumeId;
  pv?: FlexPv;
  endpoint?: string;
  csiBin: string;
  pluginDir: string;
  vendor: string;
  json: boolean;
  /** This executable: twinvol's own FlexVolume driver. */
  self: string;
}

/** The checked command line, or the one-line reason it is not usable (exit 2, nothing touched). */
export function verifyUsage(a: { volume: string; pv?: string; csiEndpoint?: string; csiBin?: string; pluginDir?: string; vendor?: string; json: boolean; self: string }): VerifyOptions | string {
  let volumeId: VolumeId;
  try {
    volumeId = validateVolumeId(a.volume);
  } catch (err) {
    return asTwinvolError(err).message;
  }
  let pv: FlexPv | undefined;
  if (a.pv !== undefined) {
    const read = readFlexPv(a.pv);
    if (typeof read === 'string') return read;
    pv = read;
  }
  if (a.csiEndpoint !== undefined) {
    try {
      socketOf(a.csiEndpoint);
    } catch (err) {
      return err instanceof Error ? err.message : String(err);
    }
  }
  const csiBin = a.csiBin ?? csiServerNear(a.self);
  if (a.csiEndpoint === undefined && (csiBin === undefined || !existsSync(csiBin)))
    return `no CSI server to start: ${csiBin ?? `twinvol-csi is neither beside ${a.self} nor in ../csi/`}${csiBin ? ' does not exist' : ''} (give --csi-bin FILE or --csi-endpoint unix:///path)`;
  return { volumeId, ...(pv ? { pv } : {}), ...(a.csiEndpoint ? { endpoint: a.csiEndpoint } : {}), csiBin: csiBin ?? '' /* unused: --csi-endpoint names the server */, pluginDir: a.pluginDir ?? DEFAULT_PLUGIN_DIR, vendor: a.vendor ?? 'twinvol', json: a.json, self: a.self };
}

/**
 * Runs the verify and prints the report; the exit code: 0 all three reads match, 1 otherwise, 2 bad
 * input. `config` is the CLI's (flex/cli.ts), which refuses one that does not load as every command does.
 */
export async function runVerify(o: VerifyOptions, config: Config): Promise<number> {
  const core = openCore(config);
  let record: VolumeRecord | undefined;
  let subject: Subject;
  try {
    record = await core.catalog.getVolume(o.volumeId);
    subject = resolveSubject(core, o.volumeId, record, o.pv, o);
    const refusal = await inUse(core, subject, record);
    if (refusal) throw new Error(`refused: ${refusal}`);
  } catch (err) {
    process.stderr.write(`twinvol: ${(err instanceof Error ? err.message : String(err)).replace(/\s+/g, ' ')}\n`);
    return err instanceof InputError ? 2 : 1;
  }
  const rec = new Recorder(!o.json);
  const result: VerifyResult = {
    volume: o.volumeId,
    kind: subject.kind === 'twinvol' ? `twinvol ${subject.backend} volume` : 'exec volume',
    driver: subject.flex.volume.driver.full,
    csi: o.endpoint ?? `private twinvol-csi (${o.csiBin})`,
    steps: rec.steps,
    sums: {},
    differences: { csi: [], rollback: [] },
    verdict: 'failed',
  };
  let csi: CsiSide;
  try {
    csi = await CsiSide.open(rec, config.nodeName, o.endpoint, { bin: o.csiBin, config, pluginDir: o.pluginDir });
  } catch (err) {
    process.stderr.write(`twinvol: ${(err instanceof Error ? err.message : String(err)).replace(/\s+/g, ' ')}\n`);
    return 1;
  }
  rec.note(`volume ${o.volumeId}: ${result.kind}; FlexVolume driver ${result.driver} (${subject.flex.file}); CSI: ${result.csi}`);
  for (const n of subject.notes) rec.note(`note: ${n}`);
  let signals = 0;
  const onSignal = (signal: string) => {
    rec.interrupted = signal;
    // The pending RPC too: the flag alone waits for an answer a stuck server never sends.
    csi.interrupt(signal, ++signals > 1);
  };
  process.on('SIGINT', onSignal).on('SIGTERM', onSignal);
  mkdirSync(config.kubeletDir, { recursive: true });
  // A kubelet-style scratch root under the kubelet dir (drivers and the core keep targets below it).
  const root = mkdtempSync(join(realpathSync(config.kubeletDir), '.twinvol-verify-'));
  const flex = new KubeletFlex(subject.flex, root, config.nodeName, config.commandTimeoutMs, rec);
  let csiUsed = false;
  try {
    const side = csi;
    rec.heading('1. FlexVolume, as kubelet runs the driver (read-only)');
    result.sums.flex = await half(() => flex.up(), () => flex.down(), subject, rec);
    await hook('flex', o.volumeId, rec);
    rec.heading('2. CSI, as the sidecars and kubelet call the server (read-only)');
    csiUsed = true;
    result.sums.csi = await half(() => side.up(subject.csi, root), () => side.down(o.volumeId), subject, rec);
    result.differences.csi = differences(result.sums.flex, result.sums.csi);
    await hook('csi', o.volumeId, rec);
    rec.heading('3. Rollback: FlexVolume again reads what CSI left');
    result.sums.rollback = await half(() => flex.up(), () => flex.down(), subject, rec);
    result.differences.rollback = differences(result.sums.csi, result.sums.rollback);
    result.verdict = result.differences.csi.length || result.differences.rollback.length ? 'mismatch' : 'match';
  } catch (err) {
    result.error = (err instanceof Error ? err.message : String(err)).replace(/\s+/g, ' ');
  } finally {
    const left = await sweep({ core, config, root, subject, record, flex, csi, csiUsed, rec });
    if (left) {
      result.verdict = 'failed';
      result.error = [result.error, left].filter(Boolean).join('; ');
    }
    process.off('SIGINT', onSignal).off('SIGTERM', onSignal);
  }
  process.stdout.write(o.json ? jsonReport(result) : summary(result));
  return result.verdict === 'match' ? 0 : 1;
}

/** One model's turn: bring up, checksum, tear down (always, even when the checksum failed). */
async function half(up: () => Promise<{ path: string; device: string }>, down: () => Promise<void>, s: Subject, rec: Recorder): Promise<VolumeSum> {
  let sum: VolumeSum | undefined;
  let failure: unknown;
  try {
    const brought = await up();
    // Every call may answer Success and mount nothing (a driver's check that took another mount for
    // its own): the pod's directory is then empty in both models, and two empty directories matched.
    if (!mounted(brought.path)) throw new Error(`nothing is mounted at ${brought.path}, though every call answered success: there is no volume to read`);
    const started = performance.now();
    const tree = await treeSum(brought.path);
    let device;
    if (s.sumDevice) {
      if (!brought.device) throw new Error('the block volume came up without a device to checksum');
      device = await deviceSum(brought.device);
    }
    sum = { tree, ...(device ? { device } : {}) };
    rec.step({ model: 'host', call: 'checksum', outcome: 'done', ms: performance.now() - started, detail: `${tree.entries} entries, ${tree.bytes} bytes${device ? `, device ${device.bytes} bytes` : ''}` });
  } catch (err) {
    failure = err;
  }
  try {
    await down();
  } catch (err) {
    failure ??= err;
  }
  if (failure !== undefined || !sum) throw failure ?? new Error('no checksum');
  return sum;
}

/**
 * TWINVOL_VERIFY_HOOK: a program run after each half is torn down (`<hook> flex|csi <volume-id>`), with
 * nothing mounted. It exists so a test can change a byte between the halves and see verify fail
 * (test/migrate/verify-corrupt.test.ts); its failure fails the verify.
 */
async function hook(phase: 'flex' | 'csi', volumeId: string, rec: Recorder): Promise<void> {
  const program = process.env.TWINVOL_VERIFY_HOOK;
  if (!program) return;
  const started = performance.now();
  await run(program, [phase, volumeId], { timeoutMs: 60_000 });
  rec.step({ model: 'host', call: `TWINVOL_VERIFY_HOOK ${phase}`, outcome: 'ran', ms: performance.now() - started });
}

interface SweepContext {
  core: Core;
  config: Config;
  root: string;
  subject: Subject;
  record: VolumeRecord | undefined;
  flex: KubeletFlex;
  csi: CsiSide;
  csiUsed: boolean;
  rec: Recorder;
}

/**
 * The last word, whatever happened: a second teardown of both halves (each is idempotent), then by
 * force what is still mounted in the scratch root, the loop device of a block volume's image and an
 * attachment of this node (the volume was refused unless nobody used it, so these are verify's own),
 * the exec volume's registration if the CSI server made it, and the private server. Returns what
 * could not be cleaned, or "".
 */
async function sweep(c: SweepContext): Promise<string> {
  const problems: string[] = [];
  const quiet = (what: () => Promise<unknown>) => attempt(problems, what);
  c.rec.interrupted = '';
  const mountsLeft = () => mountsUnder(c.root);
  if (mountsLeft().length) {
    await quiet(() => c.flex.down());
    if (c.csiUsed) await quiet(() => c.csi.down(c.subject.volumeId));
  }
  // The core's unmount (shared/mounter.ts unmountAll, through run with the configured deadline):
  // stacked mounts until none is left, a stale one forced and detached; a busy one is reported, not
  // detached lazily, so the check below keeps the scratch root and its data.
  for (const m of mountsLeft()) await quiet(() => c.core.mounter.unmountAll(m));
  if (c.subject.sumDevice) for (const dev of loopsOf(c.core.catalog.imagePath(c.subject.volumeId))) await quiet(() => c.core.mounter.loopDetach(dev));
  const now = await c.core.catalog.getVolume(c.subject.volumeId).catch(() => undefined);
  if (c.subject.kind === 'twinvol' && now?.attachments.some((a) => a.node === c.config.nodeName))
    await quiet(() => releaseAttachment(c.core, c.subject.volumeId, c.config.nodeName));
  const pv = c.subject.flex.volume.id;
  if (c.subject.inventedPv && (await c.core.catalog.pvVolume(pv).catch(() => undefined)) === c.subject.volumeId) await quiet(() => c.core.catalog.forgetPv(pv));
  if (c.csiUsed && c.subject.kind === 'exec' && !c.subject.registered && now) await quiet(() => c.csi.forget(c.subject.volumeId));
  await quiet(() => c.csi.close());
  const still = mountsLeft();
  // Never a recursive delete through a mount: that would delete the volume's data.
  if (still.length) problems.push(`still mounted: ${still.join(', ')}`);
  else rmSync(c.root, { recursive: true, force: true });
  return problems.length ? `cleanup: ${problems.join('; ')}` : '';
}

/** Loop devices whose backing file is `image` (sysfs, shared/loop-devices.ts). */
function loopsOf(image: string): string[] {
  return loopDevices()
    .filter((l) => l.backingFile === image)
    .map((l) => l.device);
}
