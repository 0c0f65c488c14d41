import { resolve } from 'node:path';
import { credentials, loadPackageDefinition, type Client, type ServiceClientConstructor, type ServiceError, status } from '@grpc/grpc-js';
import { loadSync } from '@grpc/proto-loader';
import { expect } from 'vitest';
import type { CreateSnapshotResponse__Output } from '../../../csi/generated/csi/v1/CreateSnapshotResponse.js';
import type { GetSnapshotResponse__Output } from '../../../csi/generated/csi/v1/GetSnapshotResponse.js';
import type { GroupControllerGetCapabilitiesResponse__Output } from '../../../csi/generated/csi/v1/GroupControllerGetCapabilitiesResponse.js';
import type { CreateVolumeGroupSnapshotResponse__Output } from '../../../csi/generated/csi/v1/CreateVolumeGroupSnapshotResponse.js';
import type { GetVolumeGroupSnapshotResponse__Output } from '../../../csi/generated/csi/v1/GetVolumeGroupSnapshotResponse.js';
import type * as M from '../../../csi/csi-types.js';
import type { ControllerExpandVolumeResponse__Output } from '../../../csi/generated/csi/v1/ControllerExpandVolumeResponse.js';
import type { ControllerGetCapabilitiesResponse__Output } from '../../../csi/generated/csi/v1/ControllerGetCapabilitiesResponse.js';
import type { ControllerGetVolumeResponse__Output } from '../../../csi/generated/csi/v1/ControllerGetVolumeResponse.js';
import type { ControllerPublishVolumeResponse__Output } from '../../../csi/generated/csi/v1/ControllerPublishVolumeResponse.js';
import type { CreateVolumeResponse__Output } from '../../../csi/generated/csi/v1/CreateVolumeResponse.js';
import type { GetCapacityResponse__Output } from '../../../csi/generated/csi/v1/GetCapacityResponse.js';
import type { GetPluginCapabilitiesResponse__Output } from '../../../csi/generated/csi/v1/GetPluginCapabilitiesResponse.js';
import type { GetPluginInfoResponse__Output } from '../../../csi/generated/csi/v1/GetPluginInfoResponse.js';
import type { ListSnapshotsResponse__Output } from '../../../csi/generated/csi/v1/ListSnapshotsResponse.js';
import type { ListVolumesResponse__Output } from '../../../csi/generated/csi/v1/ListVolumesResponse.js';
import type { NodeExpandVolumeResponse__Output } from '../../../csi/generated/csi/v1/NodeExpandVolumeResponse.js';
import type { NodeGetCapabilitiesResponse__Output } from '../../../csi/generated/csi/v1/NodeGetCapabilitiesResponse.js';
import type { NodeGetInfoResponse__Output } from '../../../csi/generated/csi/v1/NodeGetInfoResponse.js';
import type { NodeGetVolumeStatsResponse__Output } from '../../../csi/generated/csi/v1/NodeGetVolumeStatsResponse.js';
import type { ProbeResponse__Output } from '../../../csi/generated/csi/v1/ProbeResponse.js';
import type { ValidateVolumeCapabilitiesResponse__Output } from '../../../csi/generated/csi/v1/ValidateVolumeCapabilitiesResponse.js';

export const PROTO_PATH = resolve(import.meta.dirname, '../../../csi/proto/csi.proto');

/**
 * The client side loads csi.proto from disk with proto-loader's own loader, independently of the
 * server's embedded copy: if the two disagreed on the protocol, these tests would see it.
 */
const definition = loadSync(PROTO_PATH, { keepCase: true, longs: String, enums: String, defaults: true, oneofs: true });
const csi = (loadPackageDefinition(definition).csi as { v1: Record<string, ServiceClientConstructor> }).v1;

/**
 * A reply as the tests read it: proto-loader's received shape (csi/generated/, see csi/csi-types.ts)
 * with unset message fields taken as present. A test that reads a field the server left unset fails
 * at that access, which is the failure it should be.
 */
