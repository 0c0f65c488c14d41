import { describe, expect, it } from 'vitest';
import { DEFAULT_SIZE_BYTES, sizeFromRange } from '../../../csi/capacity.js';
import { expectThrows } from '../../shared/expect-error.js';

const MiB = 2 ** 20;
const GiB = 2 ** 30;
const range = (required: number | string, limit: number | string = 0) => ({ required_bytes: String(required), limit_bytes: String(limit) });

describe('capacity_range: the size a CreateVolume or ControllerExpandVolume asks for', () => {
  it('no range is the default size', () => {
    expect(sizeFromRange(undefined, DEFAULT_SIZE_BYTES, MiB)).toBe(10 * GiB);
    expect(sizeFromRange(null, DEFAULT_SIZE_BYTES, 1)).toBe(10 * GiB);
  });

  it('required_bytes is the size', () => {
    expect(sizeFromRange(range(64 * MiB), DEFAULT_SIZE_BYTES, MiB)).toBe(64 * MiB);
    expect(sizeFromRange(range(1000), DEFAULT_SIZE_BYTES, 1)).toBe(1000);
  });

  it('block sizes round up to whole MiB', () => {
    expect(sizeFromRange(range(MiB + 1), DEFAULT_SIZE_BYTES, MiB)).toBe(2 * MiB);
    expect(sizeFromRange(range(1), DEFAULT_SIZE_BYTES, MiB)).toBe(MiB);
  });

  it('only limit_bytes: the default capped by the limit (rounded down to whole MiB for block)', () => {
    expect(sizeFromRange(range(0, 100 * MiB), DEFAULT_SIZE_BYTES, MiB)).toBe(100 * MiB);
    expect(sizeFromRange(range(0, 20 * GiB), DEFAULT_SIZE_BYTES, MiB)).toBe(10 * GiB);
    expect(sizeFromRange(range(0, 1.5 * MiB), DEFAULT_SIZE_BYTES, MiB)).toBe(MiB);
    expect(sizeFromRange(range(0, 1500), DEFAULT_SIZE_BYTES, 1)).toBe(1500);
  });

  it('rounding up never passes limit_bytes: the largest whole MiB within the range is taken', () => {
    expect(sizeFromRange(range(1.5 * MiB, 3 * MiB), DEFAULT_SIZE_BYTES, MiB)).toBe(2 * MiB);
    expect(sizeFromRange(range(1.5 * MiB, 2 * MiB), DEFAULT_SIZE_BYTES, MiB)).toBe(2 * MiB);
  });

  it('required equal to limit is exactly that size', () => {
    expect(sizeFromRange(range(4 * MiB, 4 * MiB), DEFAULT_SIZE_BYTES, MiB)).toBe(4 * MiB);
  });

  it('a zero range with no default (static volumes, expansion) asks for nothing', () => {
    expect(sizeFromRange(range(0, 0), 0, 1)).toBe(0);
    expect(sizeFromRange(undefined, 0, MiB)).toBe(0);
  });
});

describe('capacity_range refusals: inconsistent is INVALID_ARGUMENT, unsatisfiable is OUT_OF_RANGE', () => {
  it('limit_bytes below required_bytes is INVALID_ARGUMENT naming both', () => {
    expectThrows(() => sizeFromRange(range(2 * MiB, MiB), DEFAULT_SIZE_BYTES, MiB), 'InvalidArgument', `the size limit ${MiB} bytes is below the required ${2 * MiB} bytes`);
  });

  it.each([
    ['required_bytes', range('-1')],
    ['limit_bytes', range(0, '-5')],
  ])('a negative %s is INVALID_ARGUMENT', (field, r) => {
    expectThrows(() => sizeFromRange(r, DEFAULT_SIZE_BYTES, MiB), 'InvalidArgument', `capacity_range.${field} must not be negative`);
  });

  it.each([['1.5'], ['1e9'], [''], ['0x10'], [' 1'], ['12345678901234567890']])('required_bytes %j is not an integer', (value) => {
    expectThrows(() => sizeFromRange(range(value), DEFAULT_SIZE_BYTES, MiB), 'InvalidArgument', 'capacity_range.required_bytes is not an integer');
  });

  it('no whole MiB between required and limit is OUT_OF_RANGE', () => {
    expectThrows(() => sizeFromRange(range(MiB + 1, MiB + 1000), DEFAULT_SIZE_BYTES, MiB), 'OutOfRange', 'no size that is a whole multiple of 1048576 bytes');
    expectThrows(() => sizeFromRange(range(0, 1000), DEFAULT_SIZE_BYTES, MiB), 'OutOfRange', 'no size that is a whole multiple of 1048576 bytes');
  });

  it('more than 1 PiB is OUT_OF_RANGE, even where int64 still holds it', () => {
    expectThrows(() => sizeFromRange(range(2 ** 50 + MiB), DEFAULT_SIZE_BYTES, MiB), 'OutOfRange', '1 PiB');
    expectThrows(() => sizeFromRange(range('9223372036854775807'), DEFAULT_SIZE_BYTES, 1), 'OutOfRange', '1 PiB');
  });
});
