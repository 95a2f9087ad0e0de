// The key of airlock's witness channel, shared by its reporters for node:test, vitest and jest:
// read from the file AIRLOCK_WITNESS names, which is removed at once (before any test code
// runs), and the variable with it. `emit` writes one keyed line to standard error.
const fs = require("fs");

let key = null;
const path = process.env.AIRLOCK_WITNESS;
delete process.env.AIRLOCK_WITNESS;
try {
  key = fs.readFileSync(path, "utf8").split("\n")[0].trim() || null;
  fs.unlinkSync(path);
} catch {
  key = null;
}

function line(k, fields) {
  return key ? `@@airlock-witness:${key}:${JSON.stringify({ k, ...fields })}\n` : "";
}

function emit(k, fields) {
  const text = line(k, fields);
  if (text) fs.writeSync(2, text);
}

module.exports = { line, emit };
