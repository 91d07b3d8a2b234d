// Preloaded into every JavaScript and TypeScript run (node --require): a failed console.assert prints as Node
// prints it and makes the run exit non-zero, even when the program exits 0 itself; HumanEval-X's JavaScript tests
// are console.assert calls, and Node's own would let a wrong program exit 0.
'use strict';
let failed = false;
const original = console.assert.bind(console);
console.assert = function assert(condition, ...data) {
  if (!condition) {
    failed = true;
    process.exitCode = 1;
  }
  return original(condition, ...data);
};
process.on('exit', () => {
  if (failed) process.exitCode = 1;
});
