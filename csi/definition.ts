import type { MethodDefinition, ServiceDefinition } from '@grpc/grpc-js';
import protobuf from 'protobufjs';

/**
 * How request and response objects look on both sides (server and test client): proto field names
 * as written, int64 as decimal strings (a JS number cannot hold every int64), enums by name, unset
 * scalars filled with their defaults, and a virtual field naming the member set in each oneof.
 * These are @grpc/proto-loader's options; the test client loads csi.proto with that library.
 */
export const LOADER_OPTIONS = { keepCase: true, longs: String, enums: String, defaults: true, oneofs: true } as const;

/** The well-known types csi.proto imports; protobufjs ships them, so no file is read. */
const WELL_KNOWN = ['google/protobuf/wrappers.proto', 'google/protobuf/timestamp.proto'];

/** The services csi.proto defines, each served by its own handlers (csi/services.ts ServiceTable). */
export const CSI_SERVICES = ['Identity', 'Controller', 'GroupController', 'Node'] as const;
export type CsiService = (typeof CSI_SERVICES)[number];

export type CsiServiceDefinitions = Record<CsiService, ServiceDefinition>;

/**
 * The four services of csi.proto as grpc-js serves and calls them, parsed from the proto's text (the
 * server embeds the text in its bundle: nothing beside the executable to lose; the tests read the
 * same file). Each method's messages are encoded and decoded by protobufjs exactly as
 * @grpc/proto-loader's definitions do (fromObject then encode; decode then toObject with
 * LOADER_OPTIONS; test/csi/unit/definition.test.ts compares the two on every method).
 *
 * Built here rather than with proto-loader's fromJSON: besides those codecs, it makes a reflection
 * descriptor of every message and encodes the whole file's descriptor, which grpc-js never reads
 * when it serves or calls. That took 20-30 ms of the server's start, on the thread that must bind
 * the socket before the first Probe; this takes under 1 ms (docs/benchmarks.md, "csi.proto without
 * proto-loader's descriptors").
 */
export function csiServiceDefinitions(protoText: string): CsiServiceDefinitions {
  const root = new protobuf.Root();
  for (const file of WELL_KNOWN) {
    const json = protobuf.common.get(file);
    if (!json?.nested) throw new Error(`protobufjs does not carry ${file}`);
    root.addJSON(json.nested);
  }
  protobuf.parse(protoText, root, { keepCase: true });
  const definition = (service: CsiService): ServiceDefinition => {
    const methods: Record<string, MethodDefinition<object, object>> = {};
    for (const method of root.lookupService(`csi.v1.${service}`).methodsArray) {
      method.resolve();
      const request = method.resolvedRequestType;
      const response = method.resolvedResponseType;
      if (!request || !response) throw new Error(`csi.proto: csi.v1.${service}.${method.name} names a message it does not define`);
      methods[method.name] = {
        path: `/csi.v1.${service}/${method.name}`,
        requestStream: Boolean(method.requestStream),
        responseStream: Boolean(method.responseStream),
        requestSerialize: serializer(request),
        requestDeserialize: deserializer(request),
        responseSerialize: serializer(response),
        responseDeserialize: deserializer(response),
        // proto-loader's camelCase of the name: grpc-js finds a handler under either.
        originalName: method.name.charAt(0).toLowerCase() + method.name.slice(1),
      };
    }
    return methods;
  };
  return { Identity: definition('Identity'), Controller: definition('Controller'), GroupController: definition('GroupController'), Node: definition('Node') };
}

function serializer(type: protobuf.Type): (value: object) => Buffer {
  return (value) => {
    // proto-loader's own check: fromObject would take an array's indexes for field names.
    if (Array.isArray(value)) throw new Error(`Failed to serialize message: expected object with ${type.name} structure, got array instead`);
    const bytes = type.encode(type.fromObject(value)).finish();
    return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  };
}

function deserializer(type: protobuf.Type): (bytes: Buffer) => object {
  return (bytes) => type.toObject(type.decode(bytes), LOADER_OPTIONS);
}
