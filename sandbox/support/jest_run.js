// The jest test mode: runs jest (installed at set-up, found through NODE_PATH) over the work directory in this one
// process. TypeScript and modern JavaScript go through Babel (types are stripped, not checked, as SandboxFusion's
// jest runs them); tests run in jest's Node environment; no watchman, and the cache stays in the run's /tmp.
// jest's own report goes to stderr as it prints it; the last line of stdout is jest --json's report, where each
// test's result is. The run passes only when jest finished with every suite run and no test failed: a program that
// ends the process before jest has its results (process.exit(0) at the top of a test file) fails the run instead
// of passing with its tests unrun, and the process exits as soon as the report is out (a server or a timer a test
// left behind does not keep it waiting for the wall clock).
'use strict';
const path = require('path');

// Node writes to a pipe or a file synchronously on Linux, so what is written is out before the exit below; both
// writers are taken now, before a test could replace them.
const out = process.stdout.write.bind(process.stdout);
const err = process.stderr.write.bind(process.stderr);
const stringify = JSON.stringify;
const reallyExit = process.reallyExit;
let finished = false;

function leave(code) {
  finished = true;
  reallyExit.call(process, code);
}

// process.exit ends in process.reallyExit, which jest's own process.exit in a test calls too.
process.reallyExit = function exitBeforeResults(code) {
  if (!finished) {
    err(`jest: the process was ended (exit code ${code}) before the tests finished\n`);
    leave(1);
  }
  return reallyExit.call(process, code);
};
process.on('exit', () => {
  if (!finished) process.exitCode = 1;
});

const home = process.env.JEST_HOME;
const cwd = process.cwd();
const babel = {
  babelrc: false,
  configFile: false,
  presets: [[path.join(home, '@babel/preset-env'), {targets: {node: 'current'}}],
            path.join(home, '@babel/preset-typescript')],
};
const config = {
  rootDir: cwd,
  testEnvironment: 'node',
  transform: {'\\.[cm]?[jt]sx?$': [path.join(home, 'babel-jest'), babel]},
  haste: {forceNodeFilesystemAPI: true},
  cacheDirectory: '/tmp/jest-cache',
  watchman: false,
};

async function main() {
  const {runCLI} = require(path.join(home, '@jest/core'));
  const {formatTestResults} = require(path.join(home, '@jest/test-result'));
  const argv = {_: [], $0: 'jest', config: stringify(config), runInBand: true, ci: true, watchman: false};
  const {results} = await runCLI(argv, [cwd]);
  const report = stringify(formatTestResults(results));
  const passed = results.success && results.numRuntimeErrorTestSuites === 0 && results.numTotalTests > 0;
  finished = true;
  out(`\n${report}\n`);
  leave(passed ? 0 : 1);
}

main().catch((error) => {
  err(`jest: ${error && error.stack ? error.stack : error}\n`);
  leave(1);
});
