import type { ServiceDefinition } from '@grpc/grpc-js';
import { fromJSON, type PackageDefinition } from '@grpc/proto-loader';
import protobuf from 'protobufjs';

/**
 * How request and response objects look on both sides (server and test client): proto field names
 * as written, int64 as decimal strings (a JS number cannot hold every int64), enums by name, unset
 * scalars filled with their defaults, and a virtual field naming the member set in each oneof.
 */
export const LOADER_OPTIONS = { keepCase: true, longs: String, enums: String, defaults: true, oneofs: true } as const;

/** The well-known types csi.proto imports; protobufjs ships them, so no file is read. */
const WELL_KNOWN = ['google/protobuf/wrappers.proto', 'google/protobuf/timestamp.proto'];

/**
 * Parses csi.proto from its text. The server embeds the text in its bundle (nothing beside the
 * executable to lose); the tests read the same file from disk.
 */
export function packageDefinitionFromText(protoText: string): PackageDefinition {
  const root = new protobuf.Root();
  for (const file of WELL_KNOWN) {
    const json = protobuf.common.get(file);
    if (!json?.nested) throw new Error(`protobufjs does not carry ${file}`);
    root.addJSON(json.nested);
  }
  protobuf.parse(protoText, root, { keepCase: true });
  return fromJSON(root.toJSON(), LOADER_OPTIONS);
}

export type CsiService = 'Identity' | 'Controller' | 'GroupController' | 'Node';

export function serviceDefinition(definition: PackageDefinition, service: CsiService): ServiceDefinition {
  const found = definition[`csi.v1.${service}`];
  // Message and enum definitions carry a `format`; a service is a bare map of methods.
  if (!found || 'format' in found) throw new Error(`csi.proto has no service csi.v1.${service}`);
  return found as ServiceDefinition;
}