export type Reply<T> = T extends string | number | boolean ? T : T extends (infer E)[] ? Reply<E>[] : { [K in keyof T]-?: Reply<NonNullable<T[K]>> };

/** Request and reply of each method the tests call (csi/csi-types.ts, from csi/proto/csi.proto). */
export interface Rpcs {
  Identity: {
    GetPluginInfo: [M.Empty, Reply<GetPluginInfoResponse__Output>];
    GetPluginCapabilities: [M.Empty, Reply<GetPluginCapabilitiesResponse__Output>];
    Probe: [M.Empty, Reply<ProbeResponse__Output>];
  };
  Controller: {
    CreateVolume: [M.CreateVolumeRequest, Reply<CreateVolumeResponse__Output>];
    DeleteVolume: [M.DeleteVolumeRequest, M.Empty];
    ControllerPublishVolume: [M.ControllerPublishVolumeRequest, Reply<ControllerPublishVolumeResponse__Output>];
    ControllerUnpublishVolume: [M.ControllerUnpublishVolumeRequest, M.Empty];
    ValidateVolumeCapabilities: [M.ValidateVolumeCapabilitiesRequest, Reply<ValidateVolumeCapabilitiesResponse__Output>];
    ListVolumes: [M.ListVolumesRequest, Reply<ListVolumesResponse__Output>];
    ControllerGetVolume: [M.ControllerGetVolumeRequest, Reply<ControllerGetVolumeResponse__Output>];
    GetCapacity: [M.GetCapacityRequest, Reply<GetCapacityResponse__Output>];
    ControllerGetCapabilities: [M.Empty, Reply<ControllerGetCapabilitiesResponse__Output>];
    CreateSnapshot: [M.CreateSnapshotRequest, Reply<CreateSnapshotResponse__Output>];
    DeleteSnapshot: [M.DeleteSnapshotRequest, M.Empty];
    ListSnapshots: [M.ListSnapshotsRequest, Reply<ListSnapshotsResponse__Output>];
    GetSnapshot: [M.GetSnapshotRequest, Reply<GetSnapshotResponse__Output>];
    ControllerExpandVolume: [M.ControllerExpandVolumeRequest, Reply<ControllerExpandVolumeResponse__Output>];
    ControllerModifyVolume: [{ volume_id: string; mutable_parameters: M.StringMap }, M.Empty];
  };
  Node: {
    NodeStageVolume: [M.NodeStageVolumeRequest, M.Empty];
    NodeUnstageVolume: [M.NodeUnstageVolumeRequest, M.Empty];
    NodePublishVolume: [M.NodePublishVolumeRequest, M.Empty];
    NodeUnpublishVolume: [M.NodeUnpublishVolumeRequest, M.Empty];
    NodeGetVolumeStats: [M.NodeGetVolumeStatsRequest, Reply<NodeGetVolumeStatsResponse__Output>];
    NodeExpandVolume: [M.NodeExpandVolumeRequest, Reply<NodeExpandVolumeResponse__Output>];
    NodeGetCapabilities: [M.Empty, Reply<NodeGetCapabilitiesResponse__Output>];
    NodeGetInfo: [M.Empty, Reply<NodeGetInfoResponse__Output>];
  };
  GroupController: {
    GroupControllerGetCapabilities: [M.Empty, Reply<GroupControllerGetCapabilitiesResponse__Output>];
    CreateVolumeGroupSnapshot: [M.CreateVolumeGroupSnapshotRequest, Reply<CreateVolumeGroupSnapshotResponse__Output>];
    GetVolumeGroupSnapshot: [M.GetVolumeGroupSnapshotRequest, Reply<GetVolumeGroupSnapshotResponse__Output>];
    DeleteVolumeGroupSnapshot: [M.DeleteVolumeGroupSnapshotRequest, M.Empty];
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
