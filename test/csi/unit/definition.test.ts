import { readFileSync } from 'node:fs';
import type { MethodDefinition } from '@grpc/grpc-js';
import { loadSync } from '@grpc/proto-loader';
import fc from 'fast-check';
import protobuf from 'protobufjs';
import { describe, expect, it } from 'vitest';
import { CSI_SERVICES, csiServiceDefinitions, LOADER_OPTIONS } from '../../../csi/definition.js';
import { PROTO_PATH } from '../helpers/client.js';

/**
 * csi/definition.ts builds the services grpc-js serves without @grpc/proto-loader's descriptors. The
 * test client, and every CSI client in the field built the usual way, use proto-loader's: on every
 * method of every service, the two must agree on the path, the streaming flags and the bytes and
 * objects of the messages both ways, for messages drawn from the proto's own reflection.
 */
const ours = csiServiceDefinitions(readFileSync(PROTO_PATH, 'utf8'));
const loaded = loadSync(PROTO_PATH, LOADER_OPTIONS);
const root = protobuf.loadSync(PROTO_PATH);

type Method = MethodDefinition<object, object>;
function theirs(service: string): Record<string, Method> {
  const found = loaded[`csi.v1.${service}`];
  if (!found || 'format' in found) throw new Error(`proto-loader has no service csi.v1.${service}`);
  // A service definition is a map of method definitions; 'format' is only on messages and enums.
  return found as unknown as Record<string, Method>;
}

const INT32 = fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 });
const SCALARS: Record<string, fc.Arbitrary<unknown>> = {
  string: fc.string({ maxLength: 12 }),
  bool: fc.boolean(),
  bytes: fc.uint8Array({ maxLength: 8 }).map((b) => Buffer.from(b)),
  double: fc.double({ noNaN: true }),
  float: fc.float({ noNaN: true }),
  int32: INT32,
  sint32: INT32,
  sfixed32: INT32,
  uint32: fc.integer({ min: 0, max: 2 ** 32 - 1 }),
  fixed32: fc.integer({ min: 0, max: 2 ** 32 - 1 }),
  // int64 travels as a decimal string (LOADER_OPTIONS.longs).
  int64: fc.bigInt(-(2n ** 63n), 2n ** 63n - 1n).map(String),
  sint64: fc.bigInt(-(2n ** 63n), 2n ** 63n - 1n).map(String),
  sfixed64: fc.bigInt(-(2n ** 63n), 2n ** 63n - 1n).map(String),
  uint64: fc.bigInt(0n, 2n ** 64n - 1n).map(String),
  fixed64: fc.bigInt(0n, 2n ** 64n - 1n).map(String),
};

/** One field's values: a scalar, an enum by name, or a message (none below `depth` 0). */
function valueOf(field: protobuf.Field, depth: number): fc.Arbitrary<unknown> | undefined {
  const type = field.resolve().resolvedType;
  if (type instanceof protobuf.Enum) return fc.constantFrom(...Object.keys(type.values));
  if (type instanceof protobuf.Type) return depth > 0 ? messageOf(type, depth - 1) : undefined;
  const scalar = SCALARS[field.type];
  if (!scalar) throw new Error(`no arbitrary for ${field.type} (${field.fullName})`);
  return scalar;
}

/** Objects of `type` as a client hands them over: any subset of its fields, at most one member of each oneof. */
function messageOf(type: protobuf.Type, depth: number): fc.Arbitrary<Record<string, unknown>> {
  const plain: Record<string, fc.Arbitrary<unknown>> = {};
  const oneofs: fc.Arbitrary<Record<string, unknown>>[] = [];
  for (const field of type.fieldsArray) {
    if (field.partOf) continue;
    const value = valueOf(field, depth);
    if (!value) continue;
    if (field instanceof protobuf.MapField) plain[field.name] = fc.dictionary(fc.string({ maxLength: 8 }), value, { maxKeys: 3 });
    else plain[field.name] = field.repeated ? fc.array(value, { maxLength: 3 }) : value;
  }
  for (const oneof of type.oneofsArray) {
    const members = oneof.fieldsArray.flatMap((f) => {
      const value = valueOf(f, depth);
      return value ? [value.map((v) => ({ [f.name]: v }))] : [];
    });
    oneofs.push(fc.oneof(fc.constant({}), ...members));
  }
  return fc.tuple(fc.record(plain, { requiredKeys: [] }), ...oneofs).map((parts) => Object.assign({}, ...parts) as Record<string, unknown>);
}

const methods = CSI_SERVICES.flatMap((service) => Object.keys(ours[service]).map((method) => [service, method] as const));

describe('csi/definition.ts against @grpc/proto-loader', () => {
  it('defines the same services and methods, with the same paths and streaming flags', () => {
    for (const service of CSI_SERVICES) {
      const mine = ours[service] as Record<string, Method>;
      const reference = theirs(service);
      expect(Object.keys(mine).sort(), service).toEqual(Object.keys(reference).sort());
      for (const [name, m] of Object.entries(mine)) {
        const r = reference[name]!;
        expect({ path: m.path, requestStream: m.requestStream, responseStream: m.responseStream, originalName: m.originalName }, `${service}.${name}`).toEqual({
          path: r.path,
          requestStream: r.requestStream,
          responseStream: r.responseStream,
          originalName: r.originalName,
        });
      }
    }
    expect(methods.length, "CSI v1.12 has 30 RPCs").toBeGreaterThanOrEqual(30);
  });

  it.each(methods)('%s.%s: encodes and decodes requests and replies as proto-loader does', (service, name) => {
    const mine = ours[service][name] as Method;
    const reference = theirs(service)[name]!;
    const resolved = root.lookupService(`csi.v1.${service}`).methods[name]!;
    resolved.resolve();
    for (const [type, ourEncode, ourDecode, theirEncode, theirDecode] of [
      [resolved.resolvedRequestType!, mine.requestSerialize, mine.requestDeserialize, reference.requestSerialize, reference.requestDeserialize],
      [resolved.resolvedResponseType!, mine.responseSerialize, mine.responseDeserialize, reference.responseSerialize, reference.responseDeserialize],
    ] as const) {
      fc.assert(
        fc.property(messageOf(type, 3), (message) => {
          const bytes = theirEncode(message);
          expect(Buffer.from(ourEncode(message))).toEqual(Buffer.from(bytes));
          expect(ourDecode(bytes)).toEqual(theirDecode(bytes));
        }),
        { numRuns: 25 },
      );
    }
  });

  it('refuses an array for a message, as proto-loader does', () => {
    const probe = ours.Identity.Probe as Method;
    expect(() => probe.requestSerialize([] as unknown as object)).toThrow(/expected object with ProbeRequest structure, got array instead/);
  });
});
