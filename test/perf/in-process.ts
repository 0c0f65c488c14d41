import type { UntypedHandleCall } from '@grpc/grpc-js';
import { loadSync } from '@grpc/proto-loader';
import { controllerService } from '../../csi/controller.js';
import type { ServiceContext } from '../../csi/context.js';
import { ExecService } from '../../csi/exec-service.js';
import { identityService } from '../../csi/identity.js';
import { nodeService } from '../../csi/node.js';
import { invokeUnary, Rpc } from '../../csi/rpc.js';
import { nodeTopology } from '../../csi/topology.js';
import { dispatch } from '../../flex/dispatch.js';
import type { FlexReply } from '../../flex/reply.js';
import { isFlexVerb } from '../../flex/verb-names.js';
import { loadConfig } from '../../shared/config.js';
import { ExecVolumes } from '../../shared/backends/exec-volumes.js';
import { openCore } from '../../shared/core/core.js';
import { registerNode } from '../../shared/core/nodes.js';
import { Logger } from '../../shared/log.js';
import { mountTableCounts } from '../../shared/mountinfo.js';
import { observeSystemCalls } from '../../shared/native-mount.js';
import { observeSpawns } from '../../shared/runner.js';
import { storeCounts } from '../../shared/store/json-record.js';
import type { Scratch } from '../helpers/scratch.js';
import { nid } from '../helpers/ids.js';
import { PROTO_PATH } from '../csi/helpers/client.js';

/** The work one call did: the tools it spawned and the mounts it made as system calls (by name, in order), fsyncs, record reads and locks. */
export interface Work {
  spawns: string[];
  /** A failed one as `call:ERRNO`, as compare writes it (the tool that then took the step is among the spawns). */
  systemCalls: string[];
  fsyncs: number;
  reads: number;
  /** Reads of /proc/self/mountinfo (shared/mountinfo.ts), whose cost grows with the node's mounts. */
  mountTableReads: number;
  locks: number;
}

/**
 * Runs `fn` and counts what it did through the store's counters (shared/store/json-record.ts) and the
 * runner's spawn observers (shared/runner.ts) and the mount addon's (shared/native-mount.ts): in-process, so nothing but the call itself is counted.
 */
export async function measure<T>(fn: () => Promise<T>): Promise<{ result: T; work: Work }> {
  const spawns: string[] = [];
  const systemCalls: string[] = [];
  const stops = [observeSpawns((r) => spawns.push(r.command)), observeSystemCalls((r) => systemCalls.push(r.error ? `${r.call}:${r.error}` : r.call))];
  const before = { ...storeCounts };
  const tableReadsBefore = mountTableCounts.reads;
  try {
    const result = await fn();
    return { result, work: { spawns, systemCalls, fsyncs: storeCounts.fsyncs - before.fsyncs, reads: storeCounts.reads - before.reads, mountTableReads: mountTableCounts.reads - tableReadsBefore, locks: storeCounts.locks - before.locks } };
  } finally {
    for (const stop of stops) stop();
  }
}

/**
 * A FlexVolume call as the executable makes it (flex/dispatch.ts), in this process: the scratch's
 * environment is set for the whole file (each test file runs in its own process, vitest.config.ts).
 */
export async function flexCall(s: Scratch, verb: string, ...args: string[]): Promise<FlexReply> {
  Object.assign(process.env, s.env);
  if (!isFlexVerb(verb)) throw new Error(`${verb} is not a FlexVolume verb`);
  const reply = await dispatch(verb, args);
  if (reply.status !== 'Success') throw new Error(`flex ${verb}: ${JSON.stringify(reply)}`);
  return reply;
}

const definition = loadSync(PROTO_PATH, { keepCase: true, longs: String, enums: String, defaults: true, oneofs: true });

interface MethodDefinition {
  requestSerialize(value: unknown): Buffer;
  requestDeserialize(bytes: Buffer): unknown;
}

/** The CSI services of one node-and-controller server, called in this process with requests as grpc-js decodes them. */
export interface InProcessCsi {
  call(service: 'Identity' | 'Controller' | 'Node', method: string, request: object): Promise<unknown>;
}

/** `pluginDir`: where third-party FlexVolume drivers are found for exec volumes, as the server's --flex-plugin-dir. */
export async function inProcessCsi(s: Scratch, nodeId = 'bench', { pluginDir }: { pluginDir?: string } = {}): Promise<InProcessCsi> {
  const config = loadConfig({ TWINVOL_CONFIG: s.env.TWINVOL_CONFIG }, { dataRoot: s.dataRoot, stateDir: s.stateDir, kubeletDir: s.kubeletDir, nodeName: nodeId });
  const node = nid(nodeId);
  const flex = pluginDir ? new ExecVolumes({ pluginDir, timeoutMs: 30_000, lenient: [], execIn: 'local' }) : undefined;
  const ctx: ServiceContext = {
    core: openCore(config, flex ? { flex } : {}),
    rpc: new Rpc(new Logger(() => undefined)),
    settings: { driverName: 'csi.twinvol.io', vendorVersion: 'test', mode: 'all', nodeId: node, maxVolumesPerNode: 0 },
  };
  // As csi/server.ts does before it serves: ControllerPublishVolume needs the node registered.
  await registerNode(ctx.core, node, nodeTopology(node).segments, 'csi');
  // Exec volumes take their own path through each service, as in csi/services.ts.
  const exec = flex && new ExecService(ctx, { capabilities: (driver) => flex.drivers.capabilities(driver), only: false, inline: [] });
  const services: Record<string, object> = {
    Identity: identityService({ ...ctx, config: ctx.core.config, tools: { missing: [], missingOptional: [] } }),
    Controller: exec ? exec.controller(controllerService(ctx)) : controllerService(ctx),
    Node: exec ? exec.node(nodeService(ctx)) : nodeService(ctx),
  };
  return {
    call(service, method, request) {
      const handler = (services[service] as Record<string, UntypedHandleCall | undefined>)[method];
      const def = (definition[`csi.v1.${service}`] as unknown as Record<string, MethodDefinition | undefined>)[method];
      if (!handler || !def) throw new Error(`no ${service}.${method}`);
      // Through the wire format, so the handler sees defaults and oneof fields as the server would.
      const decoded = def.requestDeserialize(def.requestSerialize(request));
      return invokeUnary(handler, decoded).then((answer) => {
        if ('error' in answer) throw new Error(`${method}: ${answer.error.details}`);
        return answer.reply;
      });
    },
  };
}
