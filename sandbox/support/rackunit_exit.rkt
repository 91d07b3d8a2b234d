#lang racket/base
;; Runs the program's module (and its main submodule, as `racket main.rkt` would), then exits 1 when a rackunit check
;; failed outside a test suite: rackunit reports such a failure on stderr and carries on, so the program would exit 0.
(require rackunit/log racket/vector)
(define arguments (current-command-line-arguments))
(define path (path->complete-path (string->path (vector-ref arguments 0))))
(current-command-line-arguments (vector-drop arguments 1))
(dynamic-require path #f)
(when (module-declared? `(submod ,path main) #t) (dynamic-require `(submod ,path main) #f))
(void (test-log #:display? #f #:exit? #t))
