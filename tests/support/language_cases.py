"""Seven programs per language, each with the outcome any sandbox must give it: hello (stdin to stdout), a compile
(or, interpreted, syntax) error, a runtime error, a failed assertion, a time limit and a memory limit. The memory
program allocates and touches far more than the test's cap, so only a limit stops it."""
from __future__ import annotations

from dataclasses import dataclass

from sandbox.api import Limits, RunRequest, RunResult
from sandbox.bwrap import BwrapConfig
from tests.support.sandbox import LoopedBackend


class Runner(LoopedBackend):
    """One program at a time in any language, under limits generous enough for a slow toolchain."""

    def __init__(self) -> None:
        super().__init__(BwrapConfig(warm_pool=1))

    def run(self, code: str, language: str, stdin: str = "", files: dict[str, str] | None = None,
            **limits: float) -> RunResult:
        return self.submit(RunRequest(code=code, language=language, stdin=stdin, files=files or {},
                                      limits=Limits(**{"wall_s": 30, "cpu_s": 30, "memory_mb": 512, **limits})))


def explain(r: RunResult) -> str:
    return f"{r.status} {r.reason} exit={r.exit_code} out={r.stdout[-300:]!r} err={r.stderr[-600:]!r} " \
           f"compile={r.compile_output[-600:]!r}"


@dataclass(frozen=True)
class Cases:
    hello: str  # reads one line and prints "hello <line>"
    compile_error: str
    runtime_error: str
    assertion: str  # a failed assertion and nothing else wrong
    loop: str  # never ends
    memory: str  # allocates without bound
    compiled: bool = False  # a syntax error is a compile_error (else a runtime_error)


