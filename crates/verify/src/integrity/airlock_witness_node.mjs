// airlock's witness for `node --test` (loaded with --test-reporter, written to stderr): a second
// account of every test, keyed with a secret read from a file this module removes as it loads.
import witness from "./airlock_witness_key.cjs";

const line = witness.line;

export default async function* airlockWitness(source) {
  yield line("configure", {});
  let passed = 0;
  let failed = 0;
  for await (const ev of source) {
    const d = ev.data || {};
    const suite = d.details && d.details.type === "suite";
    if (ev.type === "test:pass" && !suite && !d.skip && !d.todo) passed += 1;
    if (ev.type === "test:fail" && !suite && !d.todo) failed += 1;
  }
  yield line("finish", { passed, failed, exitstatus: failed > 0 ? 1 : 0 });
}
