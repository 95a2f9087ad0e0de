// airlock's witness for `node --test` (loaded with --test-reporter, written to stderr): a second
// account of every test, keyed with a secret read from a file this module removes as it loads.
import fs from "node:fs";

let key = null;
const path = process.env.AIRLOCK_WITNESS;
delete process.env.AIRLOCK_WITNESS;
try {
  key = fs.readFileSync(path, "utf8").trim();
  fs.unlinkSync(path);
} catch {
  key = null;
}
const line = (k, fields) =>
  key ? `@@airlock-witness:${key}:${JSON.stringify({ k, ...fields })}\n` : "";

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