CASES: dict[str, Cases] = {
    "python": Cases(
        "print('hello', input())", "def f(:\n  pass", "print(1 // 0)", "assert 1 == 2, 'no'",
        "while True:\n    pass", "x = []\nwhile True:\n    x.append(bytearray(1 << 24))"),
    "c": Cases(
        '#include <stdio.h>\nint main(){char b[64];scanf("%63s",b);printf("hello %s\\n",b);return 0;}',
        "int main(){ return x; }", "#include <stdlib.h>\nint main(){ abort(); }",
        "#include <assert.h>\nint main(){ assert(1 == 2); return 0; }", "int main(){ for(;;){} }",
        "#include <stdlib.h>\n#include <string.h>\nint main(){ for(;;){ char*p=malloc(1<<24);"
        " memset(p,1,1<<24);} }", compiled=True),
    "cpp": Cases(
        "#include <iostream>\nint main(){std::string s;std::cin>>s;std::cout<<\"hello \"<<s<<std::endl;}",
        "int main(){ return x; }", "#include <stdexcept>\nint main(){ throw std::runtime_error(\"bad\"); }",
        "#include <cassert>\nint main(){ assert(1 == 2); }", "int main(){ volatile int x=0; for(;;){x++;} }",
        "#include <vector>\n#include <cstring>\nint main(){ std::vector<char*> v; for(;;){ char*p=new char[1<<24];"
        " std::memset(p,1,1<<24); v.push_back(p);} }", compiled=True),
    "javascript": Cases(
        "const s=require('fs').readFileSync(0,'utf8').trim(); console.log('hello ' + s);", "function f( {",
        "null.x;", "console.assert(1 === 2, 'no'); console.log('still here');", "for(;;){}",
        "const a=[]; for(;;){ a.push(new Array(1e6).fill(1.5)); }"),
    "typescript": Cases(
        "const s: string = require('fs').readFileSync(0,'utf8').trim(); console.log('hello ' + s);",
        "const x: number = 'not a number';", "const o: any = null; console.log(o.x);",
        "import assert = require('node:assert');\nassert.deepEqual([1], [2]);", "for(;;){}",
        "const a: number[][] = []; for(;;){ a.push(new Array(1e6).fill(1.5)); }", compiled=True),
    "java": Cases(
        "import java.util.*;\npublic class Main { public static void"
            " main(String[] a){ Scanner s=new Scanner(System.in);"
        " System.out.println(\"hello \" + s.next()); } }",
        "public class Main { public static void main(String[] a){ int x = \"s\"; } }",
        "public class Main { public static void main(String[] a){ int[] x = new int[1]; x[2] = 1; } }",
        "public class Main { public static void main(String[] a){ assert 1 == 2 : \"no\"; } }",
        "public class Main { public static void main(String[] a){ while(true){} } }",
        "import java.util.*;\npublic class Main { public static void"
            " main(String[] a){ List<long[]> l=new ArrayList<>();"
        " while(true){ l.add(new long[1<<20]); } } }", compiled=True),
    "go": Cases(
        "package main\nimport \"fmt\"\nfunc main(){ var s string; fmt.Scan(&s); fmt.Println(\"hello \" + s) }",
        "package main\nfunc main(){ x := }", "package main\nfunc main(){ var a []int; _ = a[3] }",
        "package main\nfunc main(){ if 1 != 2 { panic(\"assertion failed\") } }", "package main\nfunc main(){ for {} }",
        "package main\nfunc main(){ var l [][]byte; for { b := make([]byte, 1<<24); for i := range b { b[i] = 1 };"
        " l = append(l, b) } }", compiled=True),
    "rust": Cases(
        "use std::io::*;\nfn main(){ let mut s=String::new(); stdin().read_line(&mut s).unwrap();"
        " println!(\"hello {}\", s.trim()); }",
        "fn main(){ let x: i32 = \"s\"; }", "fn main(){ let v: Vec<i32> = vec![]; let i = v.len() + 3;"
        " println!(\"{}\", v[i]); }",
        "fn main(){ let x = std::env::args().count(); debug_assert!(x == 99, \"no\"); }",
        "fn main(){ let mut x: u64 = 0; loop { x = x.wrapping_add(std::hint::black_box(1)); } }",
        "fn main(){ let mut v: Vec<Vec<u8>> = vec![]; loop { v.push(vec![1u8; 1 << 24]); } }", compiled=True),
    "csharp": Cases(
        "using System;\nclass P { static void Main(){ Console.WriteLine(\"hello \" + Console.ReadLine()); } }",
        "class P { static void Main(){ int x = \"s\"; } }",
        "using System;\nclass P { static void Main(){ int[] a = new int[1]; a[3] = 1; } }",
        "using System.Diagnostics;\nclass P { static void Main(){"
            " Debug.Assert(1 == 2); System.Console.WriteLine(\"on\"); } }",
        "class P { static void Main(){ while(true){} } }",
        "using System.Collections.Generic;\nclass P { static void Main(){ var l = new List<long[]>();"
        " while(true){ l.Add(new long[1<<20]); } } }", compiled=True),
    "php": Cases(
        "<?php echo 'hello ' . trim(fgets(STDIN)) . \"\\n\";", "<?php function f( {",
        "<?php throw new Exception('bad');", "<?php assert(1 == 2); echo 'still here';", "<?php while(true){}",
        "<?php $a = []; while(true){ $a[] = str_repeat('x', 1 << 20); }"),
    "lua": Cases(
        "print('hello ' .. io.read('l'))", "function f( end", "error('bad')", "assert(1 == 2, 'no')",
        "while true do end", "local t = {} while true do t[#t+1] = string.rep('x', 1 << 20) .. #t end"),
    "r": Cases(
        "con <- file('stdin'); s <- readLines(con, n = 1); close(con); cat('hello', s, '\\n', sep = ' ')",
        "f <- function( {", "stop('bad')", "stopifnot(1 == 2)", "while (TRUE) {}",
        "l <- list(); i <- 0; while (TRUE) { i <- i + 1; l[[i]] <- runif(2e6) }"),
    "perl": Cases(
        "my $s = <STDIN>; chomp $s; print \"hello $s\\n\";", "sub f { ", "die 'bad';",
        "use Test::More; is(1, 2); done_testing();", "while (1) {}", "my @a; while (1) { push @a, 'x' x (1 << 20); }"),
    "ruby": Cases(
        "s = gets.strip\nputs \"hello #{s}\"", "def f(\n", "raise 'bad'",
        "require 'test/unit'\nclass T < Test::Unit::TestCase\n  def test_a\n    assert_equal(1, 2)\n  end\nend",
        "loop do end", "a = []\nloop { a << ('x' * (1 << 20)) }"),
    "scala": Cases(
        "object Main { def main(a: Array[String]): Unit = println(\"hello \" + scala.io.StdIn.readLine()) }",
        "object Main { def main(a: Array[String]): Unit = { val x: Int = \"s\" } }",
        "object Main { def main(a: Array[String]): Unit = { val x = Array(1); println(x(3)) } }",
        "object Main { def main(a: Array[String]): Unit = assert(1 == 2) }",
        "object Main { def main(a: Array[String]): Unit = while (true) {} }",
        "object Main { def main(a: Array[String]): Unit = { val l ="
            " scala.collection.mutable.ArrayBuffer[Array[Long]]();"
        " while (true) l += new Array[Long](1 << 20) } }", compiled=True),
    "kotlin": Cases(
        "fun main() { println(\"hello \" + readLine()) }", "fun main() { val x: Int = \"s\" }",
        "fun main() { val a = IntArray(1); println(a[3]) }", "fun main() { assert(1 == 2) { \"no\" } }",
        "fun main() { while (true) {} }",
        "fun main() { val l = ArrayList<LongArray>(); while (true) l.add(LongArray(1 shl 20)) }", compiled=True),
    "racket": Cases(
        "#lang racket\n(printf \"hello ~a\\n\" (read-line))", "#lang racket\n(define (f x)",
        "#lang racket\n(car '())", "#lang racket\n(require rackunit)\n(check-equal? 1 2)\n(displayln \"on\")",
        "#lang racket\n(let loop () (loop))", "#lang racket\n(let loop ([l '()]) (loop (cons"
            " (make-vector 1000000 1) l)))"),
    "d": Cases(
        "import std.stdio, std.string;\nvoid main(){ writeln(\"hello \" ~ readln().strip()); }",
        "void main(){ int x = \"s\"; }", "void main(){ int[] a; a[3] = 1; }",
        "unittest { assert(1 == 2); }\nvoid main(){ }", "void main(){ while(true){} }",
        "void main(){ ubyte[][] l; while(true){ auto b = new ubyte[1 << 24]; b[] = 1; l ~= b; } }", compiled=True),
    "verilog": Cases(
        "module main; reg [8*32:1] s; initial begin if ($fscanf(32'h8000_0000, \"%s\", s)) ;"
        " $display(\"hello %0s\", s); $finish; end endmodule",
        "module main; initial begin x = ; end endmodule",
        "module main; initial begin $fatal(1, \"bad\"); end endmodule",
        "module main; initial begin assert (1 == 2); $finish; end endmodule",
        "module main; reg c = 0; always #1 c = ~c; endmodule",
        "", compiled=True),
    "haskell": Cases(
        "main :: IO ()\nmain = getLine >>= \\s -> putStrLn (\"hello \" ++ s)", "main = do x <-",
        "main :: IO ()\nmain = print (head ([] :: [Int]))",
        "import Control.Exception (assert)\nmain :: IO ()\nmain = assert (1 == (2 :: Int)) (putStrLn \"on\")",
        "{-# LANGUAGE BangPatterns #-}\nmain :: IO ()\nmain = let loop :: Int -> Int\n"
        "           loop !n = if n < 0 then n else loop (n + 1)\n       in print (loop 0)",
        "import qualified Data.Map as M\nmain :: IO ()\nmain = print"
            " (M.size (M.fromList [(i, i) | i <- [1 :: Int ..]]))",
        compiled=True),
    "ocaml": Cases(
        "let () = let s = read_line () in print_endline (\"hello \" ^ s)", "let x = ",
        "let () = print_int (List.hd [])", "let () = assert (1 = 2)", "let rec f x = f (x + 1)\nlet () = f 0",
        "let () = let l = ref [] in while true do l := Array.make 1000000 1.5 :: !l done", compiled=True),
    "elixir": Cases(
        "s = IO.gets(\"\") |> String.trim()\nIO.puts(\"hello \" <> s)", "defmodule M do", "raise \"bad\"",
        "ExUnit.start(autorun: false)\nimport"
            " ExUnit.Assertions\nassert 1 == 2", "Stream.repeatedly(fn -> 1 end) |> Stream.run()",
        "Enum.reduce(Stream.iterate(0, &(&1 + 1)), [], fn i, acc ->"
            " [:binary.copy(<<rem(i, 256)>>, 1_048_576) | acc] end)"),
    "bash": Cases(
        "read s\necho \"hello $s\"", "if then fi", "set -e\nls /nonexistent-dir\necho unreachable",
        "x=1\n[ \"$x\" -eq 2 ] || { echo 'assertion failed' >&2; exit 1; }", "while :; do :; done",
        "x=a\nwhile :; do x=$x$x; done"),
    "fortran": Cases(
        "program a\n  character(len=64) :: s\n  read(*,*) s\n  print '(A)', 'hello ' // trim(s)\nend program",
        "program a\n  x = \nend program", "program a\n  error stop 'bad'\nend program",
        "program a\n  if (1 /= 2) error stop 'assertion failed'\nend program",
        "program a\n  integer :: i\n  i = 0\n  do\n    i = i + 1\n  end do\nend program",
        "program a\n  real, allocatable :: x(:)\n  integer :: n\n  n = 1\n  do\n    n = n * 2\n    allocate(x(n))\n"
        "    x = 1.0\n    deallocate(x)\n  end do\nend program", compiled=True),
}
