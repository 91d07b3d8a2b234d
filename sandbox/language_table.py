"""Every language the sandbox runs, as data: adding one is a row here and its toolchain in scripts/setup.sh.

Rules every row keeps: a failed assertion fails the run (no build or runtime switch that elides assertions:
Java and Kotlin run with ``-ea``, C/C++ compile without ``NDEBUG``, Rust keeps ``debug_assert!`` in its optimised
build, PHP runs with ``zend.assertions=1``, C# compiles with ``DEBUG`` and an entry point whose trace listener exits
1, Node's ``console.assert`` and rackunit's checks make the exit status non-zero, D compiles ``unittest`` blocks and
never ``-release``); caches and build output live in the run's own tmpfs (``/tmp``, the work dir); managed runtimes
get a heap sized from the run's memory and run under RLIMIT_DATA, the memory cgroup holding the rest.
"""
from __future__ import annotations

from sandbox.language_spec import Language

# Half the run's memory for the heap and a 32nd for each thread's stack (64 MiB from 2 GiB up): under RLIMIT_DATA
# the JVM's own threads' stacks, its code cache and metaspace need the rest.
_JVM_RUN = ("-ea", "-Xmx{jvm_heap}m", "-Xss{jvm_stack}m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
            "-XX:ReservedCodeCacheSize=32m")
# Compilers that are JVM programs (scalac, kotlinc) read their JVM's flags from JAVA_OPTS; C1 only starts them faster.
_JVM_COMPILER_OPTS = ("JAVA_OPTS", "-Xmx1024m -Xss16m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xshare:auto")
_JAVA_CLASSPATH = ".:/usr/share/java/javatuples.jar:/usr/share/java/junit4.jar:/usr/share/java/hamcrest-core.jar"
_NODE_PRELOAD = ("--require", "{support}/console_assert.js")
_NODE_ENV = (("NODE_PATH", "/usr/lib/node_modules:/usr/local/lib/node_modules"),)
# jest and Babel, installed by scripts/setup.sh with npm into a directory of their own (a test runner's packages do
# not belong on every JavaScript program's module path); jest_run.js finds them through JEST_HOME.
JEST_HOME = "/usr/local/share/reward-sandbox/jest/node_modules"
_JEST_ENV = (("JEST_HOME", JEST_HOME), ("NODE_PATH", f"{JEST_HOME}:{_NODE_ENV[0][1]}"))
_GO_ENV = (("GOCACHE", "/tmp/go-cache"), ("GOPATH", "/tmp/go:/usr/local/share/reward-sandbox/go"),
           ("CGO_ENABLED", "0"), ("GOFLAGS", "-mod=mod"), ("GO111MODULE", "off"), ("GOTOOLCHAIN", "local"))
# rand, regex and md5 (HumanEval-X's Rust declarations use them), built by scripts/rust_crates.sh from Debian's
# crate sources with the same rustc. An --extern a program does not use costs rustc nothing (the crate is loaded
# only when named), and one whose rlib is missing is an error only for a program that names it.
RUST_CRATES = "/usr/local/share/reward-sandbox/rust-crates"
_RUST_FLAGS = ("-O", "-C", "debug-assertions=on", "-C", "overflow-checks=off", "--edition", "2021",
               "-L", f"dependency={RUST_CRATES}/deps",
               *(arg for crate in ("rand", "regex", "md5")
                 for arg in ("--extern", f"{crate}={RUST_CRATES}/lib{crate}.rlib")))
# numpy's and scipy's BLAS start a thread (and reserve its buffers, counted by RLIMIT_AS) per core at import: one
# thread keeps `import numpy, pandas, scipy` inside a 512 MiB run, and a run has few processes to spare anyway.
_BLAS_ENV = (("OPENBLAS_NUM_THREADS", "1"), ("OMP_NUM_THREADS", "1"), ("MKL_NUM_THREADS", "1"))
_SCALA_MAIN = r"(?s)^[ \t]*object[ \t]+(\w+)(?:(?!^[ \t]*object[ \t]).)*?def[ \t]+main\b"

