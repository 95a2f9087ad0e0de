// airlock's witness for jest (loaded with --reporters): a second account of the run, written to
// standard error and keyed with a secret read from a file this module removes as it loads.
const { emit } = require("./airlock_witness_key.cjs");

class AirlockWitness {
  constructor() {
    this.passed = 0;
    this.failed = 0;
    emit("configure", {});
  }
  onTestResult(_test, result) {
    this.passed += result.numPassingTests || 0;
    this.failed += result.numFailingTests || 0;
    if (result.testExecError || result.failureMessage && !result.numFailingTests) this.failed += 1;
  }
  onRunComplete(_contexts, results) {
    emit("finish", {
      passed: this.passed,
      failed: this.failed,
      exitstatus:
        this.failed > 0 ||
        (results && (results.numFailedTestSuites > 0 || results.numRuntimeErrorTestSuites > 0))
          ? 1
          : 0,
    });
  }
}
module.exports = AirlockWitness;
