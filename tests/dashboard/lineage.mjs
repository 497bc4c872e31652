// Runs the query-tool page's lineage composables (the dashboard's files at commit 1d3f4282 in the
// folder DASHBOARD_SRC names, as tests/test_dashboard_envelope.py reads them from the dashboard's
// repository; type-stripped by sucrase and nothing else) against a tracebus API, as the page
// does after resolving lots: primeResolvedLots([{container_id}, ...]) -> POST /api/trace/lineage
// through the page's own core/api.ts, then reads the trees it drew.
//   node lineage.mjs BASE_URL forward|reverse CID[,CID...]  -> one JSON document on stdout
import { mkdtempSync, mkdirSync, readFileSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { transform } from 'sucrase';

const here = dirname(fileURLToPath(import.meta.url));
const [base, direction, cids] = process.argv.slice(2);
const FILES = ['core/api.ts', 'shared-composables/useAsyncJobPolling.ts', 'query-tool/utils/values.ts',
  'query-tool/composables/useLotLineage.ts', 'query-tool/composables/useReverseLineage.ts'];

// Strip the types into .mjs files; the module names resolve as Vite resolves them.
const out = mkdtempSync(join(tmpdir(), 'dashboard-'));
for (const file of FILES) {
  let code = transform(readFileSync(join(process.env.DASHBOARD_SRC, file), 'utf8'), { transforms: ['typescript'] }).code;
  code = code.replace(/from '([^']+)'/g, (_, spec) => {
    if (spec === 'vue') return `from '${pathToFileURL(join(here, 'vue.mjs'))}'`;
    return `from '${spec.replace(/\.js$/, '')}.mjs'`;
  });
  const target = join(out, file.replace(/\.ts$/, '.mjs'));
  mkdirSync(dirname(target), { recursive: true });
  writeFileSync(target, code);
}

// A browser page on the dashboard's origin: relative URLs go to BASE_URL.
globalThis.window = globalThis;
globalThis.document = { querySelector: () => null };
const nodeFetch = globalThis.fetch;
globalThis.fetch = (url, init) => nodeFetch(new URL(url, base), init);

try {
  const name = direction === 'reverse' ? 'useReverseLineage' : 'useLotLineage';
  const module = await import(pathToFileURL(join(out, 'query-tool/composables', `${name}.mjs`)));
  const lineage = module[name]();
  const ids = cids.split(',');
  await lineage.primeResolvedLots(ids.map((cid) => ({ container_id: cid })));
  const entries = Object.fromEntries([...lineage.lineageMap.entries()].map(([cid, e]) => [cid, e]));
  process.stdout.write(JSON.stringify({
    roots: lineage.treeRoots.value,
    entries,
    names: Object.fromEntries(lineage.nameMap.entries()),
    edges: lineage.graphEdges.value,
    serials: Object.fromEntries(lineage.leafSerials.entries()),
  }));
} finally {
  rmSync(out, { recursive: true, force: true });
}
