import { describe, expect, it } from 'vitest';
import { idForName, idForNameOrUndefined } from '../../shared/names.js';
import { isValidId } from '../../shared/validate.js';
import { expectThrows } from './expect-error.js';

describe('idForName (shared/names.ts)', () => {
  it('keeps a name that is a valid id, and derives the same id for the same name every time', () => {
    expect(idForName('pvc-1b2c3d4e')).toBe('pvc-1b2c3d4e');
    const id = idForName('vol+1');
    expect(id).toBe(idForName('vol+1'));
    expect(id).toMatch(/^vol-1__[0-9a-f]{32}$/);
    expect(idForName('vol 1')).not.toBe(id);
  });

  it('derives an id for a valid id that has the derived form, so it cannot take a derived id over', () => {
    const derived = idForName('vol+1');
    expect(isValidId(derived)).toBe(true);
    const again = idForName(derived);
    expect(again).not.toBe(derived);
    expect(again.startsWith(`${derived.slice(0, 64)}__`)).toBe(true);
  });

  it('always derives a valid id of at most 128 bytes, whatever the name', () => {
    for (const name of ['..', '/', '-', '___', '日本語', '☃'.repeat(42), `${'a'.repeat(127)}+`, '.x', 'a'.repeat(90) + '/'])
      expect(isValidId(idForName(name)), name).toBe(true);
    expect(idForName('日本語')).toMatch(/^name__[0-9a-f]{32}$/);
  });

  it('refuses what the CSI spec refuses, naming the rule', () => {
    expectThrows(() => idForName(''), 'InvalidArgument', 'name is required');
    expectThrows(() => idForName('é'.repeat(64) + 'x'), 'InvalidArgument', 'longer than 128 bytes');
    expectThrows(() => idForName('a\u009fb'), 'InvalidArgument', 'control characters');
    expectThrows(() => idForName('a\ud800b'), 'InvalidArgument', 'well-formed Unicode');
    expect(idForNameOrUndefined('a\nb')).toBeUndefined();
  });
});
