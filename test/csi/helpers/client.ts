import { resolve } from 'node:path';
import { credentials, loadPackageDefinition, type Client, type ServiceClientConstructor, type ServiceError, status } from '@grpc/grpc-js';
import { loadSync } from '@grpc/proto-loader';
import { expect } from 'vitest';
import type * as M from '../../../csi/messages.js';

export const PROTO_PATH = resolve(import.meta.dirname, '../../../csi/proto/csi.proto');

/**
 * The client side loads csi.proto from disk with proto-loader's own loader, independently of the
 * server's embedded copy: if the two disagreed on the protocol, these tests would see it.
 */
const definition = loadSync(PROTO_PATH, { keepCase: true, longs: String, enums: String, defaults: true, oneofs: true });
const csi = (loadPackageDefinition(definition).csi as { v1: Record<string, ServiceClientConstructor> }).v1;

/** Request and reply of each method the tests call, as proto-loader shapes them (csi/messages.ts). */
export interface Rpcs {
  Identity: {
    GetPluginInfo: [M.Empty, M.GetPluginInfoResponse];
    GetPluginCapabilities: [M.Empty, M.GetPluginCapabilitiesResponse];
    Probe: [M.Empty, M.ProbeResponse];
  };
  Controller: {
    CreateVolume: [M.CreateVolumeRequest, M.CreateVolumeResponse];
    DeleteVolume: [M.DeleteVolumeRequest, M.Empty];
    ControllerPublishVolume: [M.ControllerPublishVolumeRequest, M.ControllerPublishVolumeResponse];
    ControllerUnpublishVolume: [M.ControllerUnpublishVolumeRequest, M.Empty];
    ValidateVolumeCapabilities: [M.ValidateVolumeCapabilitiesRequest, M.ValidateVolumeCapabilitiesResponse];
    ListVolumes: [M.ListRequest, M.ListVolumesResponse];
    ControllerGetVolume: [M.ControllerGetVolumeRequest, M.ControllerGetVolumeResponse];
    GetCapacity: [M.GetCapacityRequest, M.GetCapacityResponse];
    ControllerGetCapabilities: [M.Empty, M.ControllerGetCapabilitiesResponse];
    CreateSnapshot: [M.CreateSnapshotRequest, M.SnapshotResponse];
    DeleteSnapshot: [M.SnapshotIdRequest, M.Empty];
    ListSnapshots: [M.ListSnapshotsRequest, M.ListSnapshotsResponse];
    GetSnapshot: [M.SnapshotIdRequest, M.SnapshotResponse];
    ControllerExpandVolume: [M.ControllerExpandVolumeRequest, M.ControllerExpandVolumeResponse];
    ControllerModifyVolume: [{ volume_id: string; mutable_parameters: M.StringMap }, M.Empty];
  };
  Node: {
    NodeStageVolume: [M.NodeStageVolumeRequest, M.Empty];
    NodeUnstageVolume: [M.NodeUnstageVolumeRequest, M.Empty];
    NodePublishVolume: [M.NodePublishVolumeRequest, M.Empty];
    NodeUnpublishVolume: [M.NodeUnpublishVolumeRequest, M.Empty];
    NodeGetVolumeStats: [M.NodeGetVolumeStatsRequest, M.NodeGetVolumeStatsResponse];
    NodeExpandVolume: [M.NodeExpandVolumeRequest, M.NodeExpandVolumeResponse];
    NodeGetCapabilities: [M.Empty, M.NodeGetCapabilitiesResponse];
    NodeGetInfo: [M.Empty, M.NodeGetInfoResponse];
  };
  /** Not served: only its UNIMPLEMENTED answer is tested. */
  GroupController: {
    GroupControllerGetCapabilities: [M.Empty, M.Empty];
  };
}

export type Service = keyof Rpcs;
type Req<S extends Service, K extends keyof Rpcs[S]> = Rpcs[S][K] extends [infer Q, unknown] ? Q : never;
type Res<S extends Service, K extends keyof Rpcs[S]> = Rpcs[S][K] extends [unknown, infer R] ? R : never;
/** Tests leave fields out on purpose (that is what the required-field checks are about). */
export type Partial2<T> = T extends string | number | boolean ? T : T extends (infer E)[] ? Partial2<E>[] : { [K in keyof T]?: Partial2<T[K]> | null };

export type ServiceCall<S extends Service> = <K extends keyof Rpcs[S] & string>(method: K, request?: Partial2<Req<S, K>>) => Promise<Res<S, K>>;

/** `call` bound to one service, for a client that may only exist later (fixtures start in beforeAll). */
export function serviceCall<S extends Service>(client: () => CsiClient, service: S): ServiceCall<S> {
  return (method, request) => client().call(service, method, request);
}

export interface CsiClient {
  call<S extends Service, K extends keyof Rpcs[S] & string>(service: S, method: K, request?: Partial2<Req<S, K>>): Promise<Res<S, K>>;
  close(): void;
}

export function createCsiClient(socketPath: string): CsiClient {
  const clients = new Map<Service, Client>();
  const clientFor = (service: Service): Client => {
    let c = clients.get(service);
    if (!c) {
      const ctor = csi[service];
      if (!ctor) throw new Error(`csi.proto has no service ${service}`);
      c = new ctor(`unix://${socketPath}`, credentials.createInsecure());
      clients.set(service, c);
    }
    return c;
  };
  return {
    call<S extends Service, K extends keyof Rpcs[S] & string>(service: S, method: K, request: unknown = {}): Promise<Res<S, K>> {
      const client = clientFor(service) as unknown as Record<string, (req: unknown, cb: (err: ServiceError | null, res: Res<S, K>) => void) => void>;
      const fn = client[method];
      if (typeof fn !== 'function') throw new Error(`csi.v1.${service} has no method ${method}`);
      return new Promise((done, fail) => fn.call(client, request, (err, res) => (err ? fail(err) : done(res))));
    },
    close() {
      for (const c of clients.values()) c.close();
    },
  };
}

export interface CallOutcome {
  code: keyof typeof status;
  message: string;
}

/** A call's status code by name, and its message; "OK" with an empty message on success. */
export async function outcome(p: Promise<unknown>): Promise<CallOutcome> {
  try {
    await p;
    return { code: 'OK', message: '' };
  } catch (err) {
    const e = err as ServiceError;
    if (typeof e.code !== 'number') throw err;
    return { code: status[e.code] as keyof typeof status, message: e.details };
  }
}

/** Asserts the call failed with `code`; returns its message for further checks. */
export async function expectCode(p: Promise<unknown>, code: keyof typeof status): Promise<string> {
  const o = await outcome(p);
  expect(o.code, `expected ${code}, got ${o.code}: ${o.message}`).toBe(code);
  return o.message;
}