LANGUAGES: tuple[Language, ...] = (
    Language("python", "main.py", run=("{python}", "-S", "-I", "{src}"), inline_python=True, env=_BLAS_ENV,
             aliases=("python3", "py"), version=("{python}", "--version"),
             assertions="assert; never run with -O (PYTHONOPTIMIZE is cleared with the environment)"),
    Language("pytest", "test_main.py", run=("{python}", "-S", "-m", "pytest", "-q", "-p", "no:cacheprovider",
                                            "--rootdir=.", "{src}"),
             env=(("PYTHONPATH", "{pythonpath}"), *_BLAS_ENV), version=("{python}", "-m", "pytest", "--version"),
             assertions="pytest's rewritten assert; any failed or erroring test exits 1"),
    Language("c", "main.c", compile=("gcc", "-O2", "-std=gnu17", "-UNDEBUG", "-o", "main", "{src}", "-lm"),
             run=("./main",), tools=("gcc",), version=("gcc", "-dumpfullversion"),
             assertions="assert.h; compiled without NDEBUG (a program may still define it itself)"),
    Language("cpp", "main.cpp", compile=("g++", "-O2", "-std=gnu++17", "-UNDEBUG", "-o", "main", "{src}"),
             run=("./main",), tools=("g++",), aliases=("c++",), version=("g++", "-dumpfullversion"),
             assertions="cassert; compiled without NDEBUG"),
    Language("javascript", "main.js", run=("node", *_NODE_PRELOAD, "--max-old-space-size={heap}", "{src}"),
             tools=("node",), memory_rlimit="data", env=_NODE_ENV, aliases=("js", "node", "nodejs"),
             version=("node", "--version"), assertions="node:assert throws; a failed console.assert exits 1"),
    Language("typescript", "main.ts",
             compile=("tsc", "--target", "es2020", "--module", "commonjs", "--skipLibCheck", "--esModuleInterop",
                      "--typeRoots", "/usr/lib/node_modules/@types", "--types", "node", "--outDir", ".", "{src}"),
             run=("node", *_NODE_PRELOAD, "--max-old-space-size={heap}", "{main}.js"),
             tools=("tsc", "node"), memory_rlimit="data", env=_NODE_ENV, aliases=("ts",),
             version=("tsc", "--version"),
             assertions="tsc type-checks (a type error is a compile error, as MultiPL-E runs it); then as javascript"),
    # SandboxFusion writes a jest program to a `.test.ts` file: TypeScript or JavaScript, tests beside the code
    Language("jest", "main.test.ts", run=("node", "--max-old-space-size={heap}", "{support}/jest_run.js"),
             tools=("node",), memory_rlimit="data", env=_JEST_ENV, requires=(f"{JEST_HOME}/jest/package.json",),
             version=("node", "-p", f"'jest ' + require('{JEST_HOME}/jest/package.json').version"),
             assertions="expect() and anything a test throws fail it (node:assert too); a failed test, a suite that "
                        "cannot run (a syntax error) or no test at all exits 1"),
    Language("java", "Main.java",
             compile=("javac", "-J-Xmx512m", "-J-XX:TieredStopAtLevel=1", "-encoding", "UTF-8", "-cp", _JAVA_CLASSPATH,
                      "{src}"),
             run=("java", *_JVM_RUN, "-cp", _JAVA_CLASSPATH, "{main}"), tools=("javac", "java"),
             memory_rlimit="data", source_pattern=r"^\s*public\s+(?:final\s+)?class\s+(\w+)",
             version=("java", "-version"), assertions="assert; run with -ea (the JVM's default is off)"),
    Language("junit", "Main.java",
             compile=("javac", "-J-Xmx512m", "-J-XX:TieredStopAtLevel=1", "-encoding", "UTF-8", "-cp", _JAVA_CLASSPATH,
                      "{src}"),
             run=("java", *_JVM_RUN, "-cp", _JAVA_CLASSPATH, "org.junit.runner.JUnitCore", "{main}"),
             tools=("javac", "java"), memory_rlimit="data",
             source_pattern=r"^\s*public\s+(?:final\s+)?class\s+(\w+)", version=("java", "-version"),
             assertions="JUnit 4's asserts; a failed test exits 1; assert runs with -ea"),
    Language("go", "main.go", compile=("bash", "{support}/go_warm.sh", "build", "-o", "main", "{src}"),
             run=("./main",), tools=("bash", "go"),
             memory_rlimit="data", env=_GO_ENV, compile_processes=256, aliases=("golang",),
             version=("go", "version"), assertions="no assert statement; panic exits 2"),
    Language("go_test", "main_test.go",
             compile=("bash", "{support}/go_warm.sh", "test", "-c", "-o", "main", "{src}"),
             run=("./main", "-test.v"), tools=("bash", "go"), memory_rlimit="data", env=_GO_ENV, compile_processes=256,
             version=("go", "version"), assertions="testing.T failures (testify's assert) exit 1"),
    Language("rust", "main.rs", compile=("rustc", *_RUST_FLAGS, "-o", "main", "{src}"), run=("./main",),
             tools=("rustc",), aliases=("rs",), version=("rustc", "--version"),
             assertions="assert! and debug_assert! (debug-assertions on in the optimised build; overflow unchecked)"),
    Language("rust_test", "main.rs", compile=("rustc", "--test", *_RUST_FLAGS, "-o", "main", "{src}"),
             run=("./main", "--test-threads=1"), tools=("rustc",), version=("rustc", "--version"),
             assertions="#[test] functions; a failed test exits 101"),
    Language("bash", "main.sh", run=("bash", "{src}"), tools=("bash",), aliases=("sh", "shell"),
             version=("bash", "--version")),
    Language("csharp", "main.cs",
             compile=("mcs", "-d:DEBUG", "-d:TRACE", "-debug", "-optimize-", "-nowarn:414,169,219,162,168",
                      "-r:System.Numerics.dll", "-r:System.Core.dll", "-main:RewardSandboxEntry", "-out:main.exe",
                      "{src}", "{support}/AssertEntry.cs"),
             run=("mono", "--debug", "main.exe"), tools=("mcs", "mono"), memory_rlimit="data",
             env=(("MONO_GC_PARAMS", "max-heap-size={heap}m"),),
             aliases=("cs", "c#", "mono", "c_sharp"), version=("mono", "--version"),
             assertions="Debug.Assert and Trace.Assert: compiled with DEBUG and TRACE; the entry point exits 1 on a "
                        "failed one (Mono prints and carries on)"),
    Language("php", "main.php", run=("php", "-d", "zend.assertions=1", "-d", "assert.exception=1",
                                     "-d", "memory_limit={heap}M", "-d", "display_errors=stderr", "{src}"),
             tools=("php",), version=("php", "--version"),
             assertions="assert(): zend.assertions=1 (Debian's php.ini turns them off) and assert.exception=1"),
    Language("lua", "main.lua", run=("lua5.4", "{src}"), tools=("lua5.4",), version=("lua5.4", "-v"),
             assertions="assert and luaunit's asserts raise"),
    Language("r", "main.R", run=("Rscript", "--vanilla", "{src}"), tools=("Rscript",), aliases=("rscript",),
             memory_rlimit="data", version=("Rscript", "--version"), assertions="stopifnot and stop() exit 1"),
    Language("perl", "main.pl", run=("perl", "{src}"), tools=("perl",), aliases=("pl",),
             version=("perl", "-e", "print $^V"), assertions="Test::More/Test::Deep exit non-zero on a failed test"),
    Language("ruby", "main.rb", run=("ruby", "{src}"), tools=("ruby",), aliases=("rb",),
             version=("ruby", "--version"), assertions="test/unit and minitest exit 1 on a failed test"),
    Language("scala", "Main.scala", compile=("scalac", "-nowarn", "-d", ".", "{src}"),
             run=("java", *_JVM_RUN, "-cp", ".:/usr/share/scala-2.11/lib/scala-library.jar", "{main}"),
             tools=("scalac", "java"), memory_rlimit="data", env=(_JVM_COMPILER_OPTS,),
             source_pattern=_SCALA_MAIN, version=("scalac", "-version"),
             assertions="Predef.assert (never elided: no -Xdisable-assertions); Java's assert with -ea"),
    Language("kotlin", "main.kt", compile=("kotlinc", "-nowarn", "{src}", "-d", "."),
             run=("java", *_JVM_RUN, "-cp", ".:/usr/share/kotlin/kotlinc/lib/kotlin-stdlib.jar", "MainKt"),
             tools=("kotlinc", "java"), memory_rlimit="data", env=(_JVM_COMPILER_OPTS,), aliases=("kt",),
             version=("kotlinc", "-version"), assertions="assert(): the JVM's, run with -ea"),
    Language("kotlin_script", "main.kts", run=("kotlinc", "-nowarn", "-J-ea", "-J-Xmx{jvm_heap}m", "-script", "{src}"),
             tools=("kotlinc",), memory_rlimit="data", env=(_JVM_COMPILER_OPTS,), aliases=("kts",),
             version=("kotlinc", "-version"), assertions="assert(): the JVM's, run with -ea"),
    Language("racket", "main.rkt", run=("racket", "{support}/rackunit_exit.rkt", "{src}"), tools=("racket",),
             memory_rlimit="data", env=(("PLTUSERHOME", "/tmp"), ("PLT_CS_COMPILE_LIMIT", "100000")),
             aliases=("rkt",), version=("racket", "--version"),
             assertions="rackunit checks: a failed check outside a test suite exits 1 (rackunit alone carries on)"),
    # a -unittest build runs only the unittests unless told to run main after them (D's runtime takes --DRT-
    # options off the command line before main sees it)
    Language("d", "main.d", compile=("ldc2", "-unittest", "-O1", "-of=main", "{src}"),
             run=("./main", "--DRT-testmode=run-main"),
             tools=("ldc2",), memory_rlimit="data", aliases=("d_ut", "dlang"), version=("ldc2", "--version"),
             assertions="assert and unittest blocks: compiled with -unittest, never -release"),
    Language("verilog", "main.v", compile=("iverilog", "-g2012", "-o", "main", "{src}"),
             run=("bash", "{support}/vvp_run.sh", "main"),
             tools=("iverilog", "vvp", "bash"), aliases=("iverilog", "systemverilog"), version=("iverilog", "-V"),
             assertions="$fatal, $error and SystemVerilog immediate assert (compiled with -g2012): vvp reports "
                        "them and exits 0, so the run fails when it printed one"),
    Language("haskell", "main.hs", compile=("ghc", "-O0", "-outputdir", "/tmp/ghc", "-o", "main", "{src}"),
             run=("./main",), tools=("ghc",), memory_rlimit="data", aliases=("hs",),
             version=("ghc", "--numeric-version"), assertions="Control.Exception.assert is kept at -O0"),
    Language("ocaml", "main.ml", compile=("ocamlopt", "-I", "+str", "-I", "+unix", "str.cmxa", "unix.cmxa",
                                          "-o", "main", "{src}"),
             run=("./main",), tools=("ocamlopt",), memory_rlimit="data", aliases=("ml",),
             version=("ocamlopt", "-version"), assertions="assert (never compiled with -noassert)"),
    Language("elixir", "main.exs", run=("elixir", "{src}"), tools=("elixir",), memory_rlimit="data",
             env=(("MIX_HOME", "/tmp/mix"),), aliases=("ex", "exs"),
             version=("elixir", "--short-version"), assertions="ExUnit's assert and a failed match raise"),
    Language("fortran", "main.f90", compile=("gfortran", "-O2", "-o", "main", "{src}"), run=("./main",),
             tools=("gfortran",), aliases=("f90",), version=("gfortran", "-dumpfullversion"),
             assertions="no assert statement; error stop exits non-zero"),
)
