// Generates the TypeScript types of the CSI messages from csi/proto/csi.proto with @grpc/proto-loader's
// own generator, into csi/generated/ (not committed). The options are the ones csi/definition.ts loads
// the protocol with (LOADER_OPTIONS): field names as written, int64 as strings, enums by name, defaults
// filled, oneof names; so the types describe exactly the objects the server and the tests handle.
// Type-only: the bundles (scripts/build.mjs) need none of it, `tsc` needs all of it. Skipped when the
// output is newer than the proto.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';

const root = resolve(import.meta.dirname, '..');
const proto = join(root, 'csi/proto/csi.proto');
const out = join(root, 'csi/generated');
const stamp = join(out, 'package.json');

if (existsSync(stamp) && statSync(stamp).mtimeMs >= statSync(proto).mtimeMs && !process.argv.includes('--force')) process.exit(0);

const generator = join(dirname(createRequire(import.meta.url).resolve('@grpc/proto-loader/package.json')), 'build/bin/proto-loader-gen-types.js');
rmSync(out, { recursive: true, force: true });
const options = ['--keepCase', '--longs=String', '--enums=String', '--defaults', '--oneofs', '--grpcLib=@grpc/grpc-js', `--outDir=${out}`, `--includeDirs=${dirname(proto)}`];
const r = spawnSync(process.execPath, [generator, 'csi.proto', ...options], { cwd: root, encoding: 'utf8' });
if (r.status !== 0) {
  console.error(`proto-loader-gen-types failed (exit ${r.status}):\n${(r.stderr || r.stdout).slice(0, 4000)}`);
  process.exit(1);
}
// The generator writes extensionless relative imports, which TypeScript accepts only in CommonJS
// files: the folder is marked so. Written last, it is also the stamp that says the output is whole.
mkdirSync(out, { recursive: true });
writeFileSync(stamp, '{ "type": "commonjs" }\n');
