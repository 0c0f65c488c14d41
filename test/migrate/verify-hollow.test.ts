import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { leftovers, parseReport, useVerifyWorld, verify } from './verify-world.js';

/**
 * `twinvol migrate verify` must read the volume, not the directory it was to be mounted on. A driver
 * that answers Success to `mount` and mounts nothing (a check that took another mount for its own, a
 * mount made in another namespace) leaves the pod's directory empty in both models, and two empty
 * directories read the same: that is no proof the data survives the move.
 */
const world = useVerifyWorld();

afterEach(async () => {
  expect(await leftovers(world())).toEqual([]);
});

/** A non-attachable driver whose every verb succeeds and whose mount mounts nothing. */
const HOLLOW = ['#!/bin/bash', 'case "${1:-}" in', 'init) echo \'{"status":"Success","capabilities":{"attach":false}}\' ;;', 'mount|unmount) echo \'{"status":"Success"}\' ;;', '*) echo \'{"status":"Not supported"}\' ;;', 'esac', ''].join('\n');

describe('migrate verify: a mount that mounted nothing', () => {
  it('is a failed step, not a match of two empty directories', { timeout: 120_000 }, async () => {
    const s = world();
    const pluginDir = join(s.root, 'plugins');
    mkdirSync(join(pluginDir, 'acme~hollow'), { recursive: true });
    writeFileSync(join(pluginDir, 'acme~hollow', 'hollow'), HOLLOW);
    chmodSync(join(pluginDir, 'acme~hollow', 'hollow'), 0o755);
    const pvFile = join(s.root, 'pv-hollow.yaml');
    writeFileSync(pvFile, 'apiVersion: v1\nkind: PersistentVolume\nmetadata: {name: pv-hollow}\nspec:\n  capacity: {storage: 1Gi}\n  accessModes: [ReadWriteMany]\n  flexVolume: {driver: acme/hollow, options: {share: data}}\n');
    const r = await verify(s, ['pv-hollow', '--pv', pvFile, '--plugin-dir', pluginDir, '--json']);
    const report = parseReport(r);
    expect(r.exitCode).toBe(1);
    expect(report.verdict).toBe('failed');
    expect(report.error).toContain('nothing is mounted at');
  });
});
