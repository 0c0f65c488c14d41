import type { status } from '@grpc/grpc-js';
import { beforeAll, expect, it } from 'vitest';
import { outcome } from '../csi/helpers/client.js';
import { type CsiSuite, useCsiServer } from '../csi/helpers/fixture.js';
import { mountCap } from '../csi/helpers/requests.js';
import { flexOptions, runCli, runFlex } from '../helpers/flex-runner.js';

/** The node the CSI server runs as, and kubelet's node for the FlexVolume calls. */
export const THIS_NODE = 'node-a';
/** Another node of the cluster, holding volumes the tests make unavailable to THIS_NODE. */
export const OTHER_NODE = 'node-b';

/** What one front end answered: refused or not, with the message an operator would read. */
export interface Verdict {
  refused: boolean;
  message: string;
  /** CSI only: the gRPC status name. */
  code?: keyof typeof status;
}

/** One front end's way of asking, run when the row runs. */
export type Ask = () => Promise<Verdict>;

/**
 * One row of the rule table: the rule as the test's name, each front end's way of asking it (named
 * "<model> <call>"; made when the row runs, as the paths lie in the running suite's scratch world),
 * and the one verdict they must all give.
 */
export interface Row {
  rule: string;
  asks: () => Record<string, Ask>;
  refused: boolean;
  /** What every refusal's message says. */
  reason?: RegExp;
  /** The gRPC status of each CSI refusal (the core's ErrorCode as csi/rpc.ts maps it). */
  code?: keyof typeof status;
}

/**
 * The three front ends over one catalog: the admin CLI and the FlexVolume executable as processes,
 * as the installed binary runs, and the CSI server over its socket.
 */
export function useFrontEnds() {
  const csi: CsiSuite = useCsiServer({ nodeId: THIS_NODE });
  // ControllerPublishVolume needs a registered node (shared/core/nodes.ts): OTHER_NODE's node server
  // would register it when it starts.
  beforeAll(() => csi.registerNodes(OTHER_NODE));

  const cli = (...args: string[]): Ask => async () => {
    const r = await runCli(csi.s.env, args);
    return { refused: r.exitCode !== 0, message: r.stderr };
  };
  const flex = (...argv: string[]): Ask => async () => {
    const r = await runFlex(csi.s.env, argv);
    const refused = r.reply.status !== 'Success';
    // A refusal is a Failure document and exit code 1, never a crash or "Not supported".
    if (refused) expect({ status: r.reply.status, exitCode: r.exitCode }, r.output).toEqual({ status: 'Failure', exitCode: 1 });
    return { refused, message: String(r.reply.message ?? '') };
  };
  const grpc = (call: () => Promise<unknown>): Ask => async () => {
    const o = await outcome(call());
    return { refused: o.code !== 'OK', message: o.message, code: o.code };
  };
  /** ValidateVolumeCapabilities answers OK either way: "refused" is an unconfirmed answer. */
  const validate = (request: Parameters<typeof csi.ctl<'ValidateVolumeCapabilities'>>[1]): Ask => async () => {
    const r = await csi.ctl('ValidateVolumeCapabilities', request);
    return { refused: r.confirmed === null, message: r.message };
  };

  return {
    csi,
    cli,
    flex,
    grpc,
    validate,
    /** The administrator's `twinvol volume create`, which must succeed. */
    async create(id: string, ...args: string[]): Promise<void> {
      const r = await runCli(csi.s.env, ['create', id, ...args]);
      expect(r.exitCode, r.stderr).toBe(0);
    },
    /** `node` holds the volume, attached through `model`. */
    async attach(model: 'flex' | 'csi', id: string, node: string): Promise<void> {
      const verdict = model === 'flex'
        ? await flex('attach', flexOptions(`pv-${id}`, { volumeId: id }), node)()
        : await grpc(() => csi.ctl('ControllerPublishVolume', { volume_id: id, node_id: node, volume_capability: mountCap() }))();
      expect(verdict.refused, verdict.message).toBe(false);
    },
  };
}

/** Asks each front end in turn (a verdict may change what the next one sees) and holds them to the row. */
export async function expectSameVerdict(row: Row): Promise<void> {
  for (const [front, ask] of Object.entries(row.asks())) {
    const v = await ask();
    expect(v.refused, `${front}: ${v.message}`).toBe(row.refused);
    if (!row.refused) continue;
    if (row.reason) expect(v.message, front).toMatch(row.reason);
    if (row.code && v.code) expect(v.code, `${front}: ${v.message}`).toBe(row.code);
  }
}

/** One test per row, named as its rule. */
export function verdictTable(rows: readonly Row[]): void {
  for (const row of rows) it(row.rule, () => expectSameVerdict(row));
}
