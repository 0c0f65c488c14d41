import { existsSync, watch } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../shared/config.js';
import { openCore } from '../shared/core/core.js';
import type { Origin } from '../shared/model.js';
import { outcome } from './csi/helpers/client.js';
import { useCsiServer } from './csi/helpers/fixture.js';
import { mountCap } from './csi/helpers/requests.js';
import { flexOptions, runCli, runFlex } from './helpers/flex-runner.js';

/**
 * Single-node exclusivity under a real race: a FlexVolume `attach` process and a CSI
 * ControllerPublishVolume call for two different nodes, on one volume and one catalog. Whatever order
 * the volume's lock grants them in, exactly one wins, the other is refused naming the winner's node,
 * and the catalog lists the winner alone. Then the winner detaches and the next round goes again,
 * swapping which model plays which node.
 *
 * Started in the same tick, the CSI call is done before the FlexVolume process has even loaded (a
 * process start against an in-process call), so half the rounds start the CSI call instead at the
 * moment the FlexVolume process takes the volume's lock: the CSI side then waits on a lock the other
 * model holds, which is the interleaving exclusivity most depends on.
 */
const ROUNDS = 100;
const csi = useCsiServer({ nodeId: 'node-a' });
const { ctl } = csi;

/**
 * The race is between the CSI server's own node and a second node, both registered in beforeAll
 * below (ControllerPublishVolume to a node that never registered is NOT_FOUND).
 */
const NODES = ['node-a', 'node-b'] as const;
type Node = (typeof NODES)[number];

/** One side of a round: did it win, and if not, what did it answer. */
interface Side {
  model: Extract<Origin, 'flex' | 'csi'>;
  node: Node;
  won: boolean;
  refusal: string;
}

/** The moment the FlexVolume process takes the volume's lock: its lock directory appears (shared/store/lock.ts). */
function whenLockTaken(id: string): { taken: Promise<void>; stop(): void } {
  const locks = join(csi.s.dataRoot, 'locks');
  if (!existsSync(locks)) throw new Error(`${locks} does not exist: the volume was never locked`);
  let seen!: () => void;
  const taken = new Promise<void>((resolve) => (seen = resolve));
  const watcher = watch(locks, (_event, name) => {
    if (name === `volume-${id}.lock`) seen();
  });
  return { taken, stop: () => watcher.close() };
}

const flexAttach = async (id: string, node: Node): Promise<Side> => {
  const r = await runFlex(csi.s.env, ['attach', flexOptions(`pv-${id}`, { volumeId: id }), node]);
  const won = r.reply.status === 'Success' && r.exitCode === 0;
  // A refusal is one Failure document with exit 1; anything else fails the round outright.
  if (!won) expect({ status: r.reply.status, exitCode: r.exitCode }).toEqual({ status: 'Failure', exitCode: 1 });
  return { model: 'flex', node, won, refusal: won ? '' : String(r.reply.message) };
};

const csiPublish = async (id: string, node: Node): Promise<Side> => {
  const o = await outcome(ctl('ControllerPublishVolume', { volume_id: id, node_id: node, volume_capability: mountCap() }));
  if (o.code !== 'OK') expect(o.code, o.message).toBe('FAILED_PRECONDITION');
  return { model: 'csi', node, won: o.code === 'OK', refusal: o.message };
};

const detachAs = async (side: Side, id: string): Promise<void> => {
  if (side.model === 'flex') {
    const r = await runFlex(csi.s.env, ['detach', `pv-${id}`, side.node]);
    expect(r.reply.status, r.output).toBe('Success');
  } else {
    await ctl('ControllerUnpublishVolume', { volume_id: id, node_id: side.node });
  }
};

const attachedNodes = async (id: string) => {
  const volume = await openCore(loadConfig(csi.s.env)).catalog.requireVolume(id);
  return volume.attachments.map((a) => ({ node: a.node, via: a.via }));
};

describe.each([
  ['dir', ['--backend', 'dir', '--size', '1Mi']],
  ['block', ['--size', '16Mi']],
])('attach race on a single-node %s volume: FlexVolume and CSI for two nodes at once', (backend, createArgs) => {
  const id = `race-${backend}`;

  beforeAll(async () => {
    await csi.registerNodes(...NODES);
    const made = await runCli(csi.s.env, ['create', id, ...createArgs]);
    expect(made.exitCode, made.stderr).toBe(0);
  });

  it('each model can attach each node on its own (the nodes are known to both)', async () => {
    for (const node of NODES) {
      for (const attach of [flexAttach, csiPublish]) {
        const side = await attach(id, node);
        expect(side.won, side.refusal).toBe(true);
        await detachAs(side, id);
      }
    }
    expect(await attachedNodes(id)).toEqual([]);
  });

  it(`${ROUNDS} rounds: exactly one wins, the loser names the winner's node, the catalog lists the winner alone`, { timeout: 600_000 }, async () => {
    for (let round = 0; round < ROUNDS; round++) {
      const [flexNode, csiNode] = round % 2 ? [NODES[1], NODES[0]] : [NODES[0], NODES[1]];
      // Rounds 0,1 in the same tick, 2,3 on the lock, ...: every launch point with every node order.
      const onLock = Math.floor(round / 2) % 2 === 1;
      const lock = whenLockTaken(id);
      let sides: Side[];
      try {
        const flex = flexAttach(id, flexNode);
        // Without the lock ever appearing the CSI call would never start: the attach's end stands in, and fails the round below.
        const lockFirst = onLock ? await Promise.race([lock.taken.then(() => true), flex.then(() => false)]) : true;
        expect(lockFirst, `round ${round}: the FlexVolume attach finished without taking the volume's lock`).toBe(true);
        sides = await Promise.all([flex, csiPublish(id, csiNode)]);
      } finally {
        lock.stop();
      }
      const winners = sides.filter((s) => s.won);
      expect(winners.map((w) => w.model), `round ${round}: ${JSON.stringify(sides)}`).toHaveLength(1);
      const [winner, loser] = sides[0]!.won ? [sides[0]!, sides[1]!] : [sides[1]!, sides[0]!];
      expect(loser.refusal, `round ${round}`).toContain(`attached to node ${winner.node}`);
      expect(await attachedNodes(id), `round ${round}`).toEqual([{ node: winner.node, via: winner.model }]);
      // A call that arrives while the other model holds the lock waits for it, then sees the attachment.
      if (onLock) expect(winner.model, `round ${round}`).toBe('flex');
      await detachAs(winner, id);
    }
  });
});
