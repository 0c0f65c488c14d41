import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parseFlags, parseListenAddress, UsageError, USAGE } from '../../csi/flags.js';

/** --metrics-address and --log-level as csi/flags.ts reads them (the process's answer: test/csi/metrics.test.ts). */
const base = ['--endpoint', 'unix:///tmp/x.sock', '--node-id', 'n'];

describe('--metrics-address', () => {
  it.each([
    ['127.0.0.1:9808', { host: '127.0.0.1', port: 9808 }],
    ['0.0.0.0:0', { host: '0.0.0.0', port: 0 }],
    ['[::1]:9808', { host: '::1', port: 9808 }],
    ['[::]:65535', { host: '::', port: 65535 }],
    [':9808', { port: 9808 }],
    ['localhost:9808', { host: 'localhost', port: 9808 }],
    ['metrics.twinvol-system.svc:80', { host: 'metrics.twinvol-system.svc', port: 80 }],
    // Digits in a name are fine where the last label is not all digits (that one reads as IPv4).
    ['10-0-0-1.node-7.local:80', { host: '10-0-0-1.node-7.local', port: 80 }],
  ])('%s is accepted', (value, want) => {
    expect(parseListenAddress(value, '--metrics-address')).toEqual(want);
    expect(parseFlags([...base, '--metrics-address', value], {}).metricsAddress).toEqual(want);
  });

  it.each(['', 'nonsense', '9808', '127.0.0.1', '127.0.0.1:', '127.0.0.1:65536', '127.0.0.1:-1', '127.0.0.1:123456', '::1:9808', '[::1:9808', '[::1]', '[localhost]:80', '[1.2.3.4]:80', 'bad host:80', '-bad:80', 'a..b:80', 'host:80:90', '127.0.0.1:9808/metrics', '999.999.999.999:9810', '1.2.3:9810', 'node-1.10:80'])(
    '%j is refused with the forms it takes',
    (value) => {
      expect(() => parseFlags([...base, '--metrics-address', value], {})).toThrow(UsageError);
      expect(() => parseListenAddress(value, '--metrics-address')).toThrow(/^--metrics-address must be host:port with a port from 0 to 65535 \(e\.g\. 0\.0\.0\.0:9810, \[::1\]:9810, :9810\), not /);
    },
  );

  it("its examples name deploy/'s metrics port, never the livenessprobe's in the same pod", () => {
    const ports = (file: string, flag: string) => [...readFileSync(new URL(`../../deploy/${file}`, import.meta.url), 'utf8').matchAll(new RegExp(`${flag}=:(\\d+)`, 'g'))].map((m) => Number(m[1]));
    const metrics = [...ports('node.yaml', '--metrics-address'), ...ports('controller.yaml', '--metrics-address')];
    const probes = [...ports('node.yaml', '--http-endpoint'), ...ports('controller.yaml', '--http-endpoint')];
    expect(new Set(metrics).size, 'deploy/ serves metrics on one port').toBe(1);
    expect(probes.length).toBeGreaterThan(0);
    expect(probes).not.toContain(metrics[0]);
    let message = '';
    try {
      parseListenAddress('nonsense', '--metrics-address');
    } catch (err) {
      message = String(err);
    }
    const usageLines = USAGE.slice(USAGE.indexOf('--metrics-address'), USAGE.indexOf('-h, --help'));
    for (const text of [usageLines, message]) {
      const shown = [...text.matchAll(/\]?:(\d{2,5})\b/g)].map((m) => Number(m[1]));
      expect(shown.length, text).toBeGreaterThan(0);
      expect(new Set(shown), text).toEqual(new Set(metrics));
    }
  });

  it('is off unless given', () => {
    expect(parseFlags(base, {}).metricsAddress).toBeUndefined();
  });
});

describe('--log-level', () => {
  it('defaults to info', () => {
    expect(parseFlags(base, {}).logLevel).toBe('info');
  });
  it.each(['trace', 'debug', 'info', 'warn', 'error'])('%s is accepted', (level) => {
    expect(parseFlags([...base, '--log-level', level], {}).logLevel).toBe(level);
  });
  it.each(['', 'INFO', 'verbose', 'fatal', 'silent'])('%j is refused', (level) => {
    expect(() => parseFlags([...base, '--log-level', level], {})).toThrow('--log-level must be one of trace, debug, info, warn, error');
  });
});
